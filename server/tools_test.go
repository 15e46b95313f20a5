package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/tenants"
)

func TestEveryToolWorks(t *testing.T) {
	e := newEnv(t, server.Options{})

	// remember: a new memory with a made-up id, text kept byte for byte.
	text := "  Use bbolt for the store <because> it has one writer & ACID.\n"
	r := e.ok("remember", js(t, map[string]any{"text": text, "title": "Storage choice",
		"tags": []string{"decision", "storage", "decision"}, "metadata": map[string]any{"project": "memgate", "n": 3, "ok": true, "none": nil}}))
	if r["created"] != true {
		t.Fatalf("created = %v", r["created"])
	}
	m := memoryOf(t, r)
	id, _ := m["id"].(string)
	if len(id) != 36 || m["text"] != text || m["bytes"] != float64(len(text)) || m["title"] != "Storage choice" {
		t.Fatalf("stored memory: %v", m)
	}
	if got := mustJSON(t, m["tags"]); got != `["decision","storage"]` {
		t.Fatalf("tags = %s, want duplicates dropped in order", got)
	}
	if got := mustJSON(t, m["metadata"]); got != `{"n":3,"none":null,"ok":true,"project":"memgate"}` {
		t.Fatalf("metadata = %s", got)
	}
	v1 := version(m["version"])

	// remember: replace it, keeping created_at, with a compare-and-set.
	r = e.ok("remember", js(t, map[string]any{"id": id, "text": "Use bbolt.", "if_version": v1}))
	m2 := memoryOf(t, r)
	if r["created"] != false || m2["created_at"] != m["created_at"] || version(m2["version"]) <= v1 {
		t.Fatalf("replace: %v", r)
	}
	if got := mustJSON(t, m2["tags"]) + mustJSON(t, m2["metadata"]); got != `[]{}` {
		t.Fatalf("tags and metadata must be present when empty: %s", got)
	}
	if code, _ := e.fail("remember", js(t, map[string]any{"id": id, "text": "stale", "if_version": v1})); code != "version_conflict" {
		t.Fatalf("stale if_version: %s", code)
	}

	// get
	g := memoryOf(t, e.ok("get", js(t, map[string]any{"id": id})))
	if g["text"] != "Use bbolt." || g["version"] != m2["version"] {
		t.Fatalf("get: %v", g)
	}
	if code, field := e.fail("get", `{"id":"missing"}`); code != "not_found" || field != "" {
		t.Fatalf("get missing: %s %s", code, field)
	}

	// search, by words, by tags, and by filter.
	e.ok("remember", `{"id":"cats","text":"Cats sleep most of the day.","tags":["pets"],"metadata":{"kind":"fact"}}`)
	e.ok("remember", `{"id":"dogs","text":"Dogs need walks every day.","tags":["pets"],"metadata":{"kind":"advice"}}`)
	s := e.ok("search", `{"query":"sleeping cat"}`)
	hits := s["hits"].([]any)
	if len(hits) != 1 || hits[0].(map[string]any)["id"] != "cats" || hits[0].(map[string]any)["score"] != 1.0 {
		t.Fatalf("search: %v", s)
	}
	if rc := s["receipt"].(map[string]any); rc["retrieval_mode"] != "lexical" {
		t.Fatalf("receipt: %v", rc)
	}
	if n := len(e.ok("search", `{"tags":["pets"],"limit":1}`)["hits"].([]any)); n != 1 {
		t.Fatalf("limit 1 gave %d hits", n)
	}
	if h := e.ok("search", `{"query":"day","filter":{"kind":"advice"}}`)["hits"].([]any); len(h) != 1 || h[0].(map[string]any)["id"] != "dogs" {
		t.Fatalf("filter: %v", h)
	}
	if h := e.ok("search", `{"tags":["pets","decision"],"tags_mode":"any"}`)["hits"].([]any); len(h) != 2 {
		t.Fatalf("tags_mode any: %d hits", len(h))
	}

	// list, page by page.
	l := e.ok("list", `{"limit":2}`)
	if len(l["memories"].([]any)) != 2 || l["next_cursor"] == nil {
		t.Fatalf("list page 1: %v", l)
	}
	l2 := e.ok("list", js(t, map[string]any{"limit": 2, "cursor": l["next_cursor"]}))
	if len(l2["memories"].([]any)) != 1 || l2["next_cursor"] != nil {
		t.Fatalf("list page 2: %v", l2)
	}
	if first := e.ok("list", `{"order":"created_asc","limit":1}`)["memories"].([]any)[0].(map[string]any); first["id"] != id {
		t.Fatalf("created_asc starts with %v", first["id"])
	}

	// stats
	st := e.ok("stats", "")
	if st["namespace"] != "default" || st["count"] != 3.0 || st["recall"] != server.Recall || st["write_mode"] != "full" ||
		st["store_bytes"].(float64) <= 0 {
		t.Fatalf("stats: %v", st)
	}
	if st["bytes"] != float64(len("Use bbolt.")+len("Cats sleep most of the day.")+len("Dogs need walks every day.")) {
		t.Fatalf("stats.bytes = %v", st["bytes"])
	}
	if lim := st["limits"].(map[string]any); lim["max_memory_bytes"] != float64(memgate.DefaultMaxTextBytes) || lim["max_memories"] != 0.0 || len(lim) != 14 {
		t.Fatalf("limits: %v", lim)
	}

	// export, in two pages that concatenate into one JSON Lines file.
	ex := e.call("export", `{"limit":2}`)
	sc := ex.StructuredContent.(map[string]any)
	if sc["count"] != 2.0 || sc["next_cursor"] == nil {
		t.Fatalf("export page 1: %v", sc)
	}
	lines := ex.Content[0].(*mcp.TextContent).Text
	ex2 := e.call("export", js(t, map[string]any{"cursor": sc["next_cursor"]}))
	lines += ex2.Content[0].(*mcp.TextContent).Text
	if sc2 := ex2.StructuredContent.(map[string]any); sc2["count"] != 1.0 || sc2["next_cursor"] != nil {
		t.Fatalf("export page 2: %v", sc2)
	}
	all := strings.Split(strings.TrimSuffix(lines, "\n"), "\n")
	if len(all) != 4 || all[0] != `{"memgate_export":1}` {
		t.Fatalf("export lines: %q", all)
	}
	for _, l := range all[1:] {
		var mem memgate.Memory
		if err := json.Unmarshal([]byte(l), &mem); err != nil || mem.ID == "" {
			t.Fatalf("export line %q: %v", l, err)
		}
	}

	// forget, with and without if_version.
	if code, _ := e.fail("forget", `{"id":"cats","if_version":1}`); code != "version_conflict" {
		t.Fatalf("forget with a stale version: %s", code)
	}
	f := e.ok("forget", `{"id":"cats"}`)
	if f["id"] != "cats" || f["forgotten"] != true {
		t.Fatalf("forget: %v", f)
	}
	if code, _ := e.fail("forget", `{"id":"cats"}`); code != "not_found" {
		t.Fatalf("forget twice: %s", code)
	}
	if code, _ := e.fail("get", `{"id":"cats"}`); code != "not_found" {
		t.Fatalf("get after forget: %s", code)
	}
	if h := e.ok("search", `{"query":"cats"}`)["hits"].([]any); len(h) != 0 {
		t.Fatalf("search after forget: %v", h)
	}
}

func TestRememberEdgeCases(t *testing.T) {
	e := newEnv(t, server.Options{MaxTextBytes: 100})
	if m := memoryOf(t, e.ok("remember", `{"text":"   ","allow_empty":true}`)); m["text"] != "   " {
		t.Fatalf("allow_empty: %v", m)
	}
	if code, field := e.fail("remember", `{"text":"  \n "}`); code != "invalid_argument" || field != "text" {
		t.Fatalf("blank text: %s %s", code, field)
	}
}

func TestIfVersionZeroMeansCreateOnly(t *testing.T) {
	e := newEnv(t, server.Options{})
	if r := e.ok("remember", `{"id":"once","text":"a","if_version":0}`); r["created"] != true {
		t.Fatalf("create-only: %v", r)
	}
	if code, _ := e.fail("remember", `{"id":"once","text":"b","if_version":0}`); code != "version_conflict" {
		t.Fatalf("second create-only: %s", code)
	}
}

func TestMaxTextBytesOption(t *testing.T) {
	e := newEnv(t, server.Options{MaxTextBytes: 100})
	e.ok("remember", js(t, map[string]any{"text": strings.Repeat("a", 100)}))
	res := e.call("remember", js(t, map[string]any{"text": strings.Repeat("a", 101)}))
	code, field := envelopeOf(t, res)
	if code != "too_large" || field != "text" {
		t.Fatalf("101 bytes: %s %s", code, field)
	}
	if lim := e.ok("stats", "")["limits"].(map[string]any); lim["max_memory_bytes"] != 100.0 {
		t.Fatalf("stats limits: %v", lim)
	}
	tools, _ := e.cs.ListTools(e.ctx, nil)
	for _, tool := range tools.Tools {
		if tool.Name == "remember" {
			if got := mustJSON(t, tool.InputSchema.(map[string]any)["properties"].(map[string]any)["text"].(map[string]any)["maxLength"]); got != "100" {
				t.Fatalf("text maxLength = %s", got)
			}
		}
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	lease := server.LeaseOf(newPool(t, 0).Lease)
	for _, tc := range []struct {
		name string
		opts server.Options
		want string
	}{
		{"no lease", server.Options{}, "Lease is required"},
		{"unknown tool", server.Options{Lease: lease, DisabledTools: []string{"recall"}}, `unknown tool "recall"`},
		{"unknown mode", server.Options{Lease: lease, WriteMode: "rw"}, `unknown write mode "rw"`},
		{"negative text limit", server.Options{Lease: lease, MaxTextBytes: -1}, "MaxTextBytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := server.New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want %q", err, tc.want)
			}
		})
	}
}

func toolNames(t *testing.T, e *env) string {
	t.Helper()
	res, err := e.cs.ListTools(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return strings.Join(names, " ")
}

func promptNames(t *testing.T, e *env) string {
	t.Helper()
	var names []string
	for p, err := range e.cs.Prompts(e.ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, p.Name)
	}
	return strings.Join(names, " ")
}

func TestDisabledToolsAreNotListedAndUnknown(t *testing.T) {
	e := newEnv(t, server.Options{DisabledTools: []string{"export", "search"}})
	if got := toolNames(t, e); got != "forget get list remember stats" {
		t.Fatalf("tools = %s", got)
	}
	_, err := e.cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "export"})
	if rpcCode(err) != jsonrpc.CodeInvalidParams {
		t.Fatalf("disabled tool: %v", err)
	}
	if got := promptNames(t, e); got != "review-memories save-memory" {
		t.Fatalf("prompts without search: %s", got)
	}
	if _, err := e.srv.Call(e.ctx, "search", json.RawMessage(`{"query":"x"}`)); rpcCode(err) != jsonrpc.CodeInvalidParams {
		t.Fatalf("Call of a disabled tool: %v", err)
	}
}

func TestReadOnlyModeHidesWriters(t *testing.T) {
	e := newEnv(t, server.Options{WriteMode: server.WriteReadOnly})
	if got := toolNames(t, e); got != "export get list search stats" {
		t.Fatalf("tools = %s", got)
	}
	for _, name := range []string{"remember", "forget"} {
		_, err := e.cs.CallTool(e.ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": "x", "id": "x"}})
		if rpcCode(err) != jsonrpc.CodeInvalidParams {
			t.Fatalf("%s in read-only mode: %v", name, err)
		}
	}
	if got := e.ok("stats", "")["write_mode"]; got != "read-only" {
		t.Fatalf("write_mode = %v", got)
	}
	if got := promptNames(t, e); got != "recall-context review-memories" {
		t.Fatalf("prompts in read-only mode: %s", got)
	}
	if e.srv.Enabled("remember") || !e.srv.Enabled("get") {
		t.Fatal("Enabled disagrees with the mode")
	}
}

func TestCandidateModeKeepsMemoriesForApproval(t *testing.T) {
	e := newEnv(t, server.Options{WriteMode: server.WriteCandidate})
	if got := toolNames(t, e); got != "export get list remember search stats" {
		t.Fatalf("tools = %s", got)
	}
	res := e.ok("remember", `{"id":"proposal","text":"the build uses zig for cross compiles"}`)
	if res["candidate"] != true || res["created"] != false || memoryOf(t, res)["id"] != "proposal" {
		t.Fatalf("remember in candidate mode = %v", res)
	}
	if code, _ := e.fail("get", `{"id":"proposal"}`); code != "not_found" {
		t.Fatalf("get of a candidate: %s", code)
	}
	if hits := e.ok("search", `{"query":"zig cross compiles"}`)["hits"].([]any); len(hits) != 0 {
		t.Fatalf("search sees a candidate: %v", hits)
	}
	if code, field := e.fail("remember", `{"text":""}`); code != "invalid_argument" || field != "text" {
		t.Fatalf("candidate mode still validates: %s %s", code, field)
	}
	s, release, err := e.pool.Lease(e.ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Approve(e.ctx, "proposal")
	release()
	if err != nil {
		t.Fatal(err)
	}
	if got := memoryOf(t, e.ok("get", `{"id":"proposal"}`))["text"]; got != "the build uses zig for cross compiles" {
		t.Fatalf("approved memory = %v", got)
	}
	if got := e.ok("stats", "")["write_mode"]; got != "candidate" {
		t.Fatalf("write_mode = %v", got)
	}
}

func TestNamespaceArgument(t *testing.T) {
	t.Run("off: absent from every schema and refused", func(t *testing.T) {
		e := newEnv(t, server.Options{})
		tools, _ := e.cs.ListTools(e.ctx, nil)
		for _, tool := range tools.Tools {
			if strings.Contains(mustJSON(t, tool.InputSchema), "namespace") {
				t.Errorf("%s mentions namespace: %s", tool.Name, mustJSON(t, tool.InputSchema))
			}
		}
		if code, field := e.fail("get", `{"id":"a","namespace":"other"}`); code != "invalid_argument" || field != "namespace" {
			t.Fatalf("namespace without --namespace-arg: %s %s", code, field)
		}
	})
	t.Run("on: every tool takes it and the stores are apart", func(t *testing.T) {
		e := newEnv(t, server.Options{NamespaceArg: true})
		tools, _ := e.cs.ListTools(e.ctx, nil)
		for _, tool := range tools.Tools {
			props := tool.InputSchema.(map[string]any)["properties"].(map[string]any)
			if _, ok := props["namespace"]; !ok {
				t.Errorf("%s lacks namespace", tool.Name)
			}
		}
		e.ok("remember", `{"id":"a","text":"in team","namespace":"team"}`)
		e.ok("remember", `{"id":"a","text":"in default"}`)
		if m := memoryOf(t, e.ok("get", `{"id":"a","namespace":"team"}`)); m["text"] != "in team" {
			t.Fatalf("team: %v", m)
		}
		if m := memoryOf(t, e.ok("get", `{"id":"a"}`)); m["text"] != "in default" {
			t.Fatalf("default: %v", m)
		}
		if st := e.ok("stats", `{"namespace":"team"}`); st["namespace"] != "team" || st["count"] != 1.0 {
			t.Fatalf("stats team: %v", st)
		}
		for _, bad := range []string{`"Team"`, `""`, `"a/b"`, js(t, strings.Repeat("n", 65)), `7`} {
			if code, field := e.fail("stats", `{"namespace":`+bad+`}`); code != "invalid_argument" || field != "namespace" {
				t.Fatalf("namespace %s: %s %s", bad, code, field)
			}
		}
		e.ok("stats", js(t, map[string]any{"namespace": strings.Repeat("n", 64)}))
	})
}

func TestCallRunsToolsWithoutAClient(t *testing.T) {
	e := newEnv(t, server.Options{})
	res, err := e.srv.Call(e.ctx, "remember", json.RawMessage(`{"id":"k","text":"via invoke"}`))
	if err != nil || res.IsError {
		t.Fatalf("Call: %v %v", err, res)
	}
	res, err = e.srv.Call(e.ctx, "get", json.RawMessage(`{"id":"k","extra":1}`))
	if err != nil || !res.IsError {
		t.Fatalf("Call with an unknown field: %v %v", err, res)
	}
	if _, err := e.srv.Call(e.ctx, "get", json.RawMessage(`"k"`)); rpcCode(err) != jsonrpc.CodeInvalidParams {
		t.Fatalf("Call with a string for arguments: %v", err)
	}
	if _, err := e.srv.Call(e.ctx, "nope", nil); rpcCode(err) != jsonrpc.CodeInvalidParams {
		t.Fatalf("Call of an unknown tool: %v", err)
	}
}

func TestWriteScope(t *testing.T) {
	pool := newPool(t, 0)
	r := &tenants.Resolver{Strategy: tenants.Token}
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease), Resolve: r.Resolve, WriteScope: "memory:write"})
	if err != nil {
		t.Fatal(err)
	}
	reader := &memgate.Principal{Subject: "r", Namespace: "team", Scopes: []string{"memory:read"}}
	writer := &memgate.Principal{Subject: "w", Namespace: "team", Scopes: []string{"memory:read", "memory:write"}}

	t.Run("principal in the context", func(t *testing.T) {
		ctx := server.WithPrincipal(t.Context(), writer)
		if res, err := srv.Call(ctx, "remember", json.RawMessage(`{"id":"a","text":"x"}`)); err != nil || res.IsError {
			t.Fatalf("writer: %v %+v", err, res)
		}
		ctx = server.WithPrincipal(t.Context(), reader)
		res, err := srv.Call(ctx, "forget", json.RawMessage(`{"id":"a"}`))
		if err != nil || !res.IsError {
			t.Fatalf("reader forget: %v %+v", err, res)
		}
		if code, _ := envelopeOf(t, res); code != "forbidden" {
			t.Fatalf("reader forget: %s", code)
		}
		if res, _ := srv.Call(ctx, "get", json.RawMessage(`{"id":"a"}`)); res.IsError {
			t.Fatalf("reader get: %+v", res.StructuredContent)
		}
		res, _ = srv.Call(t.Context(), "remember", json.RawMessage(`{"text":"x"}`))
		if code, _ := envelopeOf(t, res); code != "forbidden" {
			t.Fatalf("no principal: %s", code)
		}
	})

	t.Run("principal from a bearer token over streamable HTTP", func(t *testing.T) {
		verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
			switch token {
			case "reader-token":
				return server.NewTokenInfo(reader, time.Now().Add(time.Hour)), nil
			case "writer-token":
				return server.NewTokenInfo(writer, time.Now().Add(time.Hour)), nil
			}
			return nil, auth.ErrInvalidToken
		}
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() }, nil)
		ts := httptest.NewServer(auth.RequireBearerToken(verify, nil)(h))
		t.Cleanup(ts.Close) // after the sessions' own cleanups, which end their streams
		session := func(token string) *mcp.ClientSession {
			hc := &http.Client{Transport: bearer{token}}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "http"}, nil).Connect(t.Context(),
				&mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: hc}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			return cs
		}
		w, rd := session("writer-token"), session("reader-token")
		res, err := w.CallTool(t.Context(), &mcp.CallToolParams{Name: "remember", Arguments: map[string]any{"id": "h", "text": "over http"}})
		if err != nil || res.IsError {
			t.Fatalf("writer over HTTP: %v %+v", err, res)
		}
		res, err = rd.CallTool(t.Context(), &mcp.CallToolParams{Name: "forget", Arguments: map[string]any{"id": "h"}})
		if err != nil {
			t.Fatal(err)
		}
		if code, _ := envelopeOf(t, res); code != "forbidden" {
			t.Fatalf("reader over HTTP: %s", code)
		}
		res, err = rd.CallTool(t.Context(), &mcp.CallToolParams{Name: "get", Arguments: map[string]any{"id": "h"}})
		if err != nil || res.IsError {
			t.Fatalf("reader get over HTTP: %v %+v", err, res)
		}
		rr, err := rd.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: server.MemoryURI("h")})
		if err != nil || rr.Contents[0].Text != "over http" {
			t.Fatalf("resource over HTTP: %v %+v", err, rr)
		}
	})
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// failingLease stands in for a pool whose store cannot be had.
func failingLease(err error) server.Lease {
	return func(context.Context, memgate.Namespace) (server.Store, func(), error) { return nil, nil, err }
}

func TestLeaseFailuresBecomeToolErrors(t *testing.T) {
	busy := &memgate.Error{Code: memgate.CodeTooManyStores, Message: "every store slot is in use; retry shortly"}
	e := newEnv(t, server.Options{Lease: failingLease(busy)})
	if code, _ := e.fail("get", `{"id":"a"}`); code != "too_many_stores" {
		t.Fatalf("busy pool: %s", code)
	}
	e = newEnv(t, server.Options{Lease: failingLease(fmt.Errorf("open /data/stores/x: %w", errors.New("disk on fire")))})
	res := e.call("get", `{"id":"a"}`)
	code, _ := envelopeOf(t, res)
	msg := res.StructuredContent.(map[string]any)["error"].(map[string]any)["message"]
	if code != "internal" || msg != memgate.InternalMessage || strings.Contains(mustJSON(t, res), "disk") {
		t.Fatalf("internal error: %s", mustJSON(t, res))
	}
	if logs := e.logs.String(); strings.Count(logs, "disk on fire") != 1 || !strings.Contains(logs, `"level":"ERROR"`) {
		t.Fatalf("the cause must be logged once, at error level:\n%s", logs)
	}
}

// panickyStore fails in a way a real store cannot be made to on demand.
type panickyStore struct{ server.Store }

func (panickyStore) Get(context.Context, string) (memgate.Memory, error) { panic("index out of range") }

func TestAPanicInAToolIsAnInternalError(t *testing.T) {
	lease := func(context.Context, memgate.Namespace) (server.Store, func(), error) {
		return panickyStore{}, func() {}, nil
	}
	e := newEnv(t, server.Options{Lease: lease})
	if code, _ := e.fail("get", `{"id":"a"}`); code != "internal" {
		t.Fatalf("panic: %s", code)
	}
	if logs := e.logs.String(); strings.Count(logs, "index out of range") != 1 {
		t.Fatalf("the panic must be logged once:\n%s", logs)
	}
	// The session goes on.
	if code, _ := e.fail("get", `{"id":"b"}`); code != "internal" {
		t.Fatalf("after a panic: %s", code)
	}
}

func TestConcurrentCalls(t *testing.T) {
	e := newEnv(t, server.Options{})
	errs := make(chan error, 64)
	for w := range 8 {
		go func() {
			for i := range 8 {
				res, err := e.cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "remember",
					Arguments: map[string]any{"id": fmt.Sprintf("w%d-%d", w, i), "text": "concurrent write"}})
				if err == nil && res.IsError {
					err = fmt.Errorf("remember: %v", res.StructuredContent)
				}
				if err == nil {
					res, err = e.cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"query": "concurrent"}})
				}
				if err == nil && res.IsError {
					err = fmt.Errorf("search: %v", res.StructuredContent)
				}
				errs <- err
			}
		}()
	}
	for range 64 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := e.ok("stats", "")["count"]; n != 64.0 {
		t.Fatalf("count = %v", n)
	}
}
