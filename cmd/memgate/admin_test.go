package main

import (
	"bytes"
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
				path := strings.NewReplacer("{ns}", "team-a", "{id}", "none", "{tool}", "search").Replace(r[1])
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

// The admin API runs the tools on the path's namespace as tools/call would,
// writing directly even in candidate mode: an edit with the version read
// wins once and conflicts after, a forget goes to the trash, and the audit
// log names the tool but holds no text, id or query.
func TestAdminToolsCurateAMemory(t *testing.T) {
	dir := t.TempDir()
	audit := filepath.Join(dir, "audit.jsonl")
	s := serveHTTP(t, env{"MEMGATE_ADMIN_TOKEN": adminToken}, "--data-dir", dir, "--write-mode", "candidate",
		"--trash-retention", "1h", "--audit-log", audit)
	base := strings.TrimSuffix(s.url, "/mcp")
	tool := func(name, args string) (int, map[string]any) {
		t.Helper()
		code, body := adminCall(t, base, "POST", "namespaces/team-a/tools/"+name, adminToken, strings.NewReader(args))
		var v map[string]any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatalf("%s: %d %q", name, code, body)
		}
		return code, v
	}
	if code, v := tool("remember", `{"id":"pref-editor","text":"Ana prefers Helix","tags":["ana"]}`); code != 200 || v["created"] != true {
		t.Fatalf("remember %d %v", code, v)
	}
	code, v := tool("get", `{"id":"pref-editor"}`)
	if code != 200 {
		t.Fatalf("get %d %v", code, v)
	}
	version := v["memory"].(map[string]any)["version"].(float64)
	edit := fmt.Sprintf(`{"id":"pref-editor","text":"Ana prefers Zed","tags":["ana"],"if_version":%d}`, int(version))
	if code, v = tool("remember", edit); code != 200 {
		t.Fatalf("the edit %d %v", code, v)
	}
	if code, v = tool("remember", edit); code != 409 || v["error"].(map[string]any)["code"] != "version_conflict" {
		t.Fatalf("the same edit again %d %v", code, v)
	}
	if code, v = tool("search", `{"query":"zed"}`); code != 200 || len(v["hits"].([]any)) != 1 {
		t.Fatalf("search %d %v", code, v)
	}
	if code, v = tool("search", `{"query":"zed","namespace":"team-b"}`); code != 400 {
		t.Fatalf("a namespace argument %d %v", code, v)
	}
	if code, v = tool("export", ``); code != 404 {
		t.Fatalf("export as a tool %d %v", code, v)
	}
	if code, v = tool("forget", `{"id":"pref-editor"}`); code != 200 || v["forgotten"] != true {
		t.Fatalf("forget %d %v", code, v)
	}
	if code, body := adminCall(t, base, "GET", "namespaces/team-a/trash", adminToken, nil); code != 200 || !strings.Contains(body, "Ana prefers Zed") {
		t.Fatalf("trash %d %s", code, body)
	}
	if code, v = tool("remember", `[1]`); code != 400 {
		t.Fatalf("arguments that are no object %d %v", code, v)
	}
	if code, v = tool("secretword", `{}`); code != 404 {
		t.Fatalf("a tool that is none %d %v", code, v)
	}
	// Through the control socket too: the stats and the purge of the trash.
	mg(t, env{}, "", "stats", "--data-dir", dir, "--namespace", "team-a").ok(t)
	mg(t, env{}, "", "trash", "purge", "--data-dir", dir, "--namespace", "team-a").ok(t)
	s.stop()
	<-s.done
	s.done <- nil
	b, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{`"op":"admin.tool remember"`, `"op":"admin.tool search"`, `"op":"admin.tool",`,
		`"subject":"local","namespace":"team-a","op":"admin.stats","code":"ok"`,
		`"subject":"local","namespace":"team-a","op":"admin.trash.purge","code":"ok"`} {
		if !strings.Contains(string(b), line) {
			t.Fatalf("the audit log has no %s: %s", line, b)
		}
	}
	for _, secret := range []string{"Helix", "Zed", "pref-editor", "zed", "secretword", adminToken} {
		if strings.Contains(string(b), secret) || strings.Contains(s.stderr.String(), secret) {
			t.Fatalf("%q reached the audit log or the log", secret)
		}
	}
}

// --console serves the page only beside the admin API, and only over HTTP.
func TestConsoleIsServedBesideTheAdminAPI(t *testing.T) {
	page := func(s *servedHTTP) int {
		resp, err := http.Get(strings.TrimSuffix(s.url, "/mcp") + "/console/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := page(serveHTTP(t, env{"MEMGATE_ADMIN_TOKEN": adminToken}, "--data-dir", t.TempDir(), "--console")); code != 200 {
		t.Fatalf("with --console: %d", code)
	}
	if code := page(serveHTTP(t, env{"MEMGATE_ADMIN_TOKEN": adminToken}, "--data-dir", t.TempDir())); code != 404 {
		t.Fatalf("without --console: %d", code)
	}
	mg(t, env{"MEMGATE_ADMIN_TOKEN": adminToken}, "", "serve", "--data-dir", t.TempDir(), "--console").
		fails(t, 2, "--console: the console is a page of the HTTP gateway")
}

// An admin credential that names namespaces acts on those alone; refusals
// before a route are the admin API's JSON; a damaged store is one entry of
// the list, not the list's failure; MEMGATE_TOKEN alone makes no admin API.
func TestAdminAPIEdges(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(t.TempDir(), "tokens.jsonl")
	sum := sha256.Sum256([]byte("team-a-admin-0123456789"))
	os.WriteFile(tokens, []byte(fmt.Sprintf(`{"sha256":"%s","subject":"ops-a","scopes":["memory:admin"],"namespaces":["team-a"]}`+"\n",
		hex.EncodeToString(sum[:]))), 0o600)
	s := serveHTTP(t, env{"MEMGATE_ADMIN_TOKEN": adminToken}, "--data-dir", dir, "--tokens-file", tokens)
	base := strings.TrimSuffix(s.url, "/mcp")
	for _, ns := range []string{"team-a", "team-b"} {
		if code, body := adminCall(t, base, "POST", "namespaces/"+ns+"/tools/remember", adminToken, strings.NewReader(`{"text":"a memory of `+ns+`"}`)); code != 200 {
			t.Fatalf("%s: %d %s", ns, code, body)
		}
	}
	const scoped = "team-a-admin-0123456789"
	if code, body := adminCall(t, base, "DELETE", "namespaces/team-b", scoped, nil); code != 403 || !strings.Contains(body, `"forbidden"`) {
		t.Fatalf("erasing another namespace: %d %s", code, body)
	}
	if code, body := adminCall(t, base, "POST", "namespaces/team-b/tools/search", scoped, strings.NewReader(`{"query":"memory"}`)); code != 403 {
		t.Fatalf("searching another namespace: %d %s", code, body)
	}
	if code, body := adminCall(t, base, "GET", "namespaces", scoped, nil); code != 200 || !strings.Contains(body, "team-a") || strings.Contains(body, "team-b") {
		t.Fatalf("the list: %d %s", code, body)
	}
	if code, body := adminCall(t, base, "GET", "namespaces/team-a/export", scoped, nil); code != 200 || !strings.Contains(body, "team-a") {
		t.Fatalf("its own namespace: %d %s", code, body)
	}
	// Refused before any route: JSON too.
	for token, want := range map[string]int{"": 401, "not-a-token-0123456789": 401} {
		code, body := adminCall(t, base, "GET", "namespaces", token, nil)
		var v struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if code != want || json.Unmarshal([]byte(body), &v) != nil || v.Error.Code != "forbidden" {
			t.Fatalf("token %q: %d %s", token, code, body)
		}
	}
	// A damaged store: the list names it, with its code, and goes on.
	os.MkdirAll(filepath.Join(dir, "stores", "0broken"), 0o700)
	os.WriteFile(filepath.Join(dir, "stores", "0broken", "memgate.db"), bytes.Repeat([]byte("damaged!"), 5000), 0o600)
	code, body := adminCall(t, base, "GET", "namespaces", adminToken, nil)
	if code != 200 || !strings.Contains(body, `"namespace":"0broken","count":0,"bytes":0,"store_bytes":0,"open":false,"error":"unavailable"`) ||
		!strings.Contains(body, `"namespace":"team-b","count":1`) {
		t.Fatalf("the list with a damaged store: %d %s", code, body)
	}

	// MEMGATE_TOKEN alone: no credential can be an admin's, so no API.
	only := serveHTTP(t, env{"MEMGATE_TOKEN": "user-token-0123456789"}, "--data-dir", t.TempDir())
	if code, _ := adminCall(t, strings.TrimSuffix(only.url, "/mcp"), "GET", "namespaces", "user-token-0123456789", nil); code != 404 {
		t.Fatalf("MEMGATE_TOKEN alone: %d", code)
	}
	mg(t, env{"MEMGATE_TOKEN": "user-token-0123456789"}, "", "serve", "--transport", "http", "--data-dir", t.TempDir(), "--console").
		fails(t, 2, "--console: the console signs in with an admin credential")
	mg(t, env{"MEMGATE_ADMIN_TOKEN": "short"}, "", "serve", "--transport", "http", "--data-dir", t.TempDir()).
		fails(t, 2, "memgate: MEMGATE_ADMIN_TOKEN must be at least 16 characters")
}

// Whole-store transfers hold the stream cap; the other admin requests and
// the console's files hold the in-flight cap, as MCP calls do.
func TestTransfersAloneHoldTheStreamCap(t *testing.T) {
	s := serveHTTP(t, env{"MEMGATE_ADMIN_TOKEN": adminToken}, "--data-dir", t.TempDir(), "--max-streams", "1", "--console")
	base := strings.TrimSuffix(s.url, "/mcp")
	// The import holds the one stream slot while its body comes. A probe
	// (an export, which needs the slot too) can take the slot first, and
	// the import is then refused 503 — the cap at work: it is started again.
	var pw *io.PipeWriter
	var done chan string
	for attempt := 0; ; attempt++ {
		if attempt == 5 {
			t.Fatal("the import never took the stream slot before a probe did")
		}
		var pr *io.PipeReader
		pr, pw = io.Pipe()
		defer pw.Close()
		req, _ := http.NewRequest("POST", base+admin.Prefix+"namespaces/team-a/import", pr)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		done = make(chan string, 1)
		go func() {
			resp, err := (&http.Client{}).Do(req)
			if err != nil {
				done <- err.Error()
				return
			}
			resp.Body.Close()
			done <- resp.Status
		}()
		pw.Write([]byte(`{"memgate_export":1}` + "\n"))
		held, refused := false, false
		for deadline := time.Now().Add(5 * time.Second); !held && !refused; time.Sleep(10 * time.Millisecond) {
			code, _ := adminCall(t, base, "GET", "namespaces/team-a/export", adminToken, nil)
			held = code == 503
			select {
			case status := <-done:
				if !strings.HasPrefix(status, "503") {
					t.Fatalf("the import ended before its body did: %s", status)
				}
				refused = true
			default:
			}
			if !held && !refused && time.Now().After(deadline) {
				t.Fatalf("the import holds no stream slot: export %d", code)
			}
		}
		if held && !refused {
			break
		}
		pw.Close()
	}
	if code, body := adminCall(t, base, "GET", "namespaces", adminToken, nil); code != 200 {
		t.Fatalf("a plain GET while the stream slot is taken: %d %s", code, body)
	}
	resp, err := http.Get(base + "/console/console.js")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the console's script while the stream slot is taken: %v %v", resp, err)
	}
	resp.Body.Close()
	pw.Close()
	if status := <-done; !strings.HasPrefix(status, "200") {
		t.Fatalf("the import: %s", status)
	}
}

// The console's answers to any method carry its policy.
func TestConsoleRefusesOtherMethodsUnderItsPolicy(t *testing.T) {
	s := serveHTTP(t, env{"MEMGATE_ADMIN_TOKEN": adminToken}, "--data-dir", t.TempDir(), "--console")
	base := strings.TrimSuffix(s.url, "/mcp")
	for _, m := range []string{"POST", "PUT", "DELETE", "OPTIONS"} {
		req, _ := http.NewRequest(m, base+"/console/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 || resp.Header.Get("Content-Security-Policy") == "" || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Fatalf("%s: %d %v", m, resp.StatusCode, resp.Header)
		}
	}
}
