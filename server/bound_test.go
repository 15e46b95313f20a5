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
	g := startGatewayOn(t, pool, server.GatewayOptions{},
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
