package main

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Erasing a namespace through the admin API while eight clients write to
// it: no call fails (no lease is cut), and afterwards the namespace holds
// none of what was written before the erasure.
func TestEraseThroughTheAdminAPIUnderLoad(t *testing.T) {
	s := serveHTTP(t, env{"MEMGATE_ADMIN_TOKEN": adminToken}, "--data-dir", t.TempDir())
	base := strings.TrimSuffix(s.url, "/mcp")
	first := newSession(t, s.url)
	toolCall(t, first, "remember", map[string]any{"id": "before", "text": "written before the erasure"})

	var stop atomic.Bool
	var failed, calls atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		cs := newSession(t, s.url)
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "remember",
					Arguments: map[string]any{"text": fmt.Sprintf("writer %d note %d", w, i)}})
				if err != nil || res.IsError {
					failed.Add(1)
				}
				calls.Add(1)
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	if code, body := adminCall(t, base, "DELETE", "namespaces/default", adminToken, nil); code != 200 {
		t.Fatalf("erase %d %s", code, body)
	}
	time.Sleep(200 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d calls failed around the erasure", failed.Load(), calls.Load())
	}
	if r := toolCall(t, first, "get", map[string]any{"id": "before"}); dig(r, "error", "code") != "not_found" {
		t.Fatalf("a memory from before the erasure: %v", r)
	}
}

func newSession(t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "erase-test", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
