package main

import (
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

	"github.com/memgate/memgate/server/admin"
)

const adminToken = "admin-token-0123456789"

// adminCall sends one admin request with token ("" for none) and returns
// its status and body.
func adminCall(t *testing.T, base, method, path, token string, body io.Reader) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, base+admin.Prefix+path, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Every admin route, with and without the admin scope, through every way
// of authenticating: MEMGATE_ADMIN_TOKEN, a tokens file, JWT and OAuth
// introspection. A token of MCP's scopes only gets 403 and never reaches a
// route; no credential gets 401.
func TestAdminRoutesNeedTheAdminScope(t *testing.T) {
	p := newIDP(t)
	const resource = "https://memory.example.com/mcp"
	var as *httptest.Server
	as = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		scope := map[string]string{"opaque-admin": "memory:admin", "opaque-user": "memory:read memory:write"}[r.PostForm.Get("token")]
		if scope == "" {
			json.NewEncoder(w).Encode(map[string]any{"active": false})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"active": true, "iss": as.URL, "aud": resource, "sub": "op",
			"exp": time.Now().Add(time.Hour).Unix(), "token_type": "Bearer", "scope": scope})
	}))
	as.StartTLS()
	t.Cleanup(as.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: as.Certificate().Raw}), 0o600)

	tokens := filepath.Join(t.TempDir(), "tokens.jsonl")
	line := func(tok, subject, scopes string) string {
		sum := sha256.Sum256([]byte(tok))
		return fmt.Sprintf(`{"sha256":"%s","subject":"%s","scopes":%s}`+"\n", hex.EncodeToString(sum[:]), subject, scopes)
	}
	os.WriteFile(tokens, []byte(line("file-admin-0123456789", "ops", `["memory:admin"]`)+
		line("file-user-0123456789", "dev", `["memory:read","memory:write"]`)), 0o600)

	modes := []struct {
		name        string
		env         env
		args        []string
		admin, user string
	}{
		{"MEMGATE_ADMIN_TOKEN", env{"MEMGATE_ADMIN_TOKEN": adminToken, "MEMGATE_TOKEN": "user-token-0123456789"}, nil,
			adminToken, "user-token-0123456789"},
		{"a tokens file", env{}, []string{"--tokens-file", tokens}, "file-admin-0123456789", "file-user-0123456789"},
		{"JWT", env{}, []string{"--jwt-issuer", testIss, "--jwt-audience", testAud, "--jwt-jwks-file", p.path},
			p.token(t, "op", "memory:admin", nil), p.token(t, "dev", "memory:read memory:write", nil)},
		{"OAuth introspection", env{"MEMGATE_OAUTH_INTROSPECTION_TOKEN": "as-credential"}, []string{"--oauth-issuer", as.URL,
			"--oauth-resource", resource, "--oauth-introspection", as.URL + "/introspect", "--oauth-ca-file", ca},
			"opaque-admin", "opaque-user"},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			s := serveHTTP(t, m.env, append([]string{"--data-dir", t.TempDir()}, m.args...)...)
			base := strings.TrimSuffix(s.url, "/mcp")
			for _, r := range admin.Routes() {
				path := strings.NewReplacer("{ns}", "team-a", "{id}", "none").Replace(r[1])
				if code, _ := adminCall(t, base, r[0], path, "", nil); code != 401 {
					t.Errorf("%s %s without a token: %d", r[0], path, code)
				}
				if code, body := adminCall(t, base, r[0], path, m.user, nil); code != 403 {
					t.Errorf("%s %s with an MCP token: %d %s", r[0], path, code, body)
				}
				code, body := adminCall(t, base, r[0], path, m.admin, strings.NewReader(""))
				if code == 401 || code == 403 || (code != 200 && !strings.Contains(body, `"error"`)) {
					t.Errorf("%s %s with the admin scope: %d %s", r[0], path, code, body)
				}
			}
			// The admin token is no MCP token.
			req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer "+m.admin)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 403 {
				t.Errorf("the admin token on MCP: %d", resp.StatusCode)
			}
		})
	}
}

// Without any credential configured there is no admin API at all.
func TestNoAdminAPIWithoutCredentials(t *testing.T) {
	s := serveHTTP(t, env{}, "--data-dir", t.TempDir())
	if code, _ := adminCall(t, strings.TrimSuffix(s.url, "/mcp"), "GET", "namespaces", "", nil); code != 404 {
		t.Fatalf("%d", code)
	}
}

// The admin API through its whole life on one namespace: the guards hold
// (Host), it lists, exports, imports, backs up, and erases.
func TestAdminAPIOperatesANamespace(t *testing.T) {
	dir := t.TempDir()
	s := serveHTTP(t, env{"MEMGATE_ADMIN_TOKEN": adminToken}, "--data-dir", dir, "--write-mode", "candidate", "--trash-retention", "1h")
	base := strings.TrimSuffix(s.url, "/mcp")
	req, _ := http.NewRequest("GET", base+admin.Prefix+"namespaces", nil)
	req.Host = "evil.example.com"
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Fatalf("a foreign Host: %v %v", resp, err)
	}
	lines := `{"memgate_export":1}` + "\n" + `{"id":"one","text":"the first memory"}` + "\n" + `{"id":"two","text":"the second memory"}` + "\n"
	code, body := adminCall(t, base, "POST", "namespaces/team-a/import?on_conflict=fail", adminToken, strings.NewReader(lines))
	if code != 200 || !strings.Contains(body, `"imported":2`) {
		t.Fatalf("import %d %s", code, body)
	}
	if code, body = adminCall(t, base, "GET", "namespaces", adminToken, nil); code != 200 || !strings.Contains(body, `"namespace":"team-a","count":2`) {
		t.Fatalf("namespaces %d %s", code, body)
	}
	if code, body = adminCall(t, base, "GET", "namespaces/team-a/export", adminToken, nil); code != 200 || strings.Count(body, "\n") != 3 {
		t.Fatalf("export %d %s", code, body)
	}
	code, body = adminCall(t, base, "GET", "namespaces/team-a/backup", adminToken, nil)
	if code != 200 {
		t.Fatalf("backup %d %s", code, body)
	}
	restored := t.TempDir()
	os.MkdirAll(filepath.Join(restored, "stores", "team-a"), 0o700)
	os.WriteFile(filepath.Join(restored, "stores", "team-a", "memgate.db"), []byte(body), 0o600)
	if st := mg(t, env{}, "", "stats", "--data-dir", restored, "--namespace", "team-a").ok(t); st["count"] != 2.0 {
		t.Fatalf("the restored backup: %v", st)
	}
	if code, body = adminCall(t, base, "GET", "namespaces/nobody/backup", adminToken, nil); code != 404 {
		t.Fatalf("backup of a namespace without a store %d %s", code, body)
	}
	if code, body = adminCall(t, base, "DELETE", "namespaces/team-a", adminToken, nil); code != 200 {
		t.Fatalf("erase %d %s", code, body)
	}
	if _, err := os.Stat(filepath.Join(dir, "stores", "team-a")); !os.IsNotExist(err) {
		t.Fatalf("the store is still on disk: %v", err)
	}
	if code, body = adminCall(t, base, "GET", "namespaces/team-a", adminToken, nil); code != 200 || !strings.Contains(body, `"count":0`) {
		t.Fatalf("after the erasure %d %s", code, body)
	}
	if strings.Contains(s.stderr.String(), "first memory") || strings.Contains(s.stderr.String(), adminToken) {
		t.Fatalf("the log holds text or a token: %s", s.stderr)
	}
}

// A second HTTP server on a served data folder refuses to start with one
// line; stdio servers of other namespaces still share the folder.
func TestSecondHTTPServerRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	first := serveHTTP(t, env{}, "--data-dir", dir)
	r := mg(t, env{}, "", "serve", "--transport", "http", "--bind", "127.0.0.1:0", "--data-dir", dir)
	r.fails(t, 2, "another memgate already serves this data folder over HTTP")
	mg(t, env{}, "", "remember", "--data-dir", dir, "--namespace", "other", "a note of another namespace").ok(t)
	// Once the first has stopped, the folder is free again.
	first.stop()
	<-first.done
	first.done <- nil
	serveHTTP(t, env{}, "--data-dir", dir)
}
