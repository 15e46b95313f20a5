package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/gateway"
	"github.com/memgate/memgate/tenants"
)

// boundText is the memory text of the bound tests: control characters,
// which JSON writes as six-byte escapes (and seven in the text copy).
const boundMaxText = 1024

func controlText(i int) string {
	return strings.Repeat("\x01", boundMaxText-8) + fmt.Sprintf("%08d", i)
}

// fillBoundPool stores n memories of control characters and returns the
// pool and the memories in list order, as the wire carries them.
func fillBoundPool(t *testing.T, n int) (*tenants.Pool, []json.RawMessage) {
	t.Helper()
	pool := newPool(t, boundMaxText)
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease), MaxTextBytes: boundMaxText})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		args, _ := json.Marshal(map[string]any{"text": controlText(i), "tags": []string{"bound"}})
		if res, err := srv.Call(t.Context(), "remember", args); err != nil || res.IsError {
			t.Fatalf("remember %d: %v %v", i, err, res)
		}
	}
	res, err := srv.Call(t.Context(), "list", json.RawMessage(`{"limit":1000}`))
	if err != nil || res.IsError {
		t.Fatalf("list: %v %v", err, res)
	}
	var page struct {
		Memories []json.RawMessage `json:"memories"`
	}
	if err := json.Unmarshal(res.StructuredContent.(json.RawMessage), &page); err != nil || len(page.Memories) != n {
		t.Fatalf("list: %d memories (%v)", len(page.Memories), err)
	}
	return pool, page.Memories
}

// wireCost recomputes, independently of the server, what one item costs in
// a tool result: the structured copy as Go's encoder writes it (< > &
// escaped), the text copy as a JSON string, and a comma in each.
func wireCost(t *testing.T, item json.RawMessage) int {
	t.Helper()
	var compact bytes.Buffer
	if err := json.Compact(&compact, item); err != nil {
		t.Fatal(err)
	}
	structured, err := json.Marshal(json.RawMessage(compact.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	text, err := json.Marshal(compact.String())
	if err != nil {
		t.Fatal(err)
	}
	return len(structured) + len(text) - 2 + 2
}

// boundFor returns the bound under which exactly n items of list fit.
func boundFor(t *testing.T, items []json.RawMessage, n int) int {
	t.Helper()
	b := server.AnswerOverhead
	for _, m := range items[:n] {
		b += wireCost(t, m)
	}
	return b
}

// stdioCall runs one tools/call over stdio against a server with the given
// bound and returns its answer line.
func stdioCall(t *testing.T, pool *tenants.Pool, bound int, tool, args string) []byte {
	t.Helper()
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease), MaxTextBytes: boundMaxText, MaxResponseBytes: bound})
	if err != nil {
		t.Fatal(err)
	}
	return stdioCall2(t, srv, tool, args)
}

// stdioCall2 runs one tools/call over stdio against srv and returns its
// answer line.
func stdioCall2(t *testing.T, srv *server.Server, tool, args string) []byte {
	t.Helper()
	in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, args) + "\n"
	var out syncBuffer
	if err := srv.RunStdio(t.Context(), strings.NewReader(in), &out); err != nil {
		t.Fatalf("RunStdio: %v", err)
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, `{"jsonrpc":"2.0","id":2,`) {
			return []byte(l)
		}
	}
	t.Fatalf("no answer to the call over stdio:\n%.500s", out.String())
	return nil
}

// httpCall runs one tools/call over HTTP (the stateless revision, one POST)
// against a gateway with the given bound and returns the body.
func httpCall(t *testing.T, pool *tenants.Pool, bound int, tool, args string) []byte {
	t.Helper()
	g := startGatewayOn(t, pool, gateway.Options{},
		server.Options{MaxTextBytes: boundMaxText, MaxResponseBytes: bound})
	sid := g.initialize("2025-06-18", nil)
	resp := g.post(rpc{body: fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, args),
		session: sid, version: "2025-06-18"})
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("tools/call over HTTP: %d %v", resp.StatusCode, err)
	}
	// An event stream carries the answer in its data line.
	if i := bytes.Index(body, []byte("data: ")); i >= 0 && resp.Header.Get("Content-Type") == "text/event-stream" {
		body = bytes.TrimSpace(body[i+len("data: "):])
	}
	return body
}

// answer decodes a tools/call answer and checks that both copies agree.
func answer(t *testing.T, line []byte) map[string]any {
	t.Helper()
	var msg struct {
		Result struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			StructuredContent json.RawMessage `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(line, &msg); err != nil || msg.Result.IsError || len(msg.Result.Content) == 0 {
		t.Fatalf("answer: %v %.300s", err, line)
	}
	var sc map[string]any
	if err := json.Unmarshal(msg.Result.StructuredContent, &sc); err != nil {
		t.Fatal(err)
	}
	return sc
}

type transportCall func(t *testing.T, pool *tenants.Pool, bound int, tool, args string) []byte

var boundTransports = map[string]transportCall{"stdio": stdioCall, "http": httpCall}

func TestListEndsItsPageAtTheResponseBound(t *testing.T) {
	const stored, n = 60, 45
	pool, items := fillBoundPool(t, stored)
	if min := memgate.MinResponseBytes(boundMaxText); boundFor(t, items, n-1) < min {
		t.Fatalf("the test's bound %d is under the smallest allowed, %d", boundFor(t, items, n-1), min)
	}
	for name, call := range boundTransports {
		t.Run(name, func(t *testing.T) {
			for _, c := range []struct {
				bound, want int
			}{
				{boundFor(t, items, n), n},
				{boundFor(t, items, n) - 1, n - 1},
				{boundFor(t, items, n+1), n + 1},
			} {
				line := call(t, pool, c.bound, "list", `{"limit":1000}`)
				if len(line) > c.bound {
					t.Errorf("bound %d: the answer is %d bytes", c.bound, len(line))
				}
				sc := answer(t, line)
				got := sc["memories"].([]any)
				if len(got) != c.want || sc["next_cursor"] == nil {
					t.Fatalf("bound %d: %d memories (next_cursor %v), want %d and a cursor", c.bound, len(got), sc["next_cursor"], c.want)
				}
				// The next page starts where this one ended.
				args := fmt.Sprintf(`{"limit":1000,"cursor":%q}`, sc["next_cursor"])
				rest := answer(t, call(t, pool, 4<<20, "list", args))["memories"].([]any)
				if len(rest) != stored-c.want || rest[0].(map[string]any)["text"] != controlText(stored-1-c.want) {
					t.Fatalf("bound %d: the next page has %d memories", c.bound, len(rest))
				}
			}
		})
	}
}

// textCost is what one export line costs: once, inside a JSON string.
func textCost(t *testing.T, line string) int {
	t.Helper()
	b, err := json.Marshal(line)
	if err != nil {
		t.Fatal(err)
	}
	return len(b) - 2
}

func TestExportEndsItsPageAtTheResponseBound(t *testing.T) {
	const stored, n = 100, 80 // a line costs about half what a list item does
	pool, _ := fillBoundPool(t, stored)
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease), MaxTextBytes: boundMaxText})
	if err != nil {
		t.Fatal(err)
	}
	res, err := srv.Call(t.Context(), "export", json.RawMessage(`{"limit":1000}`))
	if err != nil || res.IsError {
		t.Fatalf("export: %v %v", err, res)
	}
	all := answerText(t, res)
	lines := strings.SplitAfter(all, "\n")
	if len(lines) != stored+2 || lines[stored+1] != "" { // the header, the memories, nothing after the last newline
		t.Fatalf("export: %d lines", len(lines))
	}
	boundOf := func(k int) int { // the header and k memory lines
		b := server.AnswerOverhead
		for _, l := range lines[:k+1] {
			b += textCost(t, l)
		}
		return b
	}
	for name, call := range boundTransports {
		t.Run(name, func(t *testing.T) {
			for _, c := range []struct{ bound, want int }{
				{boundOf(n), n}, {boundOf(n) - 1, n - 1}, {boundOf(n + 1), n + 1},
			} {
				line := call(t, pool, c.bound, "export", `{"limit":1000}`)
				if len(line) > c.bound {
					t.Errorf("bound %d: the answer is %d bytes", c.bound, len(line))
				}
				sc := answer(t, line)
				if sc["count"] != float64(c.want) || sc["next_cursor"] == nil {
					t.Fatalf("bound %d: %v, want %d lines and a cursor", c.bound, sc, c.want)
				}
				args := fmt.Sprintf(`{"limit":1000,"cursor":%q}`, sc["next_cursor"])
				rest := answer(t, call(t, pool, 4<<20, "export", args))
				if rest["count"] != float64(stored-c.want) || rest["next_cursor"] != nil {
					t.Fatalf("bound %d: the next page: %v", c.bound, rest)
				}
			}
		})
	}
}

func TestSearchStopsAddingHitsAtTheResponseBound(t *testing.T) {
	const stored, n = 60, 45
	pool, _ := fillBoundPool(t, stored)
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease), MaxTextBytes: boundMaxText})
	if err != nil {
		t.Fatal(err)
	}
	const args = `{"tags":["bound"],"limit":100}`
	res, err := srv.Call(t.Context(), "search", json.RawMessage(args))
	if err != nil || res.IsError {
		t.Fatalf("search: %v %v", err, res)
	}
	var r struct {
		Hits    []json.RawMessage `json:"hits"`
		Receipt map[string]any    `json:"receipt"`
	}
	if err := json.Unmarshal(res.StructuredContent.(json.RawMessage), &r); err != nil || len(r.Hits) != stored || r.Receipt["truncated"] != nil {
		t.Fatalf("search: %d hits, receipt %v (%v)", len(r.Hits), r.Receipt, err)
	}
	// The receipt of a cut answer counts too.
	r.Receipt["truncated"] = true
	receipt, _ := json.Marshal(r.Receipt)
	boundOf := func(k int) int { return boundFor(t, r.Hits, k) + wireCost(t, receipt) - 2 }
	for name, call := range boundTransports {
		t.Run(name, func(t *testing.T) {
			for _, c := range []struct{ bound, want int }{
				{boundOf(n), n}, {boundOf(n) - 1, n - 1}, {boundOf(n + 1), n + 1},
			} {
				line := call(t, pool, c.bound, "search", args)
				if len(line) > c.bound {
					t.Errorf("bound %d: the answer is %d bytes", c.bound, len(line))
				}
				sc := answer(t, line)
				hits := sc["hits"].([]any)
				if len(hits) != c.want || sc["receipt"].(map[string]any)["truncated"] != true {
					t.Fatalf("bound %d: %d hits, receipt %v; want %d and truncated", c.bound, len(hits), sc["receipt"], c.want)
				}
			}
		})
	}
}

// A memory always fits: alone over the bound, it is still the page.
func TestOneMemoryAlwaysFits(t *testing.T) {
	pool := newPool(t, 0)
	min := memgate.MinResponseBytes(0)
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease), MaxResponseBytes: min})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease), MaxResponseBytes: min - 1}); err == nil {
		t.Fatal("a bound under what one memory takes was accepted")
	}
	// The worst memory: the largest text of control characters, the
	// largest id, title and metadata of characters JSON escapes.
	md := map[string]any{}
	for i := range 8 {
		md[fmt.Sprintf("k%d", i)] = strings.Repeat("<", 1000)
	}
	const stored = 4
	for i := range stored {
		args, _ := json.Marshal(map[string]any{"text": strings.Repeat("\x01", memgate.DefaultMaxTextBytes),
			"id": fmt.Sprintf("%d", i) + strings.Repeat("<", 255), "title": strings.Repeat("\u2028", 256), "metadata": md})
		if res, err := srv.Call(t.Context(), "remember", args); err != nil || res.IsError {
			t.Fatalf("remember: %v %v", err, answerText(t, res))
		}
	}
	for _, tool := range []string{"list", "export"} {
		line := stdioCall2(t, srv, tool, `{}`)
		if len(line) > min {
			t.Errorf("%s: the answer of one memory is %d bytes, over %d", tool, len(line), min)
		}
		sc := answer(t, line)
		if sc["next_cursor"] == nil || tool == "list" && len(sc["memories"].([]any)) != 1 || tool == "export" && sc["count"].(float64) >= stored {
			t.Fatalf("%s: %v", tool, sc["next_cursor"])
		}
	}
}

func answerText(t *testing.T, res any) string {
	t.Helper()
	b, _ := json.Marshal(res)
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("result without text: %s", b)
	}
	return r.Content[0].Text
}

// A resources/list page holds no texts: even of the largest names and
// titles it stays under the smallest bound allowed.
func TestResourcesListPageFitsTheSmallestBound(t *testing.T) {
	pool := newPool(t, 0)
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 101 {
		args, _ := json.Marshal(map[string]any{"text": "t", "id": fmt.Sprintf("%03d", i) + strings.Repeat("<", 253),
			"title": strings.Repeat("\u2028", 256)})
		if res, err := srv.Call(t.Context(), "remember", args); err != nil || res.IsError {
			t.Fatalf("remember: %v", err)
		}
	}
	r := newRawSession(t, srv)
	res := r.request("resources/list", `{}`)
	if res.Error != nil {
		t.Fatal(res.Error)
	}
	var page struct {
		Resources  []any  `json:"resources"`
		NextCursor string `json:"nextCursor"`
	}
	if err := json.Unmarshal(res.Result, &page); err != nil || len(page.Resources) < 100 || page.NextCursor == "" {
		t.Fatalf("resources/list: %d resources (%v)", len(page.Resources), err)
	}
	n, min := len(wireOf(t, res)), memgate.MinResponseBytes(1)
	t.Logf("a resources/list page of the largest names: %d bytes", n)
	if n > min {
		t.Fatalf("a resources/list page of the largest names is %d bytes, over the smallest bound %d", n, min)
	}
}

// The prompts that embed memories keep to the bound as well, and embed
// about as many memories as it holds.
func TestPromptsKeepToTheResponseBound(t *testing.T) {
	const maxText = 16 << 10
	pool := newPool(t, maxText)
	opts := server.Options{Lease: server.LeaseOf(pool.Lease), MaxTextBytes: maxText}
	fill := mustServer(t, opts)
	for i := range 50 {
		args, _ := json.Marshal(map[string]any{"text": fmt.Sprintf("zebra %d ", i) + strings.Repeat("\x01", 16000)})
		if res, err := fill.Call(t.Context(), "remember", args); err != nil || res.IsError {
			t.Fatalf("remember: %v", err)
		}
	}
	bound := memgate.MinResponseBytes(maxText)
	opts.MaxResponseBytes = bound
	r := newRawSession(t, mustServer(t, opts))
	whole := newRawSession(t, fill)
	for _, params := range []string{
		`{"name":"review-memories","arguments":{}}`,
		`{"name":"recall-context","arguments":{"topic":"zebra","limit":"100"}}`,
	} {
		if n := len(wireOf(t, whole.request("prompts/get", params))); n <= bound {
			t.Fatalf("%s: the whole answer takes %d bytes: the test does not reach the bound %d", params, n, bound)
		}
		res := r.request("prompts/get", params)
		if res.Error != nil {
			t.Fatalf("%s: %v", params, res.Error)
		}
		n := len(wireOf(t, res))
		var got struct {
			Messages []any `json:"messages"`
		}
		if err := json.Unmarshal(res.Result, &got); err != nil {
			t.Fatal(err)
		}
		// One memory costs about 96 KB here (16,000 six-byte escapes): the
		// bound holds seven, and the next would pass it.
		t.Logf("%s: %d bytes (bound %d), %d memories", params, n, bound, len(got.Messages)-1)
		if n > bound || len(got.Messages)-1 != 7 {
			t.Fatalf("%s: %d bytes (bound %d), %d memories", params, n, bound, len(got.Messages)-1)
		}
	}
}

func mustServer(t *testing.T, opts server.Options) *server.Server {
	t.Helper()
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}
