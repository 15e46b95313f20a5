package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
