package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The store commands work on a store a running HTTP server holds, through
// its control socket, and print what they print on the store directly.
func TestStoreCommandsThroughTheServer(t *testing.T) {
	dir := t.TempDir()
	s := serveHTTP(t, env{}, "--data-dir", dir, "--trash-retention", "1h")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "cmd-test", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	toolCall(t, cs, "remember", map[string]any{"id": "kept", "text": "a memory <kept> & served"})
	toolCall(t, cs, "remember", map[string]any{"id": "gone", "text": "a memory to forget"})
	toolCall(t, cs, "forget", map[string]any{"id": "gone"})

	fi, err := os.Stat(filepath.Join(dir, controlSocket))
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("control socket %v %v", fi, err)
	}
	// A direct open would fail: the server holds the store.
	mg(t, env{}, "", "remember", "--data-dir", dir, "x").fails(t, 1, "store_locked")

	backup := filepath.Join(t.TempDir(), "b.db")
	held := map[string]result{
		"stats":      mg(t, env{}, "", "stats", "--data-dir", dir),
		"export":     mg(t, env{}, "", "export", "--data-dir", dir),
		"candidates": mg(t, env{}, "", "candidates", "list", "--data-dir", dir),
		"trash":      mg(t, env{}, "", "trash", "list", "--data-dir", dir),
		"backup":     mg(t, env{}, "", "backup", "--data-dir", dir, backup),
	}
	for name, r := range held {
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("%s: exit %d, stderr %q", name, r.code, r.stderr)
		}
		if strings.Contains(r.stdout, "store_locked") {
			t.Fatalf("%s: %s", name, r.stdout)
		}
	}
	if !strings.Contains(held["export"].stdout, "a memory <kept> & served") {
		t.Fatalf("export through the server: %s", held["export"].stdout)
	}
	imp := mg(t, env{}, held["export"].stdout, "import", "--data-dir", dir, "--on-conflict", "overwrite", "-").ok(t)
	if imp["superseded"] != 1.0 && imp["imported"] != 1.0 {
		t.Fatalf("import through the server: %v", imp)
	}
	restored := mg(t, env{}, "", "trash", "restore", "--data-dir", dir, "gone").ok(t)
	if restored["restored"] != true {
		t.Fatalf("restore through the server: %v", restored)
	}
	mg(t, env{}, "", "candidates", "approve", "--data-dir", dir, "nothing").fails(t, 1, "not_found")

	held["export"] = mg(t, env{}, "", "export", "--data-dir", dir)
	held["trash"] = mg(t, env{}, "", "trash", "list", "--data-dir", dir)
	held["stats"] = mg(t, env{}, "", "stats", "--data-dir", dir)
	// The same commands once the server has stopped print the same.
	s.stop()
	<-s.done
	s.done <- nil
	direct := map[string]result{
		"export":     mg(t, env{}, "", "export", "--data-dir", dir),
		"candidates": mg(t, env{}, "", "candidates", "list", "--data-dir", dir),
		"trash":      mg(t, env{}, "", "trash", "list", "--data-dir", dir),
	}
	for name, r := range direct {
		if r.stdout != held[name].stdout {
			t.Errorf("%s: through the server %q, directly %q", name, held[name].stdout, r.stdout)
		}
	}
	st := mg(t, env{}, "", "stats", "--data-dir", dir).ok(t)
	hs := decode(t, held["stats"].stdout)
	for _, k := range []string{"namespace", "count", "bytes", "recall", "write_mode"} {
		if st[k] != hs[k] {
			t.Errorf("stats %s: through the server %v, directly %v", k, hs[k], st[k])
		}
	}
	if bk := decode(t, held["backup"].stdout); bk["namespace"] != "default" || bk["bytes"].(float64) < 4096 {
		t.Fatalf("backup through the server: %v", bk)
	}
}

// The control socket takes peers of its own user only. Tests cannot make
// another user, so the check is run on a real connection against the uid
// of this process and against another.
func TestControlSocketRefusesAnotherUser(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *net.UnixConn, 1)
	go func() {
		c, err := ln.(*net.UnixListener).AcceptUnix()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer := <-accepted
	if peer == nil {
		t.Fatal("no connection")
	}
	defer peer.Close()
	if err := checkPeer(peer, os.Getuid()); err != nil {
		t.Fatalf("this user refused: %v", err)
	}
	if err := checkPeer(peer, os.Getuid()+1); err == nil {
		t.Fatal("a peer of another uid was accepted")
	}
}

// A stdio server listens on a control socket of its own: the store
// commands work on the store it holds through it, while a second stdio
// server of another namespace in the same folder answers for its own
// store only; a dead server's socket is cleared away.
func TestStoreCommandsThroughAStdioServer(t *testing.T) {
	dir := t.TempDir()
	a := serve(t, t.Context(), env{}, "--data-dir", dir, "--namespace", "proj-a")
	b := serve(t, t.Context(), env{}, "--data-dir", dir, "--namespace", "proj-b")
	a.call(t, "remember", map[string]any{"id": "a1", "text": "a memory of project a"})
	b.call(t, "remember", map[string]any{"id": "b1", "text": "a memory of project b"})
	socks, _ := filepath.Glob(filepath.Join(dir, controlDir, "*.sock"))
	if len(socks) != 2 {
		t.Fatalf("sockets %v", socks)
	}
	for _, s := range socks {
		if fi, err := os.Stat(s); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", s, fi, err)
		}
	}
	// A socket file nobody listens on: a server that died.
	dead := filepath.Join(dir, controlDir, "1-deadbeef.sock")
	ln, err := net.Listen("unix", dead)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()

	mg(t, env{}, "", "remember", "--data-dir", dir, "--namespace", "proj-a", "x").fails(t, 1, "store_locked")
	for ns, text := range map[string]string{"proj-a": "a memory of project a", "proj-b": "a memory of project b"} {
		out := mg(t, env{}, "", "export", "--data-dir", dir, "--namespace", ns)
		if out.code != 0 || !strings.Contains(out.stdout, text) || strings.Count(out.stdout, "\n") != 2 {
			t.Fatalf("export of %s: %d %q %q", ns, out.code, out.stdout, out.stderr)
		}
		if st := mg(t, env{}, "", "stats", "--data-dir", dir, "--namespace", ns).ok(t); st["count"] != 1.0 {
			t.Fatalf("stats of %s: %v", ns, st)
		}
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Fatalf("the dead server's socket is still there: %v", err)
	}
	backup := filepath.Join(t.TempDir(), "b.db")
	mg(t, env{}, "", "backup", "--data-dir", dir, "--namespace", "proj-b", backup).ok(t)
	restored := t.TempDir()
	os.MkdirAll(filepath.Join(restored, "stores", "proj-b"), 0o700)
	if b, err := os.ReadFile(backup); err != nil || os.WriteFile(filepath.Join(restored, "stores", "proj-b", "memgate.db"), b, 0o600) != nil {
		t.Fatal(err)
	}
	if st := mg(t, env{}, "", "stats", "--data-dir", restored, "--namespace", "proj-b").ok(t); st["count"] != 1.0 {
		t.Fatalf("the backup through a stdio server: %v", st)
	}
	// Once a server has stopped, its socket is gone and its store is free.
	a.stdin.Close()
	if err := a.wait(t); err != nil {
		t.Fatal(err)
	}
	if socks, _ := filepath.Glob(filepath.Join(dir, controlDir, "*.sock")); len(socks) != 1 {
		t.Fatalf("sockets after a stop: %v", socks)
	}
	mg(t, env{}, "", "remember", "--data-dir", dir, "--namespace", "proj-a", "written directly").ok(t)
}

// A store command that goes through the server holding the store is
// refused as it would be on the store's file when its own --encrypt and
// passphrase would not open the store: nothing is read through the server
// that the file would refuse.
func TestStoreCommandsThroughTheServerNeedTheStoresPassphrase(t *testing.T) {
	dir := t.TempDir()
	secret := env{"MEMGATE_PASSPHRASE": testPassphrase}
	s := serve(t, t.Context(), secret, "--data-dir", dir, "--encrypt")
	s.call(t, "remember", map[string]any{"id": "k", "text": plainWord + " held encrypted"})
	for _, c := range []struct {
		name string
		e    env
		args []string
		want string
	}{
		{"without --encrypt", env{}, nil, "the store is encrypted"},
		{"with another passphrase", env{"MEMGATE_PASSPHRASE": "a wrong passphrase"}, []string{"--encrypt"}, "the passphrase does not open this store"},
	} {
		for _, cmd := range [][]string{{"export"}, {"stats"}, {"backup", filepath.Join(t.TempDir(), "b.db")}} {
			r := mg(t, c.e, "", append(append(cmd, "--data-dir", dir), c.args...)...)
			if strings.Contains(r.stdout, plainWord) {
				t.Fatalf("%s, %s: the memory came through: %q", c.name, cmd[0], r.stdout)
			}
			r.fails(t, 1, c.want)
		}
	}
	if out := mg(t, secret, "", "export", "--data-dir", dir, "--encrypt"); out.code != 0 || !strings.Contains(out.stdout, plainWord) {
		t.Fatalf("with the store's passphrase: %d %q %q", out.code, out.stdout, out.stderr)
	}

	// A plain store held by a server refuses --encrypt, as its file does.
	plain := t.TempDir()
	p := serve(t, t.Context(), env{}, "--data-dir", plain)
	p.call(t, "remember", map[string]any{"id": "k", "text": "plain"})
	mg(t, secret, "", "stats", "--data-dir", plain, "--encrypt").fails(t, 1, "the store is not encrypted")
	mg(t, env{}, "", "stats", "--data-dir", plain).ok(t)
}
