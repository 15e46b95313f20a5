package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/server"
)

func TestMemoryResource(t *testing.T) {
	e := newEnv(t, server.Options{})
	id := "notes/2026 plan: ünïcode & more?#"
	e.ok("remember", js(t, map[string]any{"id": id, "text": "  the plan\n", "title": "Plan", "tags": []string{"plan"},
		"metadata": map[string]any{"owner": "ana"}}))
	uri := server.MemoryURI(id)
	if !strings.HasPrefix(uri, "memgate://memory/notes%2F2026%20plan%3A%20%C3%BC") {
		t.Fatalf("uri = %s", uri)
	}
	res, err := e.cs.ReadResource(e.ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Contents[0]
	if c.URI != uri || c.MIMEType != "text/plain" || c.Text != "  the plan\n" {
		t.Fatalf("contents: %+v", c)
	}
	meta := mustJSON(t, c.Meta)
	for _, want := range []string{`"id":` + js(t, id), `"title":"Plan"`, `"tags":["plan"]`, `"metadata":{"owner":"ana"}`,
		`"version":1`, `"bytes":11`, `"created_at":"2026-01-02T03:04:05.001Z"`} {
		if !strings.Contains(meta, want) {
			t.Errorf("_meta lacks %s: %s", want, meta)
		}
	}
	if res.CacheScope != "private" {
		t.Errorf("cacheScope = %q", res.CacheScope)
	}
}

func TestStatsResource(t *testing.T) {
	e := newEnv(t, server.Options{})
	e.ok("remember", `{"text":"one"}`)
	res, err := e.cs.ReadResource(e.ctx, &mcp.ReadResourceParams{URI: server.StatsURI})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Contents[0]
	var st map[string]any
	if err := json.Unmarshal([]byte(c.Text), &st); err != nil || c.MIMEType != "application/json" {
		t.Fatalf("stats resource: %v %+v", err, c)
	}
	if st["count"] != 1.0 || st["namespace"] != "default" || st["recall"] != server.Recall {
		t.Fatalf("stats: %v", st)
	}
}

func TestResourceListPagesThroughTheNamespace(t *testing.T) {
	e := newEnv(t, server.Options{})
	const n = 230
	for i := range n {
		e.ok("remember", fmt.Sprintf(`{"id":"m%03d","text":"memory %d","title":"T%d"}`, i, i, i))
	}
	var (
		uris  []string
		pages int
	)
	for r, err := range e.cs.Resources(e.ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
		if r.URI != server.StatsURI && (r.MIMEType != "text/plain" || r.Size == 0 || r.Name == "" || r.Title == "") {
			t.Fatalf("resource: %+v", r)
		}
	}
	if len(uris) != n+1 || uris[0] != server.StatsURI {
		t.Fatalf("%d resources, first %v", len(uris), uris[:1])
	}
	seen := map[string]bool{}
	for _, u := range uris {
		if seen[u] {
			t.Fatalf("%s listed twice", u)
		}
		seen[u] = true
	}
	// Newest first, in pages of at most 100.
	first, err := e.cs.ListResources(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for cur := first.NextCursor; cur != ""; pages++ {
		page, err := e.cs.ListResources(e.ctx, &mcp.ListResourcesParams{Cursor: cur})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Resources) > 100 {
			t.Fatalf("page of %d", len(page.Resources))
		}
		cur = page.NextCursor
	}
	if first.Resources[1].URI != server.MemoryURI("m229") || pages != 2 {
		t.Fatalf("first memory %s, %d more pages", first.Resources[1].URI, pages)
	}
}

func TestResourceTemplates(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts server.Options
		want string
	}{
		{"default", server.Options{}, "memgate://memory/{id} memgate://stats"},
		{"namespace argument", server.Options{NamespaceArg: true},
			"memgate://memory/{id} memgate://namespace/{namespace}/memory/{id} memgate://stats"},
		{"no get", server.Options{DisabledTools: []string{"get"}}, "memgate://stats"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts)
			var got []string
			for rt, err := range e.cs.ResourceTemplates(e.ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, rt.URITemplate)
			}
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("templates: %v", got)
			}
		})
	}
}

func TestResourcesFollowTheTools(t *testing.T) {
	e := newEnv(t, server.Options{DisabledTools: []string{"list", "stats"}})
	e.ok("remember", `{"id":"a","text":"x"}`)
	res, err := e.cs.ListResources(e.ctx, nil)
	if err != nil || len(res.Resources) != 0 {
		t.Fatalf("without list and stats: %v %+v", err, res)
	}
	if _, err := e.cs.ReadResource(e.ctx, &mcp.ReadResourceParams{URI: server.StatsURI}); err == nil {
		t.Fatal("stats resource without the stats tool")
	}
	if _, err := e.cs.ReadResource(e.ctx, &mcp.ReadResourceParams{URI: server.MemoryURI("a")}); err != nil {
		t.Fatalf("memory resource with get: %v", err)
	}
}

func TestNamespacedMemoryResource(t *testing.T) {
	e := newEnv(t, server.Options{NamespaceArg: true})
	e.ok("remember", `{"id":"a b","text":"team memory","namespace":"team"}`)
	uri := server.NamespaceMemoryURI("team", "a b")
	if uri != "memgate://namespace/team/memory/a%20b" {
		t.Fatalf("uri = %s", uri)
	}
	res, err := e.cs.ReadResource(e.ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil || res.Contents[0].Text != "team memory" {
		t.Fatalf("read: %v %+v", err, res)
	}
	if _, err := e.cs.ReadResource(e.ctx, &mcp.ReadResourceParams{URI: server.MemoryURI("a b")}); err == nil {
		t.Fatal("the default namespace must not see the team's memory")
	}
	if _, err := e.cs.ReadResource(e.ctx, &mcp.ReadResourceParams{URI: "memgate://namespace/Team/memory/a"}); err == nil {
		t.Fatal("an invalid namespace must not be read")
	}
}
