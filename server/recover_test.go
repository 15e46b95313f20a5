package server_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/gateway"
)

// panicStore panics in every method, as a store on a damaged file can.
type panicStore struct{}

const panicValue = "invalid freelist page: 0, page type is unknown<00>"

func (panicStore) Get(context.Context, string) (memgate.Memory, error) { panic(panicValue) }
func (panicStore) List(context.Context, memgate.ListQuery) (memgate.Page, error) {
	panic(panicValue)
}
func (panicStore) Search(context.Context, memgate.Query) (memgate.Result, error) {
	panic(panicValue)
}
func (panicStore) Stats(context.Context) (memgate.StoreStats, error) { panic(panicValue) }
func (panicStore) Write(context.Context, memgate.Write) (memgate.Written, error) {
	panic(panicValue)
}
func (panicStore) Delete(context.Context, string, *int64) error { panic(panicValue) }
func (panicStore) Export(context.Context, io.Writer, string, int) (int, string, error) {
	panic(panicValue)
}
func (panicStore) ExportLines(context.Context, string, int, func([]byte) bool) (int, string, error) {
	panic(panicValue)
}

func panicLease(context.Context, memgate.Namespace) (server.Store, func(), error) {
	return panicStore{}, func() {}, nil
}

// The words the calls below send, none of which may reach the log.
const sentWord = "zebrafinchsong"

// panickingCalls makes every kind of request that reaches a store on cs
// and checks that each fails alone: tools with the internal envelope, the
// rest with a JSON-RPC internal error.
func panickingCalls(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx := t.Context()
	for _, c := range []struct{ tool, args string }{
		{server.ToolRemember, `{"text":"` + sentWord + `"}`},
		{server.ToolGet, `{"id":"` + sentWord + `"}`},
		{server.ToolSearch, `{"query":"` + sentWord + `"}`},
		{server.ToolList, `{}`},
		{server.ToolForget, `{"id":"` + sentWord + `"}`},
		{server.ToolStats, `{}`},
		{server.ToolExport, `{}`},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: json.RawMessage(c.args)})
		if err != nil {
			t.Fatalf("%s: protocol error %v", c.tool, err)
		}
		if code, _ := envelopeOf(t, res); code != string(memgate.CodeInternal) {
			t.Fatalf("%s: code %s, want internal", c.tool, code)
		}
	}
	internal := func(what string, err error) {
		t.Helper()
		if rpcCode(err) != jsonrpc.CodeInternalError {
			t.Fatalf("%s: %v, want a JSON-RPC internal error", what, err)
		}
		if strings.Contains(err.Error(), "freelist") {
			t.Fatalf("%s: the client sees the panic: %v", what, err)
		}
	}
	_, err := cs.ListResources(ctx, nil)
	internal("resources/list", err)
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: server.MemoryURI(sentWord)})
	internal("resources/read memory", err)
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: server.StatsURI})
	internal("resources/read stats", err)
	_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: server.PromptRecallContext,
		Arguments: map[string]string{"topic": sentWord}})
	internal("prompts/get recall-context", err)
	_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: server.PromptReviewMemories})
	internal("prompts/get review-memories", err)
	// The session, and the server, go on.
	if res, err := cs.ListTools(ctx, nil); err != nil || len(res.Tools) != len(server.ToolNames) {
		t.Fatalf("tools/list after the panics: %v", err)
	}
}

func TestPanicInAnyHandlerFailsOnlyItsRequest(t *testing.T) {
	e := newEnv(t, server.Options{Lease: panicLease})
	panickingCalls(t, e.cs)
	logs := e.logs.String()
	if strings.Contains(logs, sentWord) {
		t.Fatalf("the log holds what was sent:\n%s", logs)
	}
	var lines int
	for line := range strings.Lines(logs) {
		if strings.Contains(line, "panic: "+panicValue) && strings.Contains(line, `"code":"internal"`) {
			lines++
		}
	}
	// One line per request above: 7 tools, 3 resource requests, 2 prompts.
	if lines != 12 {
		t.Fatalf("%d panic lines, want 12:\n%s", lines, logs)
	}
	if !strings.Contains(logs, "panicStore") {
		t.Fatalf("the log does not say where the panic happened:\n%s", logs)
	}
	// A successful-looking line of a request that panicked would mislead.
	if strings.Count(logs, `"method":"resources/list"`) != 1 {
		t.Fatalf("resources/list logged other than once:\n%s", logs)
	}
}

func TestPanicInCallIsTheInternalEnvelope(t *testing.T) {
	srv, err := server.New(server.Options{Lease: panicLease})
	if err != nil {
		t.Fatal(err)
	}
	res, err := srv.Call(t.Context(), server.ToolGet, json.RawMessage(`{"id":"k"}`))
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := envelopeOf(t, res); code != string(memgate.CodeInternal) {
		t.Fatalf("code %s", code)
	}
}

func TestPanicOverHTTPLeavesTheGatewayServing(t *testing.T) {
	g := startGateway(t, gateway.Options{}, server.Options{Lease: panicLease})
	panickingCalls(t, connectHTTP(t, g.url, nil))
	// A new session still works, and the gateway stops cleanly.
	cs := connectHTTP(t, g.url, nil)
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	if err := g.shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}
