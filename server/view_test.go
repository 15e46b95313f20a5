package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

// What cmd/memgate wires in ranks on a view's scale.
var _ server.Ranker = (*storage.Store)(nil)

// viewEnv is a server on pool whose calls go to namespace primary and whose
// search and get also read include, in order (no view when include is nil).
func viewEnv(t *testing.T, pool *tenants.Pool, opts server.Options, primary string, include ...string) *env {
	t.Helper()
	opts.Lease, opts.LeaseRead = server.LeaseOf(pool.Lease), server.LeaseOf(pool.LeaseRead)
	r := &tenants.Resolver{Strategy: tenants.Fixed, Default: memgate.Namespace(primary), AllowArg: opts.NamespaceArg}
	opts.Resolve = r.Resolve
	if include != nil {
		in := make([]memgate.Namespace, len(include))
		for i, ns := range include {
			in[i] = memgate.Namespace(ns)
		}
		opts.View = func(p *memgate.Principal, ns memgate.Namespace) []memgate.Namespace { return r.View(p, ns, in) }
	}
	return newEnv(t, opts)
}

func hitsOf(t *testing.T, res map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, h := range res["hits"].([]any) {
		out = append(out, h.(map[string]any))
	}
	return out
}

func receiptNamespaces(res map[string]any) []string {
	var out []string
	ns, _ := res["receipt"].(map[string]any)["namespaces"].([]any)
	for _, n := range ns {
		out = append(out, n.(string))
	}
	return out
}

// TestViewScoresAsOneStore: a search through a view of two namespaces gives
// each memory the lexical score it has in one namespace holding the
// memories of both, and the same order and relative scores.
func TestViewScoresAsOneStore(t *testing.T) {
	pool := newPool(t, 0)
	proj, global, union := viewEnv(t, pool, server.Options{}, "proj"), viewEnv(t, pool, server.Options{}, "global"),
		viewEnv(t, pool, server.Options{}, "union")
	rng := rand.New(rand.NewPCG(3, 4))
	words := strings.Fields("build deploy test lint cache docker go rust yaml tabs spaces review merge release")
	for i := range 150 {
		text := make([]string, 2+rng.IntN(25))
		for j := range text {
			text[j] = words[min(rng.IntN(len(words)), rng.IntN(len(words)))]
		}
		args := fmt.Sprintf(`{"id":"m%03d","text":%q,"tags":["t%d"]}`, i, strings.Join(text, " "), i%2)
		home := proj
		if rng.IntN(2) == 0 {
			home = global
		}
		home.ok("remember", args)
		union.ok("remember", args)
	}
	view := viewEnv(t, pool, server.Options{}, "proj", "global")
	for _, q := range []string{`{"query":"docker release","limit":100}`, `{"query":"merge","limit":100}`,
		`{"query":"release spaces","tags":["t1"],"limit":100}`, `{"query":"tabs review","limit":7}`} {
		want := hitsOf(t, union.ok("search", q))
		res := view.ok("search", q)
		got := hitsOf(t, res)
		if len(want) == 0 || len(got) != len(want) {
			t.Fatalf("%s: %d hits through the view, %d in the union", q, len(got), len(want))
		}
		for i, h := range got {
			w := want[i]
			for _, k := range []string{"lexical_score", "score"} {
				if math.Abs(h[k].(float64)-w[k].(float64)) > 1e-9 {
					t.Fatalf("%s: hit %d (%s) has %s %v through the view, %v in the union (%s)", q, i, h["id"], k, h[k], w[k], w["id"])
				}
			}
		}
		gotIDs, wantIDs := []string{}, []string{}
		for i := range got {
			gotIDs, wantIDs = append(gotIDs, got[i]["id"].(string)), append(wantIDs, want[i]["id"].(string))
			if ns := got[i]["namespace"]; ns != "proj" && ns != "global" {
				t.Fatalf("%s: a hit of namespace %v", q, ns)
			}
		}
		slices.Sort(gotIDs)
		slices.Sort(wantIDs)
		if !slices.Equal(gotIDs, wantIDs) {
			t.Fatalf("%s: the view finds %v, the union %v", q, gotIDs, wantIDs)
		}
		if ns := receiptNamespaces(res); !slices.Equal(ns, []string{"proj", "global"}) {
			t.Fatalf("receipt namespaces %v", ns)
		}
	}
	// Alone, the primary scores on its own scale, and says no namespace.
	alone := hitsOf(t, proj.ok("search", `{"query":"docker release"}`))
	if _, ok := alone[0]["namespace"]; ok {
		t.Fatal("a hit says its namespace on a server without views")
	}
}

// TestViewGetOrder: get reads the primary first, then each included
// namespace in order.
func TestViewGetOrder(t *testing.T) {
	pool := newPool(t, 0)
	for _, ns := range []string{"proj", "team", "global"} {
		e := viewEnv(t, pool, server.Options{}, ns)
		e.ok("remember", fmt.Sprintf(`{"id":"shared","text":"shared of %s"}`, ns))
		e.ok("remember", fmt.Sprintf(`{"id":"only-%s","text":"only of %s"}`, ns, ns))
	}
	view := viewEnv(t, pool, server.Options{}, "proj", "team", "global")
	for _, tc := range []struct{ id, ns string }{
		{"shared", "proj"}, {"only-proj", "proj"}, {"only-team", "team"}, {"only-global", "global"},
	} {
		m := view.ok("get", fmt.Sprintf(`{"id":%q}`, tc.id))["memory"].(map[string]any)
		if m["namespace"] != tc.ns || m["text"] != strings.Replace(tc.id, "-", " of ", 1)+"" && m["text"] != "shared of "+tc.ns {
			t.Fatalf("get %s: %v", tc.id, m)
		}
	}
	if code, _ := view.fail("get", `{"id":"nowhere"}`); code != "not_found" {
		t.Fatalf("get of an id in no namespace: %s", code)
	}
	// With the primary's copy forgotten, the first included one answers.
	view.ok("forget", `{"id":"shared"}`)
	if m := view.ok("get", `{"id":"shared"}`)["memory"].(map[string]any); m["namespace"] != "team" || m["text"] != "shared of team" {
		t.Fatalf("get after the primary's is forgotten: %v", m)
	}
	// The order is the configuration's.
	other := viewEnv(t, pool, server.Options{}, "proj", "global", "team")
	if m := other.ok("get", `{"id":"shared"}`)["memory"].(map[string]any); m["namespace"] != "global" {
		t.Fatalf("get through global, team: %v", m)
	}
}

// TestViewWritesStayOnPrimary: remember, forget, list, export and stats
// work on the primary alone; their memories say it.
func TestViewWritesStayOnPrimary(t *testing.T) {
	pool := newPool(t, 0)
	global := viewEnv(t, pool, server.Options{}, "global")
	global.ok("remember", `{"id":"g","text":"a global note"}`)
	view := viewEnv(t, pool, server.Options{}, "proj", "global")
	m := view.ok("remember", `{"id":"p","text":"a project note"}`)["memory"].(map[string]any)
	if m["namespace"] != "proj" {
		t.Fatalf("remember through a view: %v", m)
	}
	if code, _ := global.fail("get", `{"id":"p"}`); code != "not_found" {
		t.Fatalf("the view's remember reached the included namespace: %s", code)
	}
	if code, _ := view.fail("forget", `{"id":"g"}`); code != "not_found" {
		t.Fatalf("forget of an included namespace's memory: %s", code)
	}
	global.ok("get", `{"id":"g"}`)
	list := view.ok("list", `{}`)["memories"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["id"] != "p" || list[0].(map[string]any)["namespace"] != "proj" {
		t.Fatalf("list through a view: %v", list)
	}
	if n := view.ok("export", `{}`)["count"]; n != 1.0 {
		t.Fatalf("export through a view: %v memories", n)
	}
	if st := view.ok("stats", `{}`); st["namespace"] != "proj" || st["count"] != 1.0 {
		t.Fatalf("stats through a view: %v", st)
	}
	// A search without words merges newest first, and says where each is.
	hits := hitsOf(t, view.ok("search", `{"filter":{}, "tags":[], "query":"note"}`))
	if len(hits) != 2 || hits[0]["namespace"] != "proj" || hits[1]["namespace"] != "global" {
		t.Fatalf("search through a view: %v", hits)
	}
}

// TestViewLeasesWhatItReads: an included namespace with no store on disk
// costs no slot and gets no store; one with a store takes a slot, and when
// there is none the call fails with too_many_stores.
func TestViewLeasesWhatItReads(t *testing.T) {
	dir := t.TempDir()
	pool, err := tenants.NewPool(tenants.Options{Dir: dir, MaxStores: 1, Store: storage.Options{NoSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close(context.Background()) })
	view := viewEnv(t, pool, server.Options{}, "proj", "absent")
	view.ok("remember", `{"text":"a project note"}`)
	res := view.ok("search", `{"query":"note"}`)
	if len(hitsOf(t, res)) != 1 || !slices.Equal(receiptNamespaces(res), []string{"proj", "absent"}) {
		t.Fatalf("search with an absent namespace: %v", res)
	}
	if code, _ := view.fail("get", `{"id":"nowhere"}`); code != "not_found" {
		t.Fatalf("get: %s", code)
	}
	if _, err := os.Stat(tenants.StoreDir(dir, "absent")); !os.IsNotExist(err) {
		t.Fatalf("a read through a view made a store: %v", err)
	}

	// global has a store: a view of proj and global needs two slots.
	viewEnv(t, pool, server.Options{}, "global").ok("remember", `{"id":"g","text":"a global note"}`)
	wide := viewEnv(t, pool, server.Options{}, "proj", "global")
	if code, _ := wide.fail("search", `{"query":"note"}`); code != "too_many_stores" {
		t.Fatalf("a view of two stores with one slot: %s", code)
	}
	if code, _ := wide.fail("get", `{"id":"g"}`); code != "too_many_stores" {
		t.Fatalf("get through a view of two stores with one slot: %s", code)
	}
	// A get that the primary answers leases nothing more.
	id := hitsOf(t, view.ok("search", `{"query":"project"}`))[0]["id"].(string)
	if m := wide.ok("get", fmt.Sprintf(`{"id":%q}`, id))["memory"].(map[string]any); m["namespace"] != "proj" {
		t.Fatalf("get of the primary's memory: %v", m)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "stores"))
	if len(entries) != 2 {
		t.Fatalf("stores on disk: %v", entries)
	}
}

// TestViewBoundsTheMergedAnswer: limit, budget and the bound on answers
// hold over the hits of every namespace together.
func TestViewBoundsTheMergedAnswer(t *testing.T) {
	pool := newPool(t, 1024)
	opts := server.Options{MaxTextBytes: 1024, MaxResponseBytes: memgate.MinResponseBytes(1024)}
	for _, ns := range []string{"proj", "global"} {
		e := viewEnv(t, pool, opts, ns)
		for i := range 60 {
			e.ok("remember", fmt.Sprintf(`{"text":"word %d %s"}`, i, strings.Repeat("<", 900)))
		}
	}
	view := viewEnv(t, pool, opts, "proj", "global")
	if hits := hitsOf(t, view.ok("search", `{"query":"word","limit":7}`)); len(hits) != 7 {
		t.Fatalf("limit 7: %d hits", len(hits))
	}
	res := view.ok("search", `{"query":"word","limit":100,"budget":1000}`)
	if hits := hitsOf(t, res); len(hits) != 4 || res["receipt"].(map[string]any)["truncated"] != true {
		t.Fatalf("budget 1000 tokens of 226-token hits: %d hits, receipt %v", len(hits), res["receipt"])
	}
	raw := view.call("search", `{"query":"word","limit":100}`)
	b, _ := json.Marshal(raw)
	res = raw.StructuredContent.(map[string]any)
	if n := len(hitsOf(t, res)); n == 100 || n == 0 || res["receipt"].(map[string]any)["truncated"] != true || len(b) > opts.MaxResponseBytes {
		t.Fatalf("100 hits of 10 KiB each on the wire: %d hits, %d bytes, receipt %v", n, len(b), res["receipt"])
	}
}

// TestViewPromptAndResources: recall-context recalls through the view, and
// a memory of an included namespace has that namespace's URI, which reads
// it; memgate://memory/{id} reads the primary.
func TestViewPromptAndResources(t *testing.T) {
	pool := newPool(t, 0)
	viewEnv(t, pool, server.Options{}, "global").ok("remember", `{"id":"same","text":"tabs in global"}`)
	viewEnv(t, pool, server.Options{}, "other").ok("remember", `{"id":"o","text":"tabs elsewhere"}`)
	view := viewEnv(t, pool, server.Options{}, "proj", "global")
	view.ok("remember", `{"id":"same","text":"tabs in the project"}`)
	p, err := view.cs.GetPrompt(view.ctx, &mcp.GetPromptParams{Name: "recall-context", Arguments: map[string]string{"topic": "tabs"}})
	if err != nil {
		t.Fatal(err)
	}
	uris := map[string]string{}
	for _, m := range p.Messages[1:] {
		r := m.Content.(*mcp.EmbeddedResource).Resource
		uris[r.Text] = r.URI
		if r.Meta["namespace"] == nil {
			t.Fatalf("an embedded memory without its namespace: %v", r.Meta)
		}
	}
	if len(uris) != 2 || uris["tabs in the project"] != "memgate://memory/same" ||
		uris["tabs in global"] != "memgate://namespace/global/memory/same" {
		t.Fatalf("recall-context: %v", uris)
	}
	for uri, text := range map[string]string{"memgate://memory/same": "tabs in the project",
		"memgate://namespace/global/memory/same": "tabs in global"} {
		r, err := view.cs.ReadResource(view.ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || r.Contents[0].Text != text {
			t.Fatalf("read %s: %v %v", uri, r, err)
		}
	}
	// A namespace outside the view stays out of reach.
	if _, err := view.cs.ReadResource(view.ctx, &mcp.ReadResourceParams{URI: "memgate://namespace/other/memory/o"}); err == nil {
		t.Fatal("read a memory of a namespace outside the view")
	}
}
