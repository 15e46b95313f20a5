package server_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

func benchServer(b *testing.B) *server.Server {
	pool, err := tenants.NewPool(tenants.Options{Dir: b.TempDir(), Store: storage.Options{NoSync: true}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pool.Close(b.Context()) })
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease)})
	if err != nil {
		b.Fatal(err)
	}
	return srv
}

// BenchmarkCallRemember is the server's own share of a write: decoding,
// validation, the secret check, the lease, and encoding the result (the
// store runs without fsync).
func BenchmarkCallRemember(b *testing.B) {
	srv := benchServer(b)
	args := json.RawMessage(`{"text":"The deploy pipeline runs on Tuesdays; staging first, then production after review.",` +
		`"title":"Deploys","tags":["process","deploy"],"metadata":{"team":"platform"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if res, err := srv.Call(b.Context(), "remember", args); err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

func BenchmarkCallSearch(b *testing.B) {
	srv := benchServer(b)
	for i := range 1000 {
		args := fmt.Sprintf(`{"text":"note %d about deploys, reviews and the staging pipeline"}`, i)
		if _, err := srv.Call(b.Context(), "remember", json.RawMessage(args)); err != nil {
			b.Fatal(err)
		}
	}
	args := json.RawMessage(`{"query":"staging deploys","limit":10}`)
	b.ReportAllocs()
	for b.Loop() {
		if res, err := srv.Call(b.Context(), "search", args); err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

// BenchmarkToolsCallInMemory is one search through the SDK, client to
// server and back, over the in-memory transport.
func BenchmarkToolsCallInMemory(b *testing.B) {
	srv := benchServer(b)
	srv.Call(b.Context(), "remember", json.RawMessage(`{"text":"staging deploys happen on Tuesdays"}`))
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(b.Context(), st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(b.Context(), ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "search", Arguments: json.RawMessage(`{"query":"staging deploys"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if res, err := cs.CallTool(b.Context(), params); err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}
