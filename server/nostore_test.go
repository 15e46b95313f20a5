package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

// storeFolders lists the folders of the stores folder of data folder dir.
func storeFolders(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "stores"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestReadsNeverCreateAStore(t *testing.T) {
	const spaces = 300
	dir := t.TempDir()
	pool, err := tenants.NewPool(tenants.Options{Dir: dir, Store: storage.Options{NoSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close(t.Context()) })
	e := newEnv(t, server.Options{Lease: server.LeaseOf(pool.Lease), LeaseRead: server.LeaseOf(pool.LeaseRead),
		NamespaceArg: true})
	for i := range spaces {
		ns := fmt.Sprintf("reader-%03d", i)
		if code, _ := e.fail(server.ToolGet, `{"id":"k","namespace":"`+ns+`"}`); code != "not_found" {
			t.Fatalf("get in %s: %s", ns, code)
		}
		if code, _ := e.fail(server.ToolForget, `{"id":"k","namespace":"`+ns+`"}`); code != "not_found" {
			t.Fatalf("forget in %s: %s", ns, code)
		}
		if i%10 != 0 {
			continue
		}
		if hits := e.ok(server.ToolSearch, `{"query":"anything","namespace":"`+ns+`"}`)["hits"].([]any); len(hits) != 0 {
			t.Fatalf("search in %s: %v", ns, hits)
		}
		if m := e.ok(server.ToolList, `{"namespace":"`+ns+`"}`)["memories"].([]any); len(m) != 0 {
			t.Fatalf("list in %s: %v", ns, m)
		}
		st := e.ok(server.ToolStats, `{"namespace":"`+ns+`"}`)
		if st["namespace"] != ns || st["count"] != 0.0 || st["bytes"] != 0.0 || st["store_bytes"] != 0.0 {
			t.Fatalf("stats in %s: %v", ns, st)
		}
		if ex := e.ok(server.ToolExport, `{"namespace":"`+ns+`"}`); ex["count"] != 0.0 {
			t.Fatalf("export in %s: %v", ns, ex)
		}
		if _, err := e.cs.ReadResource(e.ctx, &mcp.ReadResourceParams{URI: server.NamespaceMemoryURI("x", "k")}); rpcCode(err) != mcp.CodeResourceNotFound {
			t.Fatalf("resources/read: %v", err)
		}
	}
	if _, err := e.cs.ListResources(e.ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.ReadResource(e.ctx, &mcp.ReadResourceParams{URI: server.StatsURI}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*mcp.GetPromptParams{
		{Name: server.PromptRecallContext, Arguments: map[string]string{"topic": "anything"}},
		{Name: server.PromptReviewMemories},
	} {
		if _, err := e.cs.GetPrompt(e.ctx, p); err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
	}
	if f := storeFolders(t, dir); len(f) != 0 {
		t.Fatalf("%d store folders after reads only: %v", len(f), f[:min(len(f), 5)])
	}
	// A write creates its store, and only its own.
	e.ok(server.ToolRemember, `{"id":"k","text":"the first memory","namespace":"reader-007"}`)
	if f := storeFolders(t, dir); len(f) != 1 || f[0] != "reader-007" {
		t.Fatalf("store folders after one remember: %v", f)
	}
	if m := memoryOf(t, e.ok(server.ToolGet, `{"id":"k","namespace":"reader-007"}`)); m["text"] != "the first memory" {
		t.Fatalf("get after remember: %v", m)
	}
	if st := e.ok(server.ToolStats, `{"namespace":"reader-007"}`); st["count"] != 1.0 {
		t.Fatalf("stats after remember: %v", st)
	}
}
