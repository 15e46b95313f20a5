package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The audit log has one line per tool call and admin action, with who,
// where, what and how it ended, and never a memory's text, id, a query or
// a token; SIGHUP reopens it after a rotation.
func TestAuditLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	const userToken = "user-token-0123456789"
	s := serveHTTP(t, env{"MEMGATE_TOKEN": userToken, "MEMGATE_ADMIN_TOKEN": adminToken}, "--data-dir", dir, "--audit-log", path)
	base := strings.TrimSuffix(s.url, "/mcp")
	cs, err := bearerClient(t, s.url, userToken)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	const text, id, query = "the secret recipe is saffron", "memory-id-4711", "saffronquery"
	toolCall(t, cs, "remember", map[string]any{"id": id, "text": text, "title": "recipe title"})
	toolCall(t, cs, "search", map[string]any{"query": query})
	toolCall(t, cs, "get", map[string]any{"id": "missing-id-0815"})
	if code, _ := adminCall(t, base, "GET", "namespaces/default/export", adminToken, nil); code != 200 {
		t.Fatalf("export %d", code)
	}
	if code, _ := adminCall(t, base, "POST", "namespaces/default/candidates/"+id+"/approve", adminToken, nil); code != 404 {
		t.Fatalf("approve %d", code)
	}
	read := func(p string) []auditEntry {
		var out []auditEntry
		deadline := time.Now().Add(5 * time.Second)
		for {
			b, _ := os.ReadFile(p)
			out = out[:0]
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				if l == "" {
					continue
				}
				var e auditEntry
				if err := json.Unmarshal([]byte(l), &e); err != nil {
					t.Fatalf("not a JSON line: %q", l)
				}
				out = append(out, e)
			}
			if len(out) >= 5 || time.Now().After(deadline) {
				return out
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	entries := read(path)
	ops := map[string]auditEntry{}
	for _, e := range entries {
		ops[e.Op] = e
	}
	for op, code := range map[string]string{"tools/call remember": "ok", "tools/call search": "ok", "tools/call get": "not_found",
		"admin.export": "ok", "admin.approve": "not_found"} {
		e, ok := ops[op]
		if !ok || e.Code != code || e.Namespace != "default" || e.Subject == "" || e.RequestID == "" || e.Time.IsZero() {
			t.Errorf("%s: %+v (present %v)", op, e, ok)
		}
	}
	b, _ := os.ReadFile(path)
	for _, secret := range []string{text, "saffron", id, "missing-id-0815", query, "recipe title", userToken, adminToken} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the audit log holds %q", secret)
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("audit log mode %v", fi.Mode())
	}

	// Rotation: move the file away, SIGHUP, and new lines go to a new file.
	rotated := path + ".1"
	if err := os.Rename(path, rotated); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	// A call's line goes to the old file until the signal is handled: call
	// until one reaches the new file (read waits up to 5 s for lines).
	deadline := time.Now().Add(30 * time.Second)
	for {
		toolCall(t, cs, "stats", nil)
		// The file is reopened at once; its lines come with the next flush.
		if len(read(path)) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if e := read(path); len(e) == 0 || !strings.HasPrefix(e[0].Op, "tools/call") {
		t.Fatalf("after SIGHUP: %+v", e)
	}
	if len(read(rotated)) < 5 {
		t.Fatal("the rotated file lost its lines")
	}
}

// A call refused its namespace is audited with the namespace it asked for.
func TestAuditNamesTheNamespaceRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	tokens := filepath.Join(t.TempDir(), "tokens.jsonl")
	sum := sha256.Sum256([]byte("proj-token-0123456789"))
	os.WriteFile(tokens, []byte(fmt.Sprintf(`{"sha256":"%s","subject":"ana","namespaces":["proj"]}`+"\n", hex.EncodeToString(sum[:]))), 0o600)
	s := serveHTTP(t, env{}, "--data-dir", t.TempDir(), "--audit-log", path, "--tokens-file", tokens, "--namespace-arg")
	cs, err := bearerClient(t, s.url, "proj-token-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	toolCall(t, cs, "get", map[string]any{"id": "x", "namespace": "global"})
	cs.Close()
	s.stop()
	<-s.done
	s.done <- nil
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"namespace":"global","op":"tools/call get","code":"forbidden"`) {
		t.Fatalf("the audit log: %s", b)
	}
}
