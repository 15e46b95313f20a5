package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/gateway"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

// damageStore zeroes every page of a closed store file after its two meta
// pages: the file keeps its size and its valid meta pages, and what they
// point to (the freelist, the root of every bucket) reads as garbage.
func damageStore(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	const metaPages = 2 * 4096
	if fi.Size() <= metaPages {
		t.Fatalf("store file of %d bytes", fi.Size())
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, fi.Size()-metaPages), metaPages); err != nil {
		t.Fatal(err)
	}
}

// fileOpen reports whether this process holds path open, from
// /proc/self/fd.
func fileOpen(t *testing.T, path string) bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	for _, fd := range fds {
		if target, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && target == path {
			return true
		}
	}
	return false
}

// tenantCall calls tool in namespace ns and returns the error code of the
// result ("" for a success), or the protocol error as a code.
func tenantCall(ctx context.Context, cs *mcp.ClientSession, tool, ns string, args map[string]any) string {
	a := map[string]any{"namespace": ns}
	for k, v := range args {
		a[k] = v
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: a})
	if err != nil {
		return "protocol: " + err.Error()
	}
	if !res.IsError {
		return ""
	}
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &env)
	return env.Error.Code
}

// tenantRound is one round of one tenant's load: a write, a search, a get
// and stats. It returns the codes of the calls that failed.
func tenantRound(ctx context.Context, cs *mcp.ClientSession, ns string, i int) []string {
	var failed []string
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{server.ToolRemember, map[string]any{"id": fmt.Sprintf("m%d", i%20), "text": fmt.Sprintf("note %d of %s about harbours", i, ns)}},
		{server.ToolSearch, map[string]any{"query": "harbours"}},
		{server.ToolGet, map[string]any{"id": "seed"}},
		{server.ToolStats, nil},
	} {
		if code := tenantCall(ctx, cs, c.tool, ns, c.args); code != "" {
			failed = append(failed, c.tool+": "+code)
		}
	}
	return failed
}

func TestDamagedStoreUnderLoadStaysInItsTenant(t *testing.T) {
	const (
		tenantsN    = 16
		afterDamage = 3     // rounds each other tenant makes once the victim is damaged, at least
		maxRounds   = 10000 // a bound on every tenant's rounds, before the damage and after it
		victimCalls = 12
	)
	dir := t.TempDir()
	pool, err := tenants.NewPool(tenants.Options{Dir: dir, MaxStores: tenantsN, IdleTimeout: 40 * time.Millisecond,
		Store: storage.Options{NoSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	poolClosed := false
	t.Cleanup(func() {
		if !poolClosed {
			pool.Close(context.Background())
		}
	})
	g := startGatewayOn(t, pool, gateway.Options{}, server.Options{NamespaceArg: true})
	ctx := t.Context()
	victim := "tenant-00"
	victimPath := filepath.Join(dir, "stores", victim, storage.FileName)

	// Every tenant has memories, the victim enough for a file of many pages.
	sessions := make([]*mcp.ClientSession, tenantsN)
	for i := range sessions {
		sessions[i] = connectHTTP(t, g.url, nil)
		ns := fmt.Sprintf("tenant-%02d", i)
		n := 1
		if ns == victim {
			n = 30
		}
		for j := range n {
			id := "seed"
			if j > 0 {
				id = fmt.Sprintf("seed-%d", j)
			}
			if code := tenantCall(ctx, sessions[i], server.ToolRemember, ns, map[string]any{"id": id,
				"text": fmt.Sprintf("seed %d of %s: the harbour master keeps the tide tables", j, ns)}); code != "" {
				t.Fatalf("seeding %s: %s", ns, code)
			}
		}
	}

	damaged := make(chan struct{})
	stop := make(chan struct{})
	var (
		mu       sync.Mutex
		failures []string
		rounds   = map[string]int{} // rounds after the damage, by tenant
	)
	var wg sync.WaitGroup
	var enough sync.WaitGroup
	for i := 1; i < tenantsN; i++ {
		ns := fmt.Sprintf("tenant-%02d", i)
		wg.Add(1)
		enough.Add(1)
		go func() {
			defer wg.Done()
			signalled := false
			for r, after := 0, 0; r < maxRounds && after < maxRounds; r++ {
				failed := tenantRound(ctx, sessions[i], ns, r)
				mu.Lock()
				for _, f := range failed {
					failures = append(failures, ns+" "+f)
				}
				select {
				case <-damaged:
					after++
					rounds[ns]++
					if rounds[ns] >= afterDamage && !signalled {
						signalled = true
						enough.Done()
					}
				default:
				}
				mu.Unlock()
				select {
				case <-stop:
					if signalled {
						return
					}
				default:
				}
			}
			if !signalled {
				enough.Done()
			}
		}()
	}

	// The victim, left alone, is closed by the idle timeout; then its file
	// is damaged on disk and it must open again.
	for range 1000 {
		if !fileOpen(t, victimPath) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if fileOpen(t, victimPath) {
		t.Fatal("the idle victim's store was never closed")
	}
	damageStore(t, victimPath)
	close(damaged)

	vs := sessions[0]
	// A bound on each victim call, so that a hang fails the test.
	vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for i := range victimCalls {
		tool := []string{server.ToolGet, server.ToolSearch, server.ToolRemember, server.ToolStats}[i%4]
		args := map[string]any{"id": "seed"}
		switch tool {
		case server.ToolSearch:
			args = map[string]any{"query": "harbour"}
		case server.ToolRemember:
			args = map[string]any{"text": "a write to a damaged store"}
		case server.ToolStats:
			args = nil
		}
		if code := tenantCall(vctx, vs, tool, victim, args); code != "unavailable" {
			t.Errorf("victim %s: %q, want unavailable", tool, code)
		}
	}
	_, err = vs.ReadResource(vctx, &mcp.ReadResourceParams{URI: server.NamespaceMemoryURI(memgate.Namespace(victim), "seed")})
	if err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("victim resources/read: %v, want the damaged store's error", err)
	}
	if _, err := vs.ListTools(vctx, nil); err != nil {
		t.Errorf("victim's session: %v", err)
	}

	enough.Wait()
	close(stop)
	wg.Wait()
	mu.Lock()
	if len(failures) > 0 {
		t.Errorf("%d calls of other tenants failed, first: %v", len(failures), failures[:min(len(failures), 5)])
	}
	for i := 1; i < tenantsN; i++ {
		if ns := fmt.Sprintf("tenant-%02d", i); rounds[ns] < afterDamage {
			t.Errorf("%s made %d rounds after the damage, want at least %d", ns, rounds[ns], afterDamage)
		}
	}
	mu.Unlock()

	// The graceful stop returns, and the pool closes, the damaged store
	// notwithstanding.
	for _, cs := range sessions {
		cs.Close()
	}
	if err := g.shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- pool.Close(context.Background()) }()
	select {
	case err := <-closed:
		poolClosed = true
		if err != nil {
			t.Fatalf("pool close: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the pool did not close")
	}
}
