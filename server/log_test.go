package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/server"
)

// TestLogsHoldNoContent drives every tool, resource and prompt, failing and
// succeeding, with distinctive text, titles, tags, ids and queries, and
// checks that the log has one line per call with names, namespaces,
// durations and codes, and none of those values.
func TestLogsHoldNoContent(t *testing.T) {
	e := newEnv(t, server.Options{NamespaceArg: true})
	const (
		text  = "Quetzalcoatl-text-7731 lives here"
		id    = "xylophone-id-4412"
		title = "Marmalade-title-9020"
		tag   = "periwinkle-tag-5531"
		query = "zephyr-query-8843"
		meta  = "obsidian-meta-6612"
	)
	secrets := []string{"Quetzalcoatl", "xylophone", "Marmalade", "periwinkle", "zephyr", "obsidian", "ghp_"}
	calls := 0
	e.ok("remember", js(t, map[string]any{"id": id, "text": text, "title": title, "tags": []string{tag},
		"metadata": map[string]any{"k": meta}, "namespace": "logs"}))
	e.ok("remember", js(t, map[string]any{"id": id, "text": text}))
	e.ok("get", js(t, map[string]any{"id": id}))
	e.ok("search", js(t, map[string]any{"query": query + " Quetzalcoatl", "tags": []string{tag}, "tags_mode": "any"}))
	e.ok("list", js(t, map[string]any{"tags": []string{tag}}))
	e.ok("stats", "")
	e.call("export", "")
	e.fail("remember", js(t, map[string]any{"text": text + " ghp_" + strings.Repeat("aB3d", 9)}))
	e.fail("remember", js(t, map[string]any{"text": text, "title": title + "\n"}))
	e.fail("get", js(t, map[string]any{"id": id + "-missing"}))
	e.fail("search", js(t, map[string]any{"query": query, "limit": 1000}))
	e.ok("forget", js(t, map[string]any{"id": id}))
	calls += 12
	if _, err := e.cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "get", Arguments: json.RawMessage(`["` + id + `"]`)}); err == nil {
		t.Fatal("array arguments must fail")
	}
	calls++
	if _, err := e.cs.ReadResource(e.ctx, &mcp.ReadResourceParams{URI: server.NamespaceMemoryURI("logs", id)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.ReadResource(e.ctx, &mcp.ReadResourceParams{URI: server.MemoryURI(id)}); err == nil {
		t.Fatal("a forgotten memory must not be read")
	}
	if _, err := e.cs.ListResources(e.ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.GetPrompt(e.ctx, &mcp.GetPromptParams{Name: "recall-context", Arguments: map[string]string{"topic": query}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.GetPrompt(e.ctx, &mcp.GetPromptParams{Name: "save-memory", Arguments: map[string]string{"content": text}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.GetPrompt(e.ctx, &mcp.GetPromptParams{Name: "review-memories", Arguments: map[string]string{"tag": tag}}); err != nil {
		t.Fatal(err)
	}
	calls += 6

	logs := e.logs.String()
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("the log holds %q:\n%s", s, logs)
		}
	}
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	if len(lines) != calls {
		t.Errorf("%d log lines for %d calls:\n%s", len(lines), calls, logs)
	}
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		for k := range rec {
			switch k {
			case "time", "level", "msg", "method", "name", "namespace", "duration", "code":
			default:
				t.Errorf("log line has %q: %s", k, l)
			}
		}
		if rec["method"] == nil || rec["duration"] == nil {
			t.Errorf("log line lacks method or duration: %s", l)
		}
	}
	for _, want := range []string{`"name":"remember","namespace":"logs"`, `"code":"secret_detected"`, `"code":"not_found"`,
		`"code":"invalid_argument"`, `"code":"invalid_params"`, `"method":"resources/read"`, `"method":"prompts/get"`,
		`"level":"DEBUG"`, `"level":"INFO"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %s", want)
		}
	}
}
