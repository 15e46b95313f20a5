package auth

import (
	"context"
	"crypto"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
)

const (
	testIssuer   = "https://id.example.com/"
	testAudience = "https://memory.example.com/mcp"
)

// jwtFixture is a JWT verifier on a live JWKS server with keys "a" (RSA,
// alg RS256), "ec" (P-256, no alg) and "ed" (Ed25519).
type jwtFixture struct {
	idp   *jwksServer
	clock *clock
	v     *JWT
}

func newJWTFixture(t *testing.T) *jwtFixture {
	t.Helper()
	testKeys(t)
	f := &jwtFixture{clock: newClock()}
	f.idp = newJWKSServer(t, jwksDoc(t, publicJWK(t, rsaA, "a", "RS256"), publicJWK(t, ecA, "ec", ""), publicJWK(t, edA, "ed", "")))
	v, err := NewJWT(JWTOptions{
		Issuer: testIssuer, Audience: testAudience, JWKSURL: f.idp.URL + "/jwks.json",
		ClockSkew: 30 * time.Second, Now: f.clock.now, MinRefetch: time.Nanosecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.v = v
	return f
}

// claims returns valid claims, changed by edits (a nil value deletes).
func (f *jwtFixture) claims(edits map[string]any) map[string]any {
	c := map[string]any{
		"iss": testIssuer, "aud": testAudience, "sub": "user-1",
		"exp": f.clock.unix(time.Hour), "iat": f.clock.unix(-time.Minute), "nbf": f.clock.unix(-time.Minute),
		"scope": "memory:read memory:write",
	}
	for k, v := range edits {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func b64json(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b64(b)
}

func TestJWTAttacks(t *testing.T) {
	f := newJWTFixture(t)
	rs := func(edits map[string]any) string {
		return sign(t, rsaA, "RS256", map[string]any{"kid": "a"}, f.claims(edits))
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: must(x509.MarshalPKIXPublicKey(&rsaA.PublicKey))})
	hs256WithPublicKey := func() string {
		head := b64json(t, map[string]any{"alg": "HS256", "typ": "JWT", "kid": "a"})
		body := b64json(t, f.claims(nil))
		mac := hmac.New(sha256.New, pubPEM)
		mac.Write([]byte(head + "." + body))
		return head + "." + body + "." + b64(mac.Sum(nil))
	}
	algNone := b64json(t, map[string]any{"alg": "none", "kid": "a"}) + "." + b64json(t, f.claims(nil)) + "."
	tampered := func() string {
		parts := strings.Split(rs(nil), ".")
		parts[1] = b64json(t, f.claims(map[string]any{"sub": "admin"}))
		return strings.Join(parts, ".")
	}
	big := rs(map[string]any{"pad": strings.Repeat("x", MaxTokenBytes)})
	// signRaw signs a header and claims given as raw JSON, as a careless or
	// hostile issuer could write them.
	signRaw := func(head, body string) string {
		input := b64([]byte(head)) + "." + b64([]byte(body))
		sum := sha256.Sum256([]byte(input))
		sig, err := rsa.SignPKCS1v15(nil, rsaA, crypto.SHA256, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		return input + "." + b64(sig)
	}
	claimsJSON := string(must(json.Marshal(f.claims(nil))))
	duplicated := func() string {
		// sub twice: jwx keeps the last, another reader the first.
		return signRaw(`{"alg":"RS256","kid":"a"}`, strings.TrimSuffix(claimsJSON, "}")+`,"sub":"admin"}`)
	}
	duplicatedHeader := func() string {
		return signRaw(`{"alg":"RS256","kid":"a","kid":"a"}`, claimsJSON)
	}
	if _, _, err := f.v.Verify(context.Background(), signRaw(`{"alg":"RS256","kid":"a"}`, claimsJSON)); err != nil {
		t.Fatalf("a token signed from raw JSON: %v", err)
	}
	attacker := publicJWK(t, rsaB, "a", "RS256")

	cases := []struct {
		name   string
		token  string
		status int
	}{
		{"a valid RS256 token passes", rs(nil), 200},
		{"a valid ES256 token with a key without alg passes", sign(t, ecA, "ES256", map[string]any{"kid": "ec"}, f.claims(nil)), 200},
		{"a valid EdDSA token passes", sign(t, edA, "EdDSA", map[string]any{"kid": "ed"}, f.claims(nil)), 200},
		{"alg none is refused", algNone, 401},
		{"HS256 keyed with the RSA public key is refused", hs256WithPublicKey(), 401},
		{"PS256 with a key whose JWKS alg is RS256 is refused", sign(t, rsaA, "PS256", map[string]any{"kid": "a"}, f.claims(nil)), 401},
		{"ES256 naming an Ed25519 key is refused", sign(t, ecA, "ES256", map[string]any{"kid": "ed"}, f.claims(nil)), 401},
		{"a signature by another key under a known kid is refused", sign(t, rsaB, "RS256", map[string]any{"kid": "a"}, f.claims(nil)), 401},
		{"a tampered payload is refused", tampered(), 401},
		{"an embedded jwk header is not trusted", sign(t, rsaB, "RS256", map[string]any{"kid": "a", "jwk": attacker}, f.claims(nil)), 401},
		{"a jku header is not followed", sign(t, rsaB, "RS256", map[string]any{"kid": "evil", "jku": f.idp.URL + "/evil"}, f.claims(nil)), 401},
		{"an unknown kid is refused", sign(t, rsaB, "RS256", map[string]any{"kid": "nope"}, f.claims(nil)), 401},
		{"no kid with several keys is refused", sign(t, rsaA, "RS256", nil, f.claims(nil)), 401},
		{"another issuer is refused", rs(map[string]any{"iss": "https://evil.example.com/"}), 401},
		{"no issuer is refused", rs(map[string]any{"iss": nil}), 401},
		{"another audience is refused", rs(map[string]any{"aud": "https://other.example.com/mcp"}), 401},
		{"no audience is refused", rs(map[string]any{"aud": nil}), 401},
		{"an audience list with ours passes", rs(map[string]any{"aud": []string{"x", testAudience}}), 200},
		{"an expired token is refused", rs(map[string]any{"exp": f.clock.unix(-31 * time.Second)}), 401},
		{"a token expired within the skew passes", rs(map[string]any{"exp": f.clock.unix(-29 * time.Second)}), 200},
		{"no exp is refused", rs(map[string]any{"exp": nil}), 401},
		{"nbf past the skew is refused", rs(map[string]any{"nbf": f.clock.unix(31 * time.Second)}), 401},
		{"nbf within the skew passes", rs(map[string]any{"nbf": f.clock.unix(29 * time.Second)}), 200},
		{"iat past the skew is refused", rs(map[string]any{"iat": f.clock.unix(31 * time.Second)}), 401},
		{"no sub is refused", rs(map[string]any{"sub": nil}), 401},
		{"an empty sub is refused", rs(map[string]any{"sub": ""}), 401},
		{"a scope claim of the wrong type is refused", rs(map[string]any{"scope": 7}), 401},
		{"a malformed namespace claim is refused with 403", rs(map[string]any{"memgate_namespace": "Bad Name"}), 403},
		{"an empty namespace list is refused with 403", rs(map[string]any{"memgate_namespace": []string{}}), 403},
		{"a token over 8 KiB is refused", big, 401},
		{"an unknown crit header is refused", sign(t, rsaA, "RS256", map[string]any{"kid": "a", "crit": []string{"x-unknown"}, "x-unknown": true}, f.claims(nil)), 401},
		{"a crit naming a registered claim is refused", sign(t, rsaA, "RS256", map[string]any{"kid": "a", "crit": []string{"exp"}}, f.claims(nil)), 401},
		{"an empty crit is refused", sign(t, rsaA, "RS256", map[string]any{"kid": "a", "crit": []string{}}, f.claims(nil)), 401},
		{"exp as a string is refused", rs(map[string]any{"exp": fmt.Sprint(f.clock.unix(time.Hour))}), 401},
		{"exp as an RFC 3339 date is refused", rs(map[string]any{"exp": f.clock.now().Add(time.Hour).UTC().Format(time.RFC3339)}), 401},
		{"nbf as a string is refused", rs(map[string]any{"nbf": fmt.Sprint(f.clock.unix(-time.Minute))}), 401},
		{"iat as a string is refused", rs(map[string]any{"iat": fmt.Sprint(f.clock.unix(-time.Minute))}), 401},
		{"a fractional exp passes", rs(map[string]any{"exp": float64(f.clock.unix(time.Hour)) + 0.5}), 200},
		{"a claim given twice is refused", duplicated(), 401},
		{"a header key given twice is refused", duplicatedHeader(), 401},
		{"a JSON serialisation is refused", `{"payload":"x","signatures":[]}`, 401},
		{"five parts (JWE) are refused", "a.b.c.d.e", 401},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := f.v.Verify(context.Background(), tc.token)
			if got := statusOf(err); got != tc.status {
				t.Fatalf("status %d (%v), want %d", got, err, tc.status)
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestJWTPrincipal(t *testing.T) {
	f := newJWTFixture(t)
	tok := sign(t, rsaA, "RS256", map[string]any{"kid": "a"}, f.claims(map[string]any{
		"scope": nil, "scp": []string{"memory:read", "extra"}, "memgate_namespace": []string{"team-a", "team-b"},
	}))
	p, exp, err := f.v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != testIssuer+"|user-1" || p.Namespace != "team-a" || strings.Join(p.Namespaces, ",") != "team-a,team-b" ||
		strings.Join(p.Scopes, ",") != "extra,memory:read" {
		t.Fatalf("principal %+v", p)
	}
	if want := time.Unix(f.clock.unix(time.Hour), 0).Add(30 * time.Second); !exp.Equal(want) {
		t.Fatalf("expiry %v, want %v", exp, want)
	}
	// Entra ID sends scp as one string.
	tok = sign(t, rsaA, "RS256", map[string]any{"kid": "a"}, f.claims(map[string]any{"scope": nil, "scp": "memory:read memory:write", "memgate_namespace": "solo"}))
	if p, _, err = f.v.Verify(context.Background(), tok); err != nil || !p.HasScope("memory:write") || p.Namespace != "solo" || len(p.Namespaces) != 1 {
		t.Fatalf("principal %+v, %v", p, err)
	}
}

func TestJWTUnknownKidRefetchesOnce(t *testing.T) {
	f := newJWTFixture(t)
	if _, _, err := f.v.Verify(context.Background(), sign(t, rsaA, "RS256", map[string]any{"kid": "a"}, f.claims(nil))); err != nil {
		t.Fatal(err)
	}
	before := f.idp.hits.Load()
	f.clock.advance(time.Second)
	_, _, err := f.v.Verify(context.Background(), sign(t, rsaB, "RS256", map[string]any{"kid": "b"}, f.claims(nil)))
	if statusOf(err) != 401 || f.idp.hits.Load() != before+1 {
		t.Fatalf("status %d, fetches %d, want 401 after one more fetch", statusOf(err), f.idp.hits.Load()-before)
	}
}

func TestJWTUnknownKidFloodIsRateLimited(t *testing.T) {
	f := newJWTFixture(t)
	f.v.keys.minGap = time.Hour
	ok := sign(t, rsaA, "RS256", map[string]any{"kid": "a"}, f.claims(nil))
	if _, _, err := f.v.Verify(context.Background(), ok); err != nil {
		t.Fatal(err)
	}
	f.clock.advance(2 * time.Hour) // past minGap once
	for i := range 50 {
		_, _, err := f.v.Verify(context.Background(), sign(t, rsaB, "RS256", map[string]any{"kid": "k" + string(rune('a'+i%26))}, f.claims(nil)))
		if statusOf(err) != 401 {
			t.Fatal(err)
		}
	}
	if h := f.idp.hits.Load(); h != 2 {
		t.Fatalf("%d fetches for 50 unknown key ids, want 2 (first use and one refetch)", h)
	}
}

func TestJWKSRotation(t *testing.T) {
	f := newJWTFixture(t)
	tokA := func() string { return sign(t, rsaA, "RS256", map[string]any{"kid": "a"}, f.claims(nil)) }
	tokB := func() string { return sign(t, rsaB, "RS256", map[string]any{"kid": "b"}, f.claims(nil)) }
	if _, _, err := f.v.Verify(context.Background(), tokA()); err != nil {
		t.Fatal(err)
	}
	// The identity service adds key b and retires key a.
	f.idp.set(jwksDoc(t, publicJWK(t, rsaB, "b", "RS256")), http.StatusOK)
	f.clock.advance(time.Second)
	if _, _, err := f.v.Verify(context.Background(), tokB()); err != nil {
		t.Fatalf("the new key is refused: %v", err)
	}
	if _, _, err := f.v.Verify(context.Background(), tokA()); statusOf(err) != 401 {
		t.Fatalf("the removed key still verifies: %v", err)
	}
}

func TestJWKSBackgroundRefresh(t *testing.T) {
	f := newJWTFixture(t)
	tokA := func() string { return sign(t, rsaA, "RS256", map[string]any{"kid": "a"}, f.claims(nil)) }
	if _, _, err := f.v.Verify(context.Background(), tokA()); err != nil {
		t.Fatal(err)
	}
	// Key a leaves the document; until the refresh interval passes the
	// cache still holds it.
	f.idp.set(jwksDoc(t, publicJWK(t, rsaB, "b", "RS256")), http.StatusOK)
	if _, _, err := f.v.Verify(context.Background(), tokA()); err != nil {
		t.Fatal(err)
	}
	f.clock.advance(DefaultJWKSRefresh + time.Second)
	f.v.Verify(context.Background(), tokA()) // stale keys serve; a refresh starts
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, _, err := f.v.Verify(context.Background(), tokA())
		if statusOf(err) == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the background refresh never dropped the removed key")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestJWKSDown(t *testing.T) {
	t.Run("no key yet is 503, not 401", func(t *testing.T) {
		f := newJWTFixture(t)
		f.idp.set([]byte("oops"), http.StatusInternalServerError)
		_, _, err := f.v.Verify(context.Background(), sign(t, rsaA, "RS256", map[string]any{"kid": "a"}, f.claims(nil)))
		if statusOf(err) != 503 {
			t.Fatalf("status %d, want 503", statusOf(err))
		}
	})
	t.Run("a stopped server is 503", func(t *testing.T) {
		f := newJWTFixture(t)
		f.idp.Close()
		_, _, err := f.v.Verify(context.Background(), sign(t, rsaA, "RS256", map[string]any{"kid": "a"}, f.claims(nil)))
		if statusOf(err) != 503 {
			t.Fatalf("status %d, want 503", statusOf(err))
		}
	})
	t.Run("cached keys keep working, for at most a day", func(t *testing.T) {
		f := newJWTFixture(t)
		tok := func() string { return sign(t, rsaA, "RS256", map[string]any{"kid": "a"}, f.claims(nil)) }
		if _, _, err := f.v.Verify(context.Background(), tok()); err != nil {
			t.Fatal(err)
		}
		f.idp.set(nil, http.StatusBadGateway)
		f.clock.advance(time.Hour)
		if _, _, err := f.v.Verify(context.Background(), tok()); err != nil {
			t.Fatalf("cached key refused while the JWKS URL is down: %v", err)
		}
		f.clock.advance(defaultMaxKeyAge)
		if _, _, err := f.v.Verify(context.Background(), tok()); statusOf(err) != 503 {
			t.Fatalf("status %d after a day without a refresh, want 503", statusOf(err))
		}
	})
	t.Run("a document of only unusable keys is no keys", func(t *testing.T) {
		f := newJWTFixture(t)
		oct, _ := jwk.FromRaw([]byte("0123456789abcdef0123456789abcdef"))
		oct.Set(jwk.KeyIDKey, "a")
		f.idp.set(jwksDoc(t, oct, publicJWK(t, rsaSmall, "small", "RS256")), http.StatusOK)
		_, _, err := f.v.Verify(context.Background(), sign(t, rsaSmall, "RS256", map[string]any{"kid": "small"}, f.claims(nil)))
		if statusOf(err) != 503 {
			t.Fatalf("status %d, want 503 (no usable key)", statusOf(err))
		}
	})
}

func TestJWTFromFile(t *testing.T) {
	testKeys(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	os.WriteFile(path, jwksDoc(t, publicJWK(t, ecA, "only", "")), 0o600)
	c := newClock()
	v, err := NewJWT(JWTOptions{Issuer: testIssuer, Audience: testAudience, JWKSFile: path, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]any{"iss": testIssuer, "aud": testAudience, "sub": "u", "exp": c.unix(time.Minute)}
	// One key: a token without kid may use it.
	if _, _, err := v.Verify(context.Background(), sign(t, ecA, "ES256", nil, claims)); err != nil {
		t.Fatal(err)
	}
	claims["exp"] = c.unix(-time.Second) // no skew configured
	if _, _, err := v.Verify(context.Background(), sign(t, ecA, "ES256", nil, claims)); statusOf(err) != 401 {
		t.Fatalf("expired token: %v", err)
	}
}

func TestNewJWTRefuses(t *testing.T) {
	testKeys(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	os.WriteFile(path, jwksDoc(t, publicJWK(t, ecA, "x", "")), 0o600)
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"keys":"no"}`), 0o600)
	cases := []struct {
		name string
		o    JWTOptions
	}{
		{"no issuer", JWTOptions{Audience: "a", JWKSFile: path}},
		{"no audience", JWTOptions{Issuer: "i", JWKSFile: path}},
		{"no keys", JWTOptions{Issuer: "i", Audience: "a"}},
		{"both key sources", JWTOptions{Issuer: "i", Audience: "a", JWKSFile: path, JWKSURL: "https://x/jwks"}},
		{"plain http to another host", JWTOptions{Issuer: "i", Audience: "a", JWKSURL: "http://id.example.com/jwks"}},
		{"an HMAC algorithm", JWTOptions{Issuer: "i", Audience: "a", JWKSFile: path, Algorithms: []string{"HS256"}}},
		{"a broken JWKS file", JWTOptions{Issuer: "i", Audience: "a", JWKSFile: bad}},
		{"a missing CA file", JWTOptions{Issuer: "i", Audience: "a", JWKSURL: "https://id.example.com/jwks", CAFile: "/nonexistent"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewJWT(tc.o); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := NewJWT(JWTOptions{Issuer: "i", Audience: "a", JWKSURL: "http://127.0.0.1:9/jwks"}); err != nil {
		t.Fatalf("plain http on loopback: %v", err)
	}
}

func TestJWTAlgorithmAllowList(t *testing.T) {
	f := newJWTFixture(t)
	v, err := NewJWT(JWTOptions{Issuer: testIssuer, Audience: testAudience, JWKSURL: f.idp.URL,
		Algorithms: []string{"ES256"}, Now: f.clock.now, MinRefetch: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	// Validly signed with a key of the set, but with an algorithm the
	// allow-list leaves out.
	if _, _, err := v.Verify(context.Background(), sign(t, rsaA, "RS256", map[string]any{"kid": "a"}, f.claims(nil))); statusOf(err) != 401 {
		t.Fatalf("RS256 outside the allow-list: %v", err)
	}
	if _, _, err := v.Verify(context.Background(), sign(t, ecA, "ES256", map[string]any{"kid": "ec"}, f.claims(nil))); err != nil {
		t.Fatalf("ES256 inside it: %v", err)
	}
}

func TestJWKSBounds(t *testing.T) {
	for name, doc := range map[string]func(t *testing.T) []byte{
		"a document over 512 KiB": func(t *testing.T) []byte {
			// A good document, then white space past the cap.
			return append(jwksDoc(t, publicJWK(t, rsaA, "a", "RS256")), strings.Repeat(" ", maxJWKSBytes)...)
		},
		"more than 64 keys": func(t *testing.T) []byte {
			keys := []jwk.Key{publicJWK(t, rsaA, "a", "RS256")}
			for i := range maxJWKSKeys {
				keys = append(keys, publicJWK(t, ecA, "ec"+string(rune('A'+i%26))+string(rune('a'+i/26)), ""))
			}
			return jwksDoc(t, keys...)
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newJWTFixture(t)
			f.idp.set(doc(t), http.StatusOK)
			_, _, err := f.v.Verify(context.Background(), sign(t, rsaA, "RS256", map[string]any{"kid": "a"}, f.claims(nil)))
			if statusOf(err) != 503 {
				t.Fatalf("status %d, want 503", statusOf(err))
			}
		})
	}
}

func TestJWKSOverTLSWithAPrivateCA(t *testing.T) {
	testKeys(t)
	doc := jwksDoc(t, publicJWK(t, ecA, "k", ""))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(doc) }))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
	c := newClock()
	claims := map[string]any{"iss": testIssuer, "aud": testAudience, "sub": "u", "exp": c.unix(time.Minute)}
	tok := sign(t, ecA, "ES256", map[string]any{"kid": "k"}, claims)
	for _, tc := range []struct {
		caFile string
		status int
	}{{ca, 200}, {"", 503}} {
		v, err := NewJWT(JWTOptions{Issuer: testIssuer, Audience: testAudience, JWKSURL: srv.URL, CAFile: tc.caFile, Now: c.now})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := v.Verify(context.Background(), tok); statusOf(err) != tc.status {
			t.Fatalf("CA file %q: status %d, want %d", tc.caFile, statusOf(err), tc.status)
		}
	}
}

// FuzzJOSE: a compact JWS whose header and claims strictJOSE accepts has
// each key once in both, no crit header, and exp, nbf and iat as numbers.
func FuzzJOSE(f *testing.F) {
	for _, s := range [][2]string{
		{`{"alg":"RS256","kid":"a"}`, `{"sub":"a","exp":1767225600}`},
		{`{"alg":"RS256","crit":[]}`, `{"sub":"a"}`},
		{`{"alg":"RS256","CRIT":["x"]}`, `{"exp":"1767225600"}`},
		{`{"alg":"RS256","kid":"a","kid":"b"}`, `{"sub":"a","sub":"b"}`},
		{`{"alg":"RS256"}`, `{"exp":1.5,"nbf":-3,"iat":1e9}`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, head, body string) {
		token := b64([]byte(head)) + "." + b64([]byte(body)) + ".c2ln"
		if !strictJOSE(token) {
			return
		}
		keys := func(part string) map[string]json.RawMessage {
			dec := json.NewDecoder(strings.NewReader(part))
			if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
				t.Fatalf("accepted a part that is not an object: %q", part)
			}
			m := map[string]json.RawMessage{}
			for dec.More() {
				tok, err := dec.Token()
				if err != nil {
					t.Fatal(err)
				}
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					t.Fatal(err)
				}
				if _, dup := m[tok.(string)]; dup {
					t.Fatalf("accepted the key %q twice in %q", tok, part)
				}
				m[tok.(string)] = v
			}
			return m
		}
		if _, crit := keys(head)["crit"]; crit {
			t.Fatalf("accepted a crit header: %q", head)
		}
		claims := keys(body)
		for _, name := range []string{"exp", "nbf", "iat"} {
			if v, ok := claims[name]; ok {
				var n json.Number
				if err := json.Unmarshal(v, &n); err != nil || len(v) == 0 || v[0] == '"' {
					t.Fatalf("accepted %s = %s, not a number", name, v)
				}
			}
		}
	})
}
