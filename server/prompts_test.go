package server_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/server"
)

func promptText(t *testing.T, res *mcp.GetPromptResult) string {
	t.Helper()
	var b strings.Builder
	for _, m := range res.Messages {
		switch c := m.Content.(type) {
		case *mcp.TextContent:
			b.WriteString(c.Text)
		case *mcp.EmbeddedResource:
			b.WriteString("[" + c.Resource.URI + "] " + c.Resource.Text)
		default:
			t.Fatalf("content %T", c)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestPrompts(t *testing.T) {
	e := newEnv(t, server.Options{})
	if got := promptNames(t, e); got != "recall-context review-memories save-memory" {
		t.Fatalf("prompts: %s", got)
	}
	e.ok("remember", `{"id":"tea","text":"Ana drinks green tea without sugar.","tags":["ana"]}`)
	e.ok("remember", `{"id":"coffee","text":"Bo drinks coffee.","tags":["bo"]}`)

	res, err := e.cs.GetPrompt(e.ctx, &mcp.GetPromptParams{Name: "recall-context", Arguments: map[string]string{"topic": "what tea does Ana drink"}})
	if err != nil {
		t.Fatal(err)
	}
	got := promptText(t, res)
	if !strings.Contains(got, "Topic: what tea does Ana drink\n[memgate://memory/tea] Ana drinks green tea") {
		t.Fatalf("recall-context:\n%s", got)
	}
	res, err = e.cs.GetPrompt(e.ctx, &mcp.GetPromptParams{Name: "recall-context", Arguments: map[string]string{"topic": "drinks", "limit": "1"}})
	if err != nil || len(res.Messages) != 2 {
		t.Fatalf("recall-context limit 1: %v %d messages", err, len(res.Messages))
	}
	res, err = e.cs.GetPrompt(e.ctx, &mcp.GetPromptParams{Name: "recall-context", Arguments: map[string]string{"topic": "volcanoes"}})
	if err != nil || !strings.Contains(promptText(t, res), "no memories") {
		t.Fatalf("recall-context without hits: %v %+v", err, res)
	}

	res, err = e.cs.GetPrompt(e.ctx, &mcp.GetPromptParams{Name: "save-memory", Arguments: map[string]string{"content": "Deploys happen on Tuesdays."}})
	if err != nil {
		t.Fatal(err)
	}
	if got := promptText(t, res); !strings.Contains(got, "remember tool") || !strings.Contains(got, "Deploys happen on Tuesdays.") {
		t.Fatalf("save-memory:\n%s", got)
	}

	res, err = e.cs.GetPrompt(e.ctx, &mcp.GetPromptParams{Name: "review-memories", Arguments: map[string]string{"tag": "bo"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := promptText(t, res); !strings.Contains(got, "Merge duplicates") || !strings.Contains(got, "[memgate://memory/coffee]") || strings.Contains(got, "tea") {
		t.Fatalf("review-memories:\n%s", got)
	}
}

func TestPromptsFollowTheTools(t *testing.T) {
	e := newEnv(t, server.Options{DisabledTools: []string{"search", "remember", "list"}})
	if got := promptNames(t, e); got != "" {
		t.Fatalf("prompts without their tools: %q", got)
	}
	e = newEnv(t, server.Options{WriteMode: server.WriteReadOnly})
	res, err := e.cs.GetPrompt(e.ctx, &mcp.GetPromptParams{Name: "review-memories"})
	if err != nil {
		t.Fatal(err)
	}
	if got := promptText(t, res); !strings.Contains(got, "no memories") {
		t.Fatalf("review of an empty store: %s", got)
	}
}

// GetPrompt answers as prompts/get does over a session, and refuses a
// prompt that is not offered as the SDK does.
func TestGetPromptIsPromptsGet(t *testing.T) {
	e := newEnv(t, server.Options{DisabledTools: []string{"list"}})
	e.ok("remember", `{"id":"tea","text":"Ana drinks green tea without sugar.","tags":["ana"]}`)
	for _, args := range []map[string]string{{"topic": "tea"}, {"topic": "volcanoes"}, {"topic": "tea", "limit": "1"}} {
		want, err := e.cs.GetPrompt(e.ctx, &mcp.GetPromptParams{Name: "recall-context", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.srv.GetPrompt(e.ctx, "recall-context", args)
		if err != nil {
			t.Fatal(err)
		}
		// The session adds its own _meta (serverInfo) and resultType.
		if got.Description != want.Description || mustJSON(t, got.Messages) != mustJSON(t, want.Messages) {
			t.Fatalf("GetPrompt %v:\n%s\nprompts/get:\n%s", args, mustJSON(t, got), mustJSON(t, want))
		}
	}
	for _, c := range []struct {
		name string
		args map[string]string
	}{{"review-memories", nil}, {"no-such-prompt", nil}, {"recall-context", map[string]string{"topic": "x", "limit": "0"}}} {
		_, err := e.srv.GetPrompt(e.ctx, c.name, c.args)
		var rpc *jsonrpc.Error
		if !errors.As(err, &rpc) || rpc.Code != -32602 {
			t.Fatalf("GetPrompt %s %v: %v, want -32602", c.name, c.args, err)
		}
	}
}
