package auth

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate"
)

// The gateway's interfaces, restated: this package must not import server.
var _ interface {
	Authenticate(r *http.Request) (*memgate.Principal, time.Time, error)
} = (*Authenticator)(nil)

var _ interface {
	error
	Status() int
	Challenge() string
} = (*Refusal)(nil)

var (
	_ Verifier     = (*JWT)(nil)
	_ Verifier     = (*Introspector)(nil)
	_ http.Handler = (*Metadata)(nil)
)

func TestJWTAuthenticatorChallenges(t *testing.T) {
	f := newJWTFixture(t)
	st, _ := NewStaticTokens(StaticOptions{Token: "static-token-0123456789", AllScopes: allScopes})
	meta := &Metadata{Resource: testAudience, Path: "/mcp", AuthorizationServers: []string{testIssuer}, Scopes: allScopes}
	a, err := New(Options{Static: st, Verifier: f.v, ReadScope: "memory:read", WriteScope: "memory:write", Metadata: meta})
	if err != nil {
		t.Fatal(err)
	}
	const wantMeta = `resource_metadata="https://memory.example.com/.well-known/oauth-protected-resource/mcp"`
	tok := func(edits map[string]any) string {
		return "Bearer " + sign(t, rsaA, "RS256", map[string]any{"kid": "a"}, f.claims(edits))
	}
	cases := []struct {
		name, header string
		status       int
		contains     []string
		lacks        []string
	}{
		{"a JWT passes", tok(nil), 200, nil, nil},
		{"the static token passes beside JWT", "Bearer static-token-0123456789", 200, nil, nil},
		{"no token: no error, the scopes and the metadata", "", 401,
			[]string{`Bearer realm="memgate"`, `scope="memory:read memory:write"`, wantMeta}, []string{"error="}},
		{"an expired token: invalid_token", tok(map[string]any{"exp": f.clock.unix(-time.Hour)}), 401,
			[]string{`error="invalid_token"`, `error_description="the token has expired"`, wantMeta}, nil},
		{"no read scope: 403 insufficient_scope naming it", tok(map[string]any{"scope": "memory:write"}), 403,
			[]string{`error="insufficient_scope"`, `scope="memory:read"`, wantMeta}, []string{"memory:write"}},
		{"no scope at all: 403", tok(map[string]any{"scope": nil}), 403, []string{`error="insufficient_scope"`}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, _, err := a.Authenticate(bearer(tc.header))
			if got := statusOf(err); got != tc.status {
				t.Fatalf("status %d (%v), want %d", got, err, tc.status)
			}
			if err == nil {
				if p == nil || p.Subject == "" {
					t.Fatal("no principal")
				}
				return
			}
			ch := err.(*Refusal).Challenge()
			for _, s := range tc.contains {
				if !strings.Contains(ch, s) {
					t.Errorf("challenge %q lacks %s", ch, s)
				}
			}
			for _, s := range tc.lacks {
				if strings.Contains(ch, s) {
					t.Errorf("challenge %q has %s", ch, s)
				}
			}
		})
	}
	t.Run("JWKS down: 503 without a challenge", func(t *testing.T) {
		g := newJWTFixture(t)
		g.idp.set(nil, http.StatusServiceUnavailable)
		a, _ := New(Options{Verifier: g.v, ReadScope: "memory:read", Metadata: meta})
		_, _, err := a.Authenticate(bearer(tok(nil)))
		if statusOf(err) != 503 || err.(*Refusal).Challenge() != "" {
			t.Fatalf("%v", err)
		}
	})
}

func TestRequireNamespace(t *testing.T) {
	f := newJWTFixture(t)
	a, _ := New(Options{Verifier: f.v, ReadScope: "memory:read", RequireNamespace: true})
	tok := func(edits map[string]any) string {
		return "Bearer " + sign(t, rsaA, "RS256", map[string]any{"kid": "a"}, f.claims(edits))
	}
	if _, _, err := a.Authenticate(bearer(tok(nil))); statusOf(err) != 403 {
		t.Fatalf("a token without a namespace: %v", err)
	}
	p, _, err := a.Authenticate(bearer(tok(map[string]any{"memgate_namespace": "team-a"})))
	if err != nil || p.Namespace != "team-a" {
		t.Fatalf("%+v %v", p, err)
	}
}

func TestMetadata(t *testing.T) {
	m := &Metadata{Resource: "https://memory.example.com/team/mcp", Path: "/mcp", AuthorizationServers: []string{testIssuer}, Scopes: allScopes}
	routes := m.Routes()
	for _, p := range []string{WellKnownPrefix, WellKnownPrefix + "/mcp", WellKnownPrefix + "/team/mcp"} {
		if routes[p] == nil {
			t.Errorf("no route %s", p)
		}
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, WellKnownPrefix+"/team/mcp", nil)
	req.Host = "evil.example.net"
	m.ServeHTTP(rec, req)
	if strings.Contains(rec.Body.String(), "evil") || rec.Header().Get("Cache-Control") != "public, max-age=300" {
		t.Fatalf("a configured resource: %s %q", rec.Body, rec.Header().Get("Cache-Control"))
	}
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if doc["resource"] != m.Resource || doc["authorization_servers"].([]any)[0] != testIssuer ||
		doc["scopes_supported"].([]any)[1] != "memory:write" || doc["bearer_methods_supported"].([]any)[0] != "header" {
		t.Fatalf("document %v", doc)
	}
	if got := m.URL(bearer("")); got != "https://memory.example.com/.well-known/oauth-protected-resource/team/mcp" {
		t.Fatalf("URL %s", got)
	}
	// Without a public URL, the resource is the address the request used.
	d := &Metadata{Path: "/mcp"}
	r := httptest.NewRequest(http.MethodGet, "http://localhost:9000/mcp", nil)
	if got := d.URL(r); got != "http://localhost:9000/.well-known/oauth-protected-resource/mcp" {
		t.Fatalf("derived URL %s", got)
	}
	rec = httptest.NewRecorder()
	d.ServeHTTP(rec, r)
	if !strings.Contains(rec.Body.String(), `"resource":"http://localhost:9000/mcp"`) ||
		rec.Header().Get("Cache-Control") != "no-store" || rec.Header().Get("Vary") != "Host" {
		t.Fatalf("a derived resource is cached: %s %q", rec.Body, rec.Header().Get("Cache-Control"))
	}
	r.TLS = &tls.ConnectionState{}
	if got := d.resource(r); got != "https://localhost:9000/mcp" {
		t.Fatalf("derived resource %s", got)
	}
	rec = httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, WellKnownPrefix, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", rec.Code)
	}
}

func TestCheckResource(t *testing.T) {
	for s, ok := range map[string]bool{
		"https://m.example.com/mcp": true, "http://127.0.0.1:8765/mcp": true,
		"m.example.com/mcp": false, "https://m.example.com/mcp?x=1": false, "https://u@m.example.com/mcp": false,
		"https://m.example.com/mcp#f": false, "ftp://m.example.com/": false, `https://m.example.com/"x`: false,
	} {
		if (CheckResource(s) == nil) != ok {
			t.Errorf("%s: want ok=%v", s, ok)
		}
	}
}

// FuzzAuthorization: a header value either yields a token68 of at most
// MaxTokenBytes that it contains, or a failure with a 401; and no token,
// whatever its bytes, passes a JWT verifier whose keys the fuzzer does not
// hold.
func FuzzAuthorization(f *testing.F) {
	for _, s := range []string{
		"Bearer abc", "bearer abc", "BEARER a.b.c", "Bearer", "Bearer ", "Bearer  x", " Bearer x", "Basic x",
		"Bearer a b", "Bearer a,b", "Bearer ab==", "Bearer a=b", "Bearer \x00", "Bearer é", "Bearer eyJ.eyJ.",
		"Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", "Bearer ..", "Bearer a.b.c.d.e", "",
	} {
		f.Add(s)
	}
	testKeys(f)
	c := newClock()
	path := f.TempDir() + "/jwks.json"
	if err := writeFile(path, jwksDoc(f, publicJWK(f, ecA, "k", ""))); err != nil {
		f.Fatal(err)
	}
	v, err := NewJWT(JWTOptions{Issuer: testIssuer, Audience: testAudience, JWKSFile: path, Now: c.now})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, h string) {
		token, err := ParseAuthorization(h)
		if err != nil {
			if statusOf(err) != 401 {
				t.Fatalf("status %d", statusOf(err))
			}
		} else if token == "" || len(token) > MaxTokenBytes || !isToken68(token) || !strings.Contains(h, token) {
			t.Fatalf("token %q from %q", token, h)
		}
		if _, _, err := v.Verify(context.Background(), h); err == nil {
			t.Fatalf("%q verified", h)
		}
		if _, _, err := v.Verify(context.Background(), token); err == nil && token != "" {
			t.Fatalf("%q verified", token)
		}
	})
}
