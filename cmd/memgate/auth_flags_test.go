package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/auth"
	"github.com/memgate/memgate/tenants"
)

func TestAuthFlagsValidate(t *testing.T) {
	dd := "--data-dir=" + t.TempDir()
	http := []string{dd, "--transport", "http"}
	jwt := append(http, "--jwt-issuer", "https://id.example.com/", "--jwt-audience", "https://m.example.com/mcp", "--jwt-jwks-url", "https://id.example.com/jwks")
	oauth := append(http, "--oauth-issuer", "https://id.example.com", "--oauth-resource", "https://m.example.com/mcp", "--oauth-introspection", "https://id.example.com/introspect")
	with := func(base []string, more ...string) []string { return append(append([]string{}, base...), more...) }
	cases := []struct {
		name string
		args []string
		want []string // flags named in the error; none for a valid configuration
	}{
		{"JWT complete", jwt, nil},
		{"OAuth complete", oauth, nil},
		{"the token strategy over http", with(http, "--namespace-strategy", "token"), nil},
		{"the token strategy over stdio", []string{dd, "--namespace-strategy", "token"}, []string{"--namespace-strategy"}},
		{"from-subject without the token strategy", with(jwt, "--namespace-from-subject"), []string{"--namespace-from-subject"}},
		{"from-subject with it", with(jwt, "--namespace-strategy", "token", "--namespace-from-subject"), nil},
		{"auth flags over stdio", []string{dd, "--tokens-file", "x", "--jwt-issuer", "i"}, []string{"--tokens-file", "--jwt-issuer", "--jwt-audience", "--jwt-jwks-url"}},
		{"JWT and OAuth together", with(jwt, "--oauth-issuer", "https://id.example.com", "--oauth-resource", "https://m.example.com/mcp", "--oauth-introspection", "https://id.example.com/i"), []string{"--oauth-issuer"}},
		{"JWT without issuer and audience", with(http, "--jwt-jwks-file", "k.json"), []string{"--jwt-issuer", "--jwt-audience"}},
		{"JWT with both key sources", with(jwt, "--jwt-jwks-file", "k.json"), []string{"--jwt-jwks-file"}},
		{"a JWKS over plain http", with(http, "--jwt-issuer", "i", "--jwt-audience", "a", "--jwt-jwks-url", "http://id.example.com/jwks"), []string{"--jwt-jwks-url"}},
		{"a JWKS over loopback http", with(http, "--jwt-issuer", "i", "--jwt-audience", "a", "--jwt-jwks-url", "http://127.0.0.1:9/jwks"), nil},
		{"a CA file without a JWKS URL", with(http, "--jwt-issuer", "i", "--jwt-audience", "a", "--jwt-jwks-file", "k", "--jwt-ca-file", "ca.pem"), []string{"--jwt-ca-file"}},
		{"an HMAC algorithm", with(jwt, "--jwt-algorithms", "HS256"), []string{"--jwt-algorithms"}},
		{"a huge skew", with(jwt, "--clock-skew", "1h"), []string{"--clock-skew"}},
		{"the JWT spelling of the skew", with(jwt, "--jwt-clock-skew", "10s"), nil},
		{"an OAuth issuer over http", with(http, "--oauth-issuer", "http://id.example.com", "--oauth-resource", "https://m.example.com/mcp", "--oauth-introspection", "http://id.example.com/i"), []string{"--oauth-issuer", "--oauth-introspection"}},
		{"introspection on another origin", with(http, "--oauth-issuer", "https://id.example.com", "--oauth-resource", "https://m.example.com/mcp", "--oauth-introspection", "https://id.example.com:8443/i"), []string{"--oauth-introspection"}},
		{"OAuth without a resource", with(http, "--oauth-issuer", "https://id.example.com", "--oauth-introspection", "https://id.example.com/i"), []string{"--oauth-resource"}},
		{"a cache TTL without OAuth", with(jwt, "--introspection-cache-ttl", "1m"), []string{"--introspection-cache-ttl"}},
		{"a cache TTL of two hours", with(oauth, "--introspection-cache-ttl", "2h"), []string{"--introspection-cache-ttl"}},
		{"a timeout of zero", with(oauth, "--introspection-timeout", "0s"), []string{"--introspection-timeout"}},
		{"a public URL without metadata", with(http, "--public-url", "https://m.example.com/mcp"), []string{"--public-url"}},
		{"a public URL with a query", with(jwt, "--public-url", "https://m.example.com/mcp?x"), []string{"--public-url"}},
		{"a scope with a space", with(jwt, "--read-scope", "memory read"), []string{"--read-scope"}},
		{"no scopes at all (tokens that carry none)", with(jwt, "--read-scope=", "--write-scope="), nil},
		{"an empty claim name", with(jwt, "--namespace-claim", " "), []string{"--namespace-claim"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig(t, env{}, append([]string{"serve"}, tc.args...)...)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, f := range tc.want {
				if !strings.Contains(err.Error(), f+":") {
					t.Errorf("the error does not name %s:\n%v", f, err)
				}
			}
		})
	}
}

func TestAuthenticatorSetup(t *testing.T) {
	setup := func(t *testing.T, e env, args ...string) (*authSetup, error) {
		t.Helper()
		cfg, err := parseConfig(t, e, append([]string{"serve", "--data-dir", t.TempDir(), "--transport", "http"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return (&app{cfg: cfg, getenv: e.get}).authenticator()
	}
	t.Run("no auth", func(t *testing.T) {
		s, err := setup(t, env{})
		if err != nil || s.Auth != nil || s.Mode != "none" || s.WriteScope != "" || len(s.Routes) != 0 {
			t.Fatalf("%+v %v", s, err)
		}
	})
	t.Run("MEMGATE_TOKEN of 15 characters is refused", func(t *testing.T) {
		_, err := setup(t, env{"MEMGATE_TOKEN": strings.Repeat("x", 15)})
		if err == nil || !strings.Contains(err.Error(), "at least 16") || strings.Contains(err.Error(), "xxxxx") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("MEMGATE_TOKEN of 16 characters is static mode", func(t *testing.T) {
		s, err := setup(t, env{"MEMGATE_TOKEN": strings.Repeat("x", 16)})
		if err != nil || s.Auth == nil || s.Mode != "static" || s.WriteScope != "memory:write" || len(s.Routes) != 0 {
			t.Fatalf("%+v %v", s, err)
		}
	})
	t.Run("a broken tokens file is refused at start", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "tokens")
		os.WriteFile(path, []byte("{\n"), 0o600)
		if _, err := setup(t, env{}, "--tokens-file", path); err == nil || !strings.Contains(err.Error(), "--tokens-file: tokens file line 1") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("OAuth needs its credential in the environment", func(t *testing.T) {
		_, err := setup(t, env{}, "--oauth-issuer", "https://id.example.com", "--oauth-resource", "https://m.example.com/mcp", "--oauth-introspection", "https://id.example.com/i")
		if err == nil || !strings.Contains(err.Error(), "MEMGATE_OAUTH_INTROSPECTION_TOKEN") {
			t.Fatalf("%v", err)
		}
		s, err := setup(t, env{"MEMGATE_OAUTH_INTROSPECTION_TOKEN": "c"}, "--oauth-issuer", "https://id.example.com", "--oauth-resource", "https://m.example.com/mcp", "--oauth-introspection", "https://id.example.com/i")
		if err != nil || s.Mode != "oauth" || s.Routes["/.well-known/oauth-protected-resource/mcp"] == nil {
			t.Fatalf("%+v %v", s, err)
		}
	})
	t.Run("empty scope names need no scope", func(t *testing.T) {
		cfg, err := parseConfig(t, env{}, "serve", "--data-dir", t.TempDir(), "--transport", "http", "--read-scope=", "--write-scope=")
		if err != nil || cfg.Auth.ReadScope != "" || cfg.Auth.WriteScope != "" {
			t.Fatalf("%q %q %v", cfg.Auth.ReadScope, cfg.Auth.WriteScope, err)
		}
		s, err := (&app{cfg: cfg, getenv: env{"MEMGATE_TOKEN": "0123456789abcdef"}.get}).authenticator()
		if err != nil || s.WriteScope != "" {
			t.Fatalf("%+v %v", s, err)
		}
	})
	t.Run("a missing JWKS file is refused at start", func(t *testing.T) {
		if _, err := setup(t, env{}, "--jwt-issuer", "i", "--jwt-audience", "a", "--jwt-jwks-file", "/nonexistent.json"); err == nil {
			t.Fatal("accepted")
		}
	})
}

// idp makes tokens for a JWKS file, as an identity service would.
type idp struct {
	key  *ecdsa.PrivateKey
	path string
}

const (
	testIss = "https://id.example.com/"
	testAud = "memgate-test"
)

func newIDP(t *testing.T) *idp {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := jwk.FromRaw(key.Public())
	pub.Set(jwk.KeyIDKey, "k1")
	set := jwk.NewSet()
	set.AddKey(pub)
	b, _ := json.Marshal(set)
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return &idp{key: key, path: path}
}

func (p *idp) token(t *testing.T, sub, scope string, extra map[string]any) string {
	t.Helper()
	claims := map[string]any{"iss": testIss, "aud": testAud, "sub": sub, "scope": scope,
		"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	for k, v := range extra {
		claims[k] = v
	}
	payload, _ := json.Marshal(claims)
	h := jws.NewHeaders()
	h.Set(jws.KeyIDKey, "k1")
	b, err := jws.Sign(payload, jws.WithKey(jwa.ES256, p.key, jws.WithProtectedHeaders(h)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// bearerClient connects an MCP client to url with token.
func bearerClient(t *testing.T, url, token string) (*mcp.ClientSession, error) {
	t.Helper()
	hc := &http.Client{Transport: headerTransport{"Authorization": "Bearer " + token}}
	return mcp.NewClient(&mcp.Implementation{Name: "auth-test", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
}

type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func toolCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

func TestServeHTTPWithJWT(t *testing.T) {
	p := newIDP(t)
	s := serveHTTP(t, env{}, "--data-dir", t.TempDir(), "--jwt-issuer", testIss, "--jwt-audience", testAud,
		"--jwt-jwks-file", p.path, "--namespace-strategy", "token", "--namespace-from-subject")
	base := strings.TrimSuffix(s.url, "/mcp")

	// No token: 401 pointing at the metadata, which is served without one.
	resp, err := http.Post(s.url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ch := resp.Header.Get("WWW-Authenticate")
	metaURL := base + auth.WellKnownPrefix + "/mcp"
	if resp.StatusCode != 401 || !strings.Contains(ch, `resource_metadata="`+metaURL+`"`) || strings.Contains(ch, "error=") {
		t.Fatalf("%d %q", resp.StatusCode, ch)
	}
	resp, err = http.Get(metaURL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var meta map[string]any
	if json.Unmarshal(b, &meta) != nil || meta["resource"] != s.url || fmt.Sprint(meta["authorization_servers"]) != "["+testIss+"]" {
		t.Fatalf("metadata %s", b)
	}

	// Two users, each in a store derived from issuer and subject.
	alice, err := bearerClient(t, s.url, p.token(t, "alice", "memory:read memory:write", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	toolCall(t, alice, "remember", map[string]any{"text": "alice's note"})
	st := toolCall(t, alice, "stats", nil)
	if st["namespace"] != string(tenants.IssuerSubjectNamespace(testIss, "alice")) || st["count"] != 1.0 {
		t.Fatalf("alice's stats %v", st)
	}
	bob, err := bearerClient(t, s.url, p.token(t, "bob", "memory:read", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	if st := toolCall(t, bob, "stats", nil); st["count"] != 0.0 {
		t.Fatalf("bob sees alice's store: %v", st)
	}
	// Bob may read but not write.
	if r := toolCall(t, bob, "remember", map[string]any{"text": "x"}); dig(r, "error", "code") != "forbidden" {
		t.Fatalf("a read-only token wrote: %v", r)
	}
	// A token without the read scope: 403 insufficient_scope.
	req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+p.token(t, "carol", "memory:write", nil))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ch := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 403 || !strings.Contains(ch, `error="insufficient_scope"`) || !strings.Contains(ch, `scope="memory:read"`) {
		t.Fatalf("%d %q", resp.StatusCode, ch)
	}
	if strings.Contains(s.stderr.String(), "alice") {
		t.Fatalf("the log names a subject: %s", s.stderr)
	}
}

func TestServeHTTPTokenStrategyNeedsANamespace(t *testing.T) {
	p := newIDP(t)
	path := filepath.Join(t.TempDir(), "tokens.jsonl")
	sum := sha256.Sum256([]byte("file-token-0123456789"))
	os.WriteFile(path, []byte(fmt.Sprintf(`{"sha256":"%s","subject":"ci","namespace":"team-ci"}`+"\n", hex.EncodeToString(sum[:]))), 0o600)
	s := serveHTTP(t, env{"MEMGATE_TOKEN": "static-token-0123456789"}, "--data-dir", t.TempDir(), "--jwt-issuer", testIss,
		"--jwt-audience", testAud, "--jwt-jwks-file", p.path, "--tokens-file", path, "--namespace-strategy", "token")
	status := func(token string) int {
		req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(p.token(t, "dan", "memory:read", nil)); got != 403 {
		t.Fatalf("a token without a namespace: %d, want 403", got)
	}
	if got := status("static-token-0123456789"); got != 403 {
		t.Fatalf("MEMGATE_TOKEN names no namespace: %d, want 403", got)
	}
	cs, err := bearerClient(t, s.url, p.token(t, "erin", "memory:read memory:write", map[string]any{"memgate_namespace": []string{"team-a", "team-b"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if st := toolCall(t, cs, "stats", nil); st["namespace"] != "team-a" {
		t.Fatalf("stats %v", st)
	}
	ci, err := bearerClient(t, s.url, "file-token-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	defer ci.Close()
	if st := toolCall(t, ci, "stats", nil); st["namespace"] != "team-ci" {
		t.Fatalf("stats %v", st)
	}
}

func TestServeHTTPWithIntrospection(t *testing.T) {
	const resource = "https://memory.example.com/mcp"
	var as *httptest.Server
	as = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if r.Header.Get("Authorization") != "Bearer as-credential" || r.PostForm.Get("token") != "opaque-good" {
			json.NewEncoder(w).Encode(map[string]any{"active": false})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"active": true, "iss": as.URL, "aud": resource, "sub": "svc",
			"exp": time.Now().Add(time.Hour).Unix(), "token_type": "Bearer", "scope": "memory:read", "memgate_namespace": "ops"})
	}))
	as.StartTLS()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: as.Certificate().Raw}), 0o600)
	s := serveHTTP(t, env{"MEMGATE_OAUTH_INTROSPECTION_TOKEN": "as-credential"}, "--data-dir", t.TempDir(),
		"--oauth-issuer", as.URL, "--oauth-resource", resource, "--oauth-introspection", as.URL+"/introspect",
		"--oauth-ca-file", ca, "--namespace-strategy", "token")

	cs, err := bearerClient(t, s.url, "opaque-good")
	if err != nil {
		t.Fatal(err)
	}
	if st := toolCall(t, cs, "stats", nil); st["namespace"] != "ops" {
		t.Fatalf("stats %v", st)
	}
	if r := toolCall(t, cs, "remember", map[string]any{"text": "x"}); dig(r, "error", "code") != "forbidden" {
		t.Fatalf("a read-only token wrote: %v", r)
	}
	cs.Close()
	status := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
	}
	if code, ch := status("opaque-bad"); code != 401 || !strings.Contains(ch, `error="invalid_token"`) ||
		!strings.Contains(ch, `resource_metadata="https://memory.example.com/.well-known/oauth-protected-resource/mcp"`) {
		t.Fatalf("%d %q", code, ch)
	}
	as.Close()
	if code, _ := status("opaque-good"); code != 503 {
		t.Fatalf("identity service down: %d, want 503", code)
	}
}
