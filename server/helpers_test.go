package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/internal/syncbuf"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

// What cmd/memgate wires in satisfies what the server consumes.
var (
	_ server.Store   = (*storage.Store)(nil)
	_ server.Resolve = (&tenants.Resolver{}).Resolve
)

// syncBuffer is a log sink that handlers may write from several goroutines.
type syncBuffer = syncbuf.Buffer

// env is one server on a real pool of bbolt stores in a temporary folder,
// with an SDK client connected to it over the in-memory transport.
type env struct {
	t    *testing.T
	ctx  context.Context
	srv  *server.Server
	pool *tenants.Pool
	cs   *mcp.ClientSession
	logs *syncBuffer
	in   map[string]*jsonschema.Resolved // input schemas by tool
	out  map[string]*jsonschema.Resolved // output schemas by tool
}

// clock returns a storage clock that ticks one millisecond per write from a
// fixed instant, so recorded conversations do not change between runs.
func clock() func() time.Time {
	var n atomic.Int64
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time { return base.Add(time.Duration(n.Add(1)) * time.Millisecond) }
}

// newPool opens a pool of stores in a fresh temporary folder.
func newPool(t *testing.T, maxText int) *tenants.Pool {
	t.Helper()
	pool, err := tenants.NewPool(tenants.Options{Dir: t.TempDir(),
		Store: storage.Options{NoSync: true, Now: clock(), MaxTextBytes: maxText}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pool.Close(context.Background()); err != nil {
			t.Errorf("closing the pool: %v", err)
		}
	})
	return pool
}

// newEnv starts a server with opts (Lease, Resolve and Logger filled in
// when unset) and connects a client to it.
func newEnv(t *testing.T, opts server.Options) *env {
	t.Helper()
	ctx := t.Context()
	e := &env{t: t, ctx: ctx, logs: &syncBuffer{}}
	if opts.Lease == nil {
		e.pool = newPool(t, opts.MaxTextBytes)
		opts.Lease = server.LeaseOf(e.pool.Lease)
		opts.LeaseRead = server.LeaseOf(e.pool.LeaseRead)
	}
	if opts.Resolve == nil {
		r := &tenants.Resolver{Strategy: tenants.Fixed, AllowArg: opts.NamespaceArg}
		opts.Resolve = r.Resolve
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	e.cs = connect(t, srv, nil)
	e.in, e.out = map[string]*jsonschema.Resolved{}, map[string]*jsonschema.Resolved{}
	res, err := e.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		e.in[tool.Name] = resolve(t, tool.InputSchema)
		e.out[tool.Name] = resolve(t, tool.OutputSchema)
	}
	return e
}

// connect connects an SDK client to srv over the in-memory transport.
func connect(t *testing.T, srv *server.Server, opts *mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(), ct, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// resolve turns a schema as a client sees it (a map) into a validator.
func resolve(t *testing.T, schema any) *jsonschema.Resolved {
	t.Helper()
	b, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("schema does not decode: %v\n%s", err, b)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("schema does not resolve: %v\n%s", err, b)
	}
	return r
}

// call calls a tool with raw JSON arguments and checks what every result
// must hold: structured content that its output schema admits, and the same
// JSON as text in content[0] (content[1] for export, whose first content is
// the JSON Lines payload).
func (e *env) call(name, args string) *mcp.CallToolResult {
	e.t.Helper()
	var raw any
	if args != "" {
		raw = json.RawMessage(args)
	}
	res, err := e.cs.CallTool(e.ctx, &mcp.CallToolParams{Name: name, Arguments: raw})
	if err != nil {
		e.t.Fatalf("%s %s: protocol error %v", name, args, err)
	}
	e.check(name, res)
	return res
}

func (e *env) check(name string, res *mcp.CallToolResult) {
	e.t.Helper()
	if res.StructuredContent == nil {
		e.t.Fatalf("%s: no structured content", name)
	}
	if out := e.out[name]; out != nil {
		v := roundTrip(e.t, res.StructuredContent)
		if err := out.Validate(&v); err != nil {
			e.t.Errorf("%s: the output schema refuses the result: %v\n%s", name, err, mustJSON(e.t, res.StructuredContent))
		}
	}
	i := 0
	if name == server.ToolExport && !res.IsError {
		i = 1
	}
	if len(res.Content) <= i {
		e.t.Fatalf("%s: %d contents", name, len(res.Content))
	}
	tc, ok := res.Content[i].(*mcp.TextContent)
	if !ok {
		e.t.Fatalf("%s: content[%d] is %T", name, i, res.Content[i])
	}
	var fromText any
	if err := json.Unmarshal([]byte(tc.Text), &fromText); err != nil {
		e.t.Fatalf("%s: text content is not JSON: %v", name, err)
	}
	if a, b := mustJSON(e.t, fromText), mustJSON(e.t, res.StructuredContent); a != b {
		e.t.Errorf("%s: text content differs from structured content:\n%s\n%s", name, a, b)
	}
}

// ok calls a tool that must succeed and returns its structured content.
func (e *env) ok(name, args string) map[string]any {
	e.t.Helper()
	res := e.call(name, args)
	if res.IsError {
		e.t.Fatalf("%s %.200s: %s", name, args, mustJSON(e.t, res.StructuredContent))
	}
	return res.StructuredContent.(map[string]any)
}

// fail calls a tool that must fail and returns its error code and
// details.field.
func (e *env) fail(name, args string) (code, field string) {
	e.t.Helper()
	res := e.call(name, args)
	if !res.IsError {
		e.t.Fatalf("%s %.200s: succeeded: %.300s", name, args, mustJSON(e.t, res.StructuredContent))
	}
	return envelopeOf(e.t, res)
}

// envelopeOf checks the error envelope's shape and returns its code and
// details.field.
func envelopeOf(t *testing.T, res *mcp.CallToolResult) (code, field string) {
	t.Helper()
	if !res.IsError {
		t.Fatalf("not an error: %s", mustJSON(t, res))
	}
	m, ok := roundTrip(t, res.StructuredContent).(map[string]any)
	if !ok || len(m) != 1 {
		t.Fatalf("envelope: %#v", res.StructuredContent)
	}
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("envelope without error: %#v", m)
	}
	code, _ = e["code"].(string)
	msg, _ := e["message"].(string)
	if code == "" || msg == "" {
		t.Fatalf("envelope without code or message: %#v", e)
	}
	for k := range e {
		if k != "code" && k != "message" && k != "details" {
			t.Fatalf("envelope has %q", k)
		}
	}
	if d, ok := e["details"].(map[string]any); ok {
		field, _ = d["field"].(string)
	}
	return code, field
}

// rpcCode returns the JSON-RPC code of a protocol error, or 0.
func rpcCode(err error) int64 {
	var w *jsonrpc.Error
	if errors.As(err, &w) {
		return w.Code
	}
	return 0
}

func roundTrip(t *testing.T, v any) any {
	t.Helper()
	var out any
	if err := json.Unmarshal([]byte(mustJSON(t, v)), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// js builds JSON arguments from Go values.
func js(t *testing.T, v any) string { return mustJSON(t, v) }

func memoryOf(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	mem, ok := m["memory"].(map[string]any)
	if !ok {
		t.Fatalf("no memory in %v", m)
	}
	return mem
}

// version reads a JSON number as an int64.
func version(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}
