package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/message"
)

func TestRunStdio(t *testing.T) {
	pool := newPool(t, 0)
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease), Version: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.RunStdio(t.Context(), inR, outW) }()

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio"}, nil).Connect(t.Context(),
		&mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ServerInfo; v.Name != "memgate" || v.Version != "1.2.3" {
		t.Fatalf("server info: %+v", v)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "remember", Arguments: map[string]any{"text": "over stdio"}})
	if err != nil || res.IsError {
		t.Fatalf("remember: %v %+v", err, res)
	}
	// The client hangs up: stdin ends and RunStdio returns cleanly.
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunStdio after stdin closed: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RunStdio did not return when stdin closed")
	}
}

func TestRunStdioStopsWithItsContext(t *testing.T) {
	pool := newPool(t, 0)
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	inR, inW := io.Pipe()
	defer inW.Close()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.RunStdio(ctx, inR, outW) }()
	go func() {
		// Every line on stdout is one JSON-RPC message.
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			if !json.Valid(sc.Bytes()) || !strings.Contains(sc.Text(), `"jsonrpc":"2.0"`) {
				t.Errorf("stdout carries %q", sc.Text())
			}
		}
	}()
	io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`+"\n")
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunStdio after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RunStdio did not return when its context ended")
	}
	outW.Close()
}

// TestRunStdioSurvivesBadLines: a line that is not JSON, or not a JSON-RPC
// message, is answered and the session goes on.
func TestRunStdioSurvivesBadLines(t *testing.T) {
	pool := newPool(t, 0)
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease)})
	if err != nil {
		t.Fatal(err)
	}
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`this is not json`,
		``,
		`{"jsonrpc":"2.0","id":2,"method":`,
		`{"jsonrpc":"1.0","id":3,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":5,"method":7}`,
		`"a string"`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":"remember"}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":9,"method":"resources/read","params":null}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"stats","arguments":{}}}`,
	}, "\n") + "\n"
	out := runLines(t, srv, in)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	got := map[string]int64{}
	for _, l := range lines {
		var m struct {
			ID    any `json:"id"`
			Error *struct {
				Code int64 `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("stdout line %q: %v", l, err)
		}
		code := int64(0)
		if m.Error != nil {
			code = m.Error.Code
		}
		got[mustJSON(t, m.ID)] += code
	}
	want := map[string]int64{"1": 0, "null": -32700*2 + -32600*2, "3": -32600, "5": -32600, "6": -32602, "7": 0, "8": -32602, "9": -32602}
	if mustJSON(t, got) != mustJSON(t, want) {
		t.Fatalf("answers by id: %v, want %v\n%s", got, want, out)
	}
	if !strings.Contains(lines[len(lines)-1], `"id":7,"result"`) || !strings.Contains(lines[len(lines)-1], "structuredContent") {
		t.Fatalf("the last call did not succeed: %s", lines[len(lines)-1])
	}
}

// TestRunStdioMatchesKeysExactly: a line is read the way the SDK reads it,
// keys exactly and once, and an id is never changed on its way back. What
// the two would read differently is refused with an answer.
func TestRunStdioMatchesKeysExactly(t *testing.T) {
	pool := newPool(t, 0)
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease)})
	if err != nil {
		t.Fatal(err)
	}
	pings := func(n int) string {
		msgs := make([]string, n)
		for i := range msgs {
			msgs[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":"b%d","method":"ping"}`, i)
		}
		return "[" + strings.Join(msgs, ",") + "]"
	}
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":10,"ID":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":11,"METHOD":"ping"}`,
		`{"jsonrpc":"2.0","id":12,"Method":"tools/call","params":{"name":"stats","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":13,"method":"ping","method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":9223372036854775808,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1e3,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":14,"method":"tools/call","params":null}`,
		pings(message.MaxBatch + 1),
		pings(message.MaxBatch),
		`{"jsonrpc":"2.0","id":9007199254740992,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"stats","arguments":{}}}`,
	}, "\n") + "\n"
	var out syncBuffer
	if err := srv.RunStdio(t.Context(), strings.NewReader(in), &out); err != nil {
		t.Fatalf("RunStdio: %v", err)
	}
	got := map[string][]int64{}
	batches := 0
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.HasPrefix(l, "[") {
			var answers []map[string]any
			if err := json.Unmarshal([]byte(l), &answers); err != nil || len(answers) != message.MaxBatch {
				t.Fatalf("a batch of %d pings: %d answers (%v)", message.MaxBatch, len(answers), err)
			}
			batches++
			continue
		}
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error *struct {
				Code int64 `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("stdout line %q: %v", l, err)
		}
		code := int64(0)
		if m.Error != nil {
			code = m.Error.Code
		}
		id := string(m.ID)
		if id == "" {
			id = "null"
		}
		got[id] = append(got[id], code)
	}
	want := map[string][]int64{
		"1": {0}, "10": {-32600}, "11": {-32600}, "12": {-32600}, "14": {-32602}, "15": {0},
		"9007199254740992": {0},
		// The key given twice, the four ids no float64 holds, the long batch.
		"null": {-32600, -32600, -32600, -32600, -32600, -32600},
	}
	if mustJSON(t, got) != mustJSON(t, want) || batches != 1 {
		t.Fatalf("answers by id: %v, want %v; %d batches answered\n%s", got, want, batches, out.String())
	}
}

// TestRunStdioAnswersBatches: a 2025-03-26 batch that is the last line of
// input is run and answered before RunStdio returns, and one whose answers
// together pass the response bound is answered with an error for each of
// its calls, each saying that it ran.
func TestRunStdioAnswersBatches(t *testing.T) {
	pool := newPool(t, 0)
	const maxText = 1000
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease), MaxTextBytes: maxText,
		MaxResponseBytes: memgate.MinResponseBytes(maxText)})
	if err != nil {
		t.Fatal(err)
	}
	head := []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}
	run := func(lines ...string) []string {
		var out syncBuffer
		in := strings.Join(append(head, lines...), "\n") + "\n"
		if err := srv.RunStdio(t.Context(), strings.NewReader(in), &out); err != nil {
			t.Fatalf("RunStdio: %v", err)
		}
		return strings.Split(strings.TrimSpace(out.String()), "\n")
	}
	call := func(id, tool, args string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
	}
	lines := run("[" + call("1", "stats", "{}") + "," + call("2", "remember", `{"id":"w","text":"in a batch"}`) + "]")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "[") || !strings.Contains(lines[1], `"id":2`) {
		t.Fatalf("a batch at the end of input: %q", lines)
	}
	writes := make([]string, 0, 60)
	for i := range 60 {
		writes = append(writes, call(fmt.Sprint(10+i), "remember", fmt.Sprintf(`{"id":"c%d","text":"%s"}`, i, strings.Repeat(`\u0001`, maxText))))
	}
	run(writes...)
	lines = run("[" + call("3", "list", `{"limit":1000}`) + "," + call("4", "list", `{"limit":1000}`) + "]")
	last := lines[len(lines)-1]
	var answers []struct {
		ID    int `json:"id"`
		Error *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(last), &answers); err != nil || len(answers) != 2 ||
		int64(len(last)) > int64(memgate.MinResponseBytes(maxText)) {
		t.Fatalf("a batch past the bound: %v, %d bytes", err, len(last))
	}
	for _, a := range answers {
		if a.Error == nil || a.Error.Code != -32000 || !strings.Contains(a.Error.Message, "ran") {
			t.Fatalf("answer to call %d of a batch past the bound: %+v (%d bytes) %.300s", a.ID, a.Error, len(last), last)
		}
	}
}

// A call before initialize is refused with a JSON-RPC code a client can act
// on (the SDK's own answer has code 0) and a message that repeats nothing
// of the call, and the session goes on to serve the client once it does
// initialize. Every answer is counted, so stdin's end drains at once.
func TestRunStdioRefusesACallBeforeInitialize(t *testing.T) {
	pool := newPool(t, 0)
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease)})
	if err != nil {
		t.Fatal(err)
	}
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"secret-name","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"stats","arguments":{}}}`,
	}, "\n") + "\n"
	out := runLines(t, srv, in)
	answers := map[string]json.RawMessage{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m struct {
			ID    any             `json:"id"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("stdout line %q: %v", l, err)
		}
		answers[mustJSON(t, m.ID)] = m.Error
	}
	for _, id := range []string{"1", "2"} {
		var e struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(answers[id], &e); err != nil || e.Code != -32600 {
			t.Fatalf("call %s before initialize: error %s, want code -32600", id, answers[id])
		}
		if strings.Contains(e.Message, "tools/") || strings.Contains(e.Message, "secret-name") {
			t.Fatalf("call %s: the message repeats the call: %q", id, e.Message)
		}
	}
	if answers["3"] != nil || answers["4"] != nil {
		t.Fatalf("after initialize: errors %s, %s\n%s", answers["3"], answers["4"], out)
	}
}

// runLines runs srv over stdio on the lines of in and returns what it wrote.
// Every call read before stdin ended gets its answer at once: RunStdio
// recognises each answer going out, so it returns without waiting out its
// drain timeout.
func runLines(t *testing.T, srv *server.Server, in string) string {
	t.Helper()
	var out syncBuffer
	start := time.Now()
	if err := srv.RunStdio(t.Context(), strings.NewReader(in), &out); err != nil {
		t.Fatalf("RunStdio: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("RunStdio took %v to drain", d)
	}
	return out.String()
}

// TestRunStdioAnswersAsTheSDKEncodes: over stdio a tool's answer, which
// memgate encodes itself, is byte for byte the SDK's encoding of the same
// result (json.Marshal of it), for a success and for an error, with text
// that needs escapes, in every revision.
func TestRunStdioAnswersAsTheSDKEncodes(t *testing.T) {
	for _, revision := range []string{"2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"} {
		t.Run(revision, func(t *testing.T) {
			pool := newPool(t, 0)
			srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease)})
			if err != nil {
				t.Fatal(err)
			}
			if res, err := srv.Call(t.Context(), "remember", json.RawMessage(`{"id":"m1","text":"deploy <pipeline> & \"staging\"\n\u2028 é","tags":["x-y"],"metadata":{"k":"<v> &"}}`)); err != nil || res.IsError {
				t.Fatal(err, res.StructuredContent)
			}
			for i := range 30 {
				args := fmt.Sprintf(`{"text":"note %d on deploys <%d> & the \"staging\" pipeline %s","tags":["t%d"],"metadata":{"n":%d,"s":"v%d"}}`,
					i, i, strings.Repeat("é", i), i%3, i, i)
				if res, err := srv.Call(t.Context(), "remember", json.RawMessage(args)); err != nil || res.IsError {
					t.Fatal(err, res.StructuredContent)
				}
			}
			var out syncBuffer
			// Many calls in flight at once: each answer is written from a
			// buffer the next may use again.
			calls := []string{`{"query":"deploy staging","limit":10}`, `{"query":""}`}
			for i := range 40 {
				calls = append(calls, fmt.Sprintf(`{"query":"note %d deploys","limit":%d}`, i, 1+i%12))
			}
			in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + revision + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n" +
				`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
			for i, args := range calls {
				in += fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"search","arguments":%s}}`, i+2, args) + "\n"
			}
			if err := srv.RunStdio(t.Context(), strings.NewReader(in), &out); err != nil {
				t.Fatal(err)
			}
			byID := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				var m struct {
					ID json.RawMessage `json:"id"`
				}
				json.Unmarshal([]byte(line), &m)
				byID[string(m.ID)] = line
			}
			for i, args := range calls {
				res, err := srv.Call(t.Context(), "search", json.RawMessage(args))
				if err != nil {
					t.Fatal(err)
				}
				b, err := json.Marshal(res)
				if err != nil {
					t.Fatal(err)
				}
				want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":%s}`, i+2, b)
				got := byID[fmt.Sprint(i+2)]
				if i == 0 && !strings.Contains(got, `"hits":[{`) {
					t.Fatalf("the search found nothing: %s", got)
				}
				if revision >= "2026-07-28" {
					// The SDK's own encoding, with the resultType it sets.
					got = strings.Replace(got, `,"resultType":"complete"`, "", 1)
				}
				if got != want {
					t.Errorf("call %d:\n got %s\nwant %s", i, got, want)
				}
			}
		})
	}
}

// A call whose id is that of a call still in flight is refused with
// -32600 under that id, and a batch that repeats an id with -32600 alone;
// every other call is answered, the session goes on, and the end of input
// ends it without waiting for an answer that would never come.
func TestRunStdioRefusesAnIDInFlight(t *testing.T) {
	srv, err := server.New(server.Options{Lease: server.LeaseOf(newPool(t, 0).Lease)})
	if err != nil {
		t.Fatal(err)
	}
	call := func(id, tool, args string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
	}
	lines := []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}
	for range 20 {
		lines = append(lines, call("1", "remember", `{"text":"the same id"}`))
	}
	lines = append(lines, "["+call("5", "stats", "{}")+","+call("5", "stats", "{}")+"]", `{"jsonrpc":"2.0","id":6,"method":"ping"}`)
	var out syncBuffer
	if err := srv.RunStdio(t.Context(), strings.NewReader(strings.Join(lines, "\n")+"\n"), &out); err != nil {
		t.Fatal(err)
	}
	answers := strings.Split(strings.TrimSpace(out.String()), "\n")
	byID := map[string]int{}
	refused := 0
	for _, a := range answers {
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(a), &m); err != nil {
			t.Fatalf("answer %q: %v", a, err)
		}
		byID[string(m.ID)]++
		if m.Error != nil {
			if m.Error.Code != -32600 {
				t.Errorf("refused with %d: %s", m.Error.Code, a)
			}
			refused++
		}
	}
	if byID["1"] != 20 || byID[""] != 1 || byID["6"] != 1 || byID["5"] != 0 {
		t.Fatalf("answers by id %v:\n%s", byID, strings.Join(answers, "\n"))
	}
	if refused < 1 {
		t.Errorf("the batch repeating an id was not refused")
	}
}

// initialize is never part of a batch: a batch holding it is refused whole
// with -32600, and the session goes on; a second initialize is refused
// with -32600 too.
func TestRunStdioRefusesInitializeInABatch(t *testing.T) {
	srv, err := server.New(server.Options{Lease: server.LeaseOf(newPool(t, 0).Lease)})
	if err != nil {
		t.Fatal(err)
	}
	initialize := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`, id)
	}
	lines := []string{
		"[" + initialize(0) + "]",
		initialize(1),
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		"[" + initialize(2) + `,{"jsonrpc":"2.0","id":3,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":4,"method":"ping"}`,
		initialize(5),
	}
	var out syncBuffer
	if err := srv.RunStdio(t.Context(), strings.NewReader(strings.Join(lines, "\n")+"\n"), &out); err != nil {
		t.Fatal(err)
	}
	answers := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(answers) != 5 {
		t.Fatalf("answers:\n%s", strings.Join(answers, "\n"))
	}
	// The refusals come from the reader, the answers from the session: in
	// either order.
	all := strings.Join(answers, "\n")
	if !strings.Contains(all, `"id":5,"error":{"code":-32600,"message":"invalid request: the session is initialized already"}`) {
		t.Errorf("a second initialize:\n%s", all)
	}
	if strings.Count(all, "initialize cannot be part of a batch") != 2 ||
		!strings.Contains(all, `"id":1,"result"`) || !strings.Contains(all, `"id":4,"result"`) {
		t.Errorf("answers:\n%s", all)
	}
}

// stuckWriter is a client that stops reading: once a pipe's worth of
// answers is written, every write waits until release is closed, then
// fails.
type stuckWriter struct {
	release chan struct{}
	room    *atomic.Int64
}

func (w stuckWriter) Write(p []byte) (int, error) {
	if w.room.Add(-int64(len(p))) >= 0 {
		return len(p), nil
	}
	<-w.release
	return 0, io.ErrClosedPipe
}

// A client that stops reading its answers stops being read once a batch's
// worth of calls waits to be answered, whether it sends calls alone or in
// batches (a batch's calls stay in flight until its array is written):
// the calls in flight, each holding its answer, stay bounded, where
// reading on made the process grow without bound.
func TestRunStdioStopsReadingAClientThatDoesNotRead(t *testing.T) {
	for _, batch := range []int{1, 2, 8, 32} {
		t.Run(fmt.Sprint("batches of ", batch), func(t *testing.T) { stopsReadingAClientThatDoesNotRead(t, batch) })
	}
}

// stopsReadingAClientThatDoesNotRead sends calls alone (batch 1) or in
// batches of the 2025-03-26 revision, and reads no answer.
func stopsReadingAClientThatDoesNotRead(t *testing.T, batch int) {
	srv, err := server.New(server.Options{Lease: server.LeaseOf(newPool(t, 0).Lease)})
	if err != nil {
		t.Fatal(err)
	}
	in, feed := io.Pipe()
	out := stuckWriter{release: make(chan struct{}), room: new(atomic.Int64)}
	out.room.Store(8 << 10)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.RunStdio(ctx, in, out) }()
	var written atomic.Int64
	go func() {
		fmt.Fprintln(feed, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
		fmt.Fprintln(feed, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		for i := 0; i < 500; i += batch {
			calls := make([]string, batch)
			for j := range calls {
				calls[j] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"stats","arguments":{}}}`, i+j+1)
			}
			line := calls[0]
			if batch > 1 {
				line = "[" + strings.Join(calls, ",") + "]"
			}
			if _, err := fmt.Fprintln(feed, line); err != nil {
				return
			}
			written.Add(int64(batch))
		}
	}()
	// Wait for the reading to stop: no line taken for a while.
	for last, still := int64(-1), 0; still < 10; {
		time.Sleep(50 * time.Millisecond)
		if n := written.Load(); n == last {
			still++
		} else {
			last, still = n, 0
		}
	}
	if n := written.Load(); n > 16+32+int64(batch) { // a few answers written, then the bound
		t.Errorf("%d calls read from a client that reads no answer", n)
	}
	cancel()
	close(out.release)
	feed.Close()
	<-done
}

// A line of at most 16 MiB is read as a message; one byte more is answered
// with -32600 (its id unread) and dropped, and the session goes on.
func TestRunStdioLineLengthAtTheBound(t *testing.T) {
	const max = 16 << 20
	line := func(n int) string {
		head, tail := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"remember","arguments":{"text":"`, `"}}}`
		return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	}
	// A line ending in "\r\n" is as long as without the "\r".
	answers := stdioAnswers(t, line(max), strings.Replace(line(max+1), `"id":1`, `"id":2`, 1), `{"jsonrpc":"2.0","id":3,"method":"ping"}`,
		strings.Replace(line(max), `"id":1`, `"id":4`, 1)+"\r")
	all := strings.Join(answers, "\n")
	if !strings.Contains(all, `"id":4,`) {
		t.Errorf("a line of 16 MiB and \\r\\n was refused")
	}
	if len(answers) != 5 || !strings.Contains(all, `"id":1,`) || strings.Contains(all, `"id":2`) ||
		!strings.Contains(all, `{"jsonrpc":"2.0","error":{"code":-32600,"message":"invalid request: a line of more than 16 MiB"}}`) ||
		!strings.Contains(all, `{"jsonrpc":"2.0","id":3,"result":{}}`) {
		t.Fatalf("answers: %.2000s", all)
	}
}

// A batch in a session of a revision without batches is refused with
// -32600, however soon after initialize it comes, and the session goes
// on: the call before it is answered and kept.
func TestRunStdioRefusesABatchOfALaterRevision(t *testing.T) {
	srv, err := server.New(server.Options{Lease: server.LeaseOf(newPool(t, 0).Lease)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		lines := []string{
			`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"remember","arguments":{"text":"before the batch %d"}}}`, i),
			`[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"stats","arguments":{}}}]`,
			`{"jsonrpc":"2.0","id":3,"method":"ping"}`,
		}
		var out syncBuffer
		if err := srv.RunStdio(t.Context(), strings.NewReader(strings.Join(lines, "\n")+"\n"), &out); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		all := out.String()
		if !strings.Contains(all, `"id":1,"result"`) || !strings.Contains(all, `"id":3,"result"`) || strings.Contains(all, `"id":2`) ||
			!strings.Contains(all, `{"jsonrpc":"2.0","error":{"code":-32600,"message":"invalid request: batches are not part of protocol revisions 2025-06-18 and later"}}`) {
			t.Fatalf("run %d:\n%s", i, all)
		}
	}
}
