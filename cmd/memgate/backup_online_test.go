package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A backup through the admin API while 64 clients write restores to a
// store that holds every write acknowledged before the backup began.
func TestOnlineBackupThroughTheAdminAPI(t *testing.T) {
	s := serveHTTP(t, env{"MEMGATE_ADMIN_TOKEN": adminToken}, "--data-dir", t.TempDir())
	base := strings.TrimSuffix(s.url, "/mcp")
	const writers = 64
	var mu sync.Mutex
	var acked []string
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range writers {
		cs := newSession(t, s.url)
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "remember",
					Arguments: map[string]any{"id": id, "text": "written during a backup"}})
				if err != nil || res.IsError {
					t.Errorf("remember %s: %v %v", id, err, res)
					return
				}
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
			}
		})
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 200 || time.Now().After(deadline) {
			break
		}
	}
	mu.Lock()
	before := append([]string(nil), acked...)
	mu.Unlock()
	code, body := adminCall(t, base, "GET", "namespaces/default/backup", adminToken, nil)
	stop.Store(true)
	wg.Wait()
	if code != 200 {
		t.Fatalf("backup %d %s", code, body)
	}
	restored := t.TempDir()
	os.MkdirAll(filepath.Join(restored, "stores", "default"), 0o700)
	os.WriteFile(filepath.Join(restored, "stores", "default", "memgate.db"), []byte(body), 0o600)
	out := mg(t, env{}, "", "export", "--data-dir", restored)
	if out.code != 0 {
		t.Fatalf("export of the restored backup: %s", out.stderr)
	}
	for _, id := range before {
		if !strings.Contains(out.stdout, `"id":"`+id+`"`) {
			t.Fatalf("%s, acknowledged before the backup began, is not in it (%d acknowledged)", id, len(before))
		}
	}
	t.Logf("%d writes acknowledged before the backup, all in it", len(before))
}

// With no room on the data's disk for the local copy, a backup through the
// admin API goes to the client straight from the store, whole.
func TestOnlineBackupWithTheDataDiskFull(t *testing.T) {
	was := makeBackupDir
	makeBackupDir = func(string, string) (string, error) {
		return "", &os.PathError{Op: "mkdirtemp", Path: "stores", Err: syscall.ENOSPC}
	}
	defer func() { makeBackupDir = was }()
	s := serveHTTP(t, env{"MEMGATE_ADMIN_TOKEN": adminToken}, "--data-dir", t.TempDir())
	base := strings.TrimSuffix(s.url, "/mcp")
	cs := newSession(t, s.url)
	for i := range 50 {
		if res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "remember",
			Arguments: map[string]any{"id": fmt.Sprint("m", i), "text": "kept through a full disk"}}); err != nil || res.IsError {
			t.Fatalf("remember: %v %v", err, res)
		}
	}
	code, body := adminCall(t, base, "GET", "namespaces/default/backup", adminToken, nil)
	if code != 200 {
		t.Fatalf("backup with the data disk full: %d %s", code, body)
	}
	restored := t.TempDir()
	os.MkdirAll(filepath.Join(restored, "stores", "default"), 0o700)
	os.WriteFile(filepath.Join(restored, "stores", "default", "memgate.db"), []byte(body), 0o600)
	if st := mg(t, env{}, "", "stats", "--data-dir", restored).ok(t); st["count"] != 50.0 {
		t.Fatalf("the backup holds %v memories, want 50", st["count"])
	}
}

// An admin import in progress when the server is told to stop gets the
// shutdown's grace, as any request in progress does, and finishes whole;
// the server then exits.
func TestAdminImportFinishesWithinTheShutdownGrace(t *testing.T) {
	s := serveHTTP(t, env{"MEMGATE_ADMIN_TOKEN": adminToken}, "--data-dir", t.TempDir(), "--shutdown-grace", "20s")
	base := strings.TrimSuffix(s.url, "/mcp")
	const n = 3000
	body, feed := io.Pipe()
	result := make(chan string, 1)
	go func() {
		code, answer := adminCall(t, base, "POST", "namespaces/default/import", adminToken, body)
		result <- fmt.Sprint(code, " ", answer)
	}()
	line := func(i int) string {
		return fmt.Sprintf(`{"id":"m%d","text":"imported across a shutdown %d"}`+"\n", i, i)
	}
	for i := range n / 2 {
		if _, err := io.WriteString(feed, line(i)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // the first half read, and some committed
	s.stop()
	time.Sleep(200 * time.Millisecond) // the shutdown under way
	for i := n / 2; i < n; i++ {
		if _, err := io.WriteString(feed, line(i)); err != nil {
			t.Fatalf("the import's body was cut at line %d by the shutdown: %v", i, err)
		}
	}
	feed.Close()
	got := <-result
	if !strings.HasPrefix(got, "200 ") || !strings.Contains(got, fmt.Sprintf(`"imported":%d`, n)) {
		t.Fatalf("an import across a shutdown: %s", got)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("exit after the grace's import: %v", err)
		}
		s.done <- nil // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not exit after the import")
	}
}

// An admin import still running when the shutdown's grace runs out is
// stopped just before it, and answered: unavailable, with the report of
// what it had imported (the memories of its last, uncommitted batch are
// not), which is what stays.
func TestAdminImportCutByTheShutdownGraceIsAnswered(t *testing.T) {
	dir := t.TempDir()
	s := serveHTTP(t, env{"MEMGATE_ADMIN_TOKEN": adminToken}, "--data-dir", dir, "--shutdown-grace", "1s")
	base := strings.TrimSuffix(s.url, "/mcp")
	body, feed := io.Pipe()
	result := make(chan string, 1)
	go func() {
		code, answer := adminCall(t, base, "POST", "namespaces/default/import", adminToken, body)
		result <- fmt.Sprint(code, " ", answer)
	}()
	for i := range 100 {
		if _, err := fmt.Fprintf(feed, `{"id":"m%d","text":"imported before the end of the grace %d"}`+"\n", i, i); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // read and committed
	s.stop()
	// The body never ends: the client keeps the import open past the grace.
	var got string
	select {
	case got = <-result:
	case <-time.After(30 * time.Second):
		feed.Close()
		t.Fatal("no answer to an import cut by the shutdown")
	}
	feed.Close()
	if !strings.HasPrefix(got, "503 ") || !strings.Contains(got, `"unavailable"`) || !strings.Contains(got, `"report"`) {
		t.Fatalf("an import cut by the shutdown's grace: %s", got)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
		s.done <- nil
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not exit")
	}
	var answer struct {
		Error struct {
			Details struct {
				Report struct{ Imported, Lines int }
			}
		}
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(got, "503 ")), &answer); err != nil {
		t.Fatal(err)
	}
	rep := answer.Error.Details.Report
	if rep.Lines != 100 {
		t.Errorf("the report counts %d lines read, want 100: %s", rep.Lines, got)
	}
	if st := mg(t, env{}, "", "stats", "--data-dir", dir).ok(t); st["count"] != float64(rep.Imported) {
		t.Fatalf("%v memories stayed, the report says %d: %s", st["count"], rep.Imported, got)
	}
}
