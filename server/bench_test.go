package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/gateway"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/telemetry"
	"github.com/memgate/memgate/telemetry/otlptest"
	"github.com/memgate/memgate/tenants"
)

func benchServer(b *testing.B) *server.Server { return benchServerWith(b, telemetry.Providers{}) }

// benchServerWith is benchServer reporting through p.
func benchServerWith(b *testing.B, p telemetry.Providers) *server.Server {
	var meter metric.Meter
	if p.Meter != nil {
		meter = p.Meter.Meter(telemetry.ScopeTenants)
	}
	pool, err := tenants.NewPool(tenants.Options{Dir: b.TempDir(), Store: storage.Options{NoSync: true},
		Tracer: p.Tracer, Meter: meter})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pool.Close(b.Context()) })
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease), Telemetry: p})
	if err != nil {
		b.Fatal(err)
	}
	return srv
}

// benchExported is the OpenTelemetry SDK as serve installs it with an OTLP
// endpoint: spans through a batch processor and metrics through a periodic
// reader, exported over OTLP/HTTP to a receiver on 127.0.0.1 in the same
// process, which decodes them.
func benchExported(b *testing.B) telemetry.Providers {
	rcv, err := otlptest.Start()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	texp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(rcv.Endpoint()), otlptracehttp.WithInsecure())
	if err != nil {
		b.Fatal(err)
	}
	mexp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpoint(rcv.Endpoint()), otlpmetrichttp.WithInsecure())
	if err != nil {
		b.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(texp))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(time.Second))))
	b.Cleanup(func() {
		tp.Shutdown(ctx)
		mp.Shutdown(ctx)
		if len(rcv.Spans()) == 0 {
			b.Error("no span reached the receiver")
		}
		rcv.Close()
	})
	return telemetry.Providers{Tracer: tp, Meter: mp}
}

// BenchmarkCallRemember is the server's own share of a write: decoding,
// validation, the secret check, the lease, and encoding the result (the
// store runs without fsync).
func BenchmarkCallRemember(b *testing.B) {
	srv := benchServer(b)
	args := json.RawMessage(`{"text":"The deploy pipeline runs on Tuesdays; staging first, then production after review.",` +
		`"title":"Deploys","tags":["process","deploy"],"metadata":{"team":"platform"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if res, err := srv.Call(b.Context(), "remember", args); err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

func BenchmarkCallSearch(b *testing.B) {
	srv := benchServer(b)
	for i := range 1000 {
		args := fmt.Sprintf(`{"text":"note %d about deploys, reviews and the staging pipeline"}`, i)
		if _, err := srv.Call(b.Context(), "remember", json.RawMessage(args)); err != nil {
			b.Fatal(err)
		}
	}
	args := json.RawMessage(`{"query":"staging deploys","limit":10}`)
	b.ReportAllocs()
	for b.Loop() {
		if res, err := srv.Call(b.Context(), "search", args); err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

// BenchmarkToolsCallInMemory is one search through the SDK, client to
// server and back, over the in-memory transport.
func BenchmarkToolsCallInMemory(b *testing.B) {
	srv := benchServer(b)
	srv.Call(b.Context(), "remember", json.RawMessage(`{"text":"staging deploys happen on Tuesdays"}`))
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(b.Context(), st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(b.Context(), ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "search", Arguments: json.RawMessage(`{"query":"staging deploys"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if res, err := cs.CallTool(b.Context(), params); err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

// addNoop adds a tool that does nothing and answers {}: the trivial tool
// behind the same gateway, for a ceiling.
func addNoop(m *mcp.Server) {
	m.AddTool(&mcp.Tool{Name: "noop", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: json.RawMessage(`{}`), Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}}, nil
		})
}

// BenchmarkGateway is one tools/call through the HTTP gateway, from a raw
// HTTP client in the same process over loopback: the gateway's middleware,
// the SDK's streamable handler and a session, and the tool. The -otel
// cases export every span and metric of each call (benchExported), the
// others report through nothing, as serve does with no OTEL_* variable.
func BenchmarkGateway(b *testing.B) {
	for _, c := range []struct {
		name, tool, args string
		otel             bool
	}{
		{"noop", "noop", `{}`, false},
		{"noop-ratelimit", "noop", `{}`, false},
		{"stats", "stats", `{}`, false},
		{"search10", "search", `{"query":"staging deploys","limit":10}`, false},
		{"search1", "search", `{"query":"staging deploys","limit":1}`, false},
		{"remember", "remember", `{"text":"The deploy pipeline runs on Tuesdays; staging first, then production after review.","tags":["process","deploy"]}`, false},
		{"noop-otel", "noop", `{}`, true},
		{"search10-otel", "search", `{"query":"staging deploys","limit":10}`, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			var tel telemetry.Providers
			if c.otel {
				tel = benchExported(b)
			}
			srv := benchServerWith(b, tel)
			for i := range 200 {
				args := fmt.Sprintf(`{"text":"note %d about deploys, reviews and the staging pipeline, with a few more words to make it the size of a real memory"}`, i)
				if _, err := srv.Call(b.Context(), "remember", json.RawMessage(args)); err != nil {
					b.Fatal(err)
				}
			}
			opts := gateway.Options{Telemetry: tel}
			if c.name == "noop-ratelimit" {
				opts.RateLimit = 1e9 // every call takes a token, none waits
			}
			gw, err := gateway.New(func() *mcp.Server { m := srv.NewMCP(); addNoop(m); return m }, opts)
			if err != nil {
				b.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			ctx, stop := context.WithCancel(b.Context())
			done := make(chan error, 1)
			go func() { done <- gw.Serve(ctx, ln) }()
			defer func() { stop(); <-done }()
			url := "http://" + ln.Addr().String() + "/mcp"
			post := func(session, body string) (*http.Response, []byte) {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
				if session != "" {
					req.Header.Set("Mcp-Session-Id", session)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				body2, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return resp, body2
			}
			resp, _ := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
			session := resp.Header.Get("Mcp-Session-Id")
			post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			call := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, c.tool, c.args)
			b.ReportAllocs()
			cpu, n := cpuTime(), 0
			for b.Loop() {
				if resp, body := post(session, call); resp.StatusCode != 200 || bytes.Contains(body, []byte(`"isError":true`)) {
					b.Fatalf("%s: %s", resp.Status, body)
				}
				n++
			}
			// The process's CPU per call, client, exporter and receiver
			// included: steadier than the time per call on a shared machine.
			b.ReportMetric(float64(cpuTime()-cpu)/float64(n), "cpu-ns/op")
		})
	}
}

// BenchmarkStdio is one call over stdio through RunStdio, sequential, the
// client in the same process on pipes: the line reading, the SDK's session
// and the tool, and the answer written back. remember runs against a store
// without fsync, so its figure is the CPU a durable write adds to its
// commit.
func BenchmarkStdio(b *testing.B) {
	for _, c := range []struct{ name, tool, args string }{
		{"noop", "noop", `{}`},
		{"stats", "stats", `{}`},
		{"search10", "search", `{"query":"staging deploys","limit":10}`},
		{"remember", "remember", `{"text":"The deploy pipeline runs on Tuesdays; staging first, then production after review.","tags":["process","deploy"]}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv := benchServer(b)
			addNoop(srv.MCP())
			for i := range 200 {
				args := fmt.Sprintf(`{"text":"note %d about deploys, reviews and the staging pipeline, with a few more words to make it the size of a real memory"}`, i)
				if _, err := srv.Call(b.Context(), "remember", json.RawMessage(args)); err != nil {
					b.Fatal(err)
				}
			}
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			done := make(chan error, 1)
			go func() { done <- srv.RunStdio(b.Context(), inR, outW); outW.Close() }()
			answers := bufio.NewReaderSize(outR, 64<<10)
			call := func(line string) []byte {
				if _, err := io.WriteString(inW, line+"\n"); err != nil {
					b.Fatal(err)
				}
				ans, err := answers.ReadBytes('\n')
				if err != nil {
					b.Fatal(err)
				}
				return ans
			}
			call(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
			io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
			line := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, c.tool, c.args)
			b.ReportAllocs()
			cpu, n := cpuTime(), 0
			for b.Loop() {
				if ans := call(line); bytes.Contains(ans, []byte(`"isError":true`)) || !bytes.Contains(ans, []byte(`"result"`)) {
					b.Fatalf("%s", ans)
				}
				n++
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(n), "cpu-ns/op")
			inW.Close()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkGatewayFloor is the floor BenchmarkGateway's noop is judged
// against: the same client and request over loopback to a plain net/http
// handler that decodes the JSON-RPC call with encoding/json and answers the
// noop tool's result, encoded with encoding/json. No MCP, no session.
func BenchmarkGatewayFloor(b *testing.B) {
	type call struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	type content struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type result struct {
		Content           []content       `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	type answer struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  result          `json:"result"`
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c call
		if err := json.NewDecoder(r.Body).Decode(&c); err != nil || c.Method != "tools/call" {
			http.Error(w, "bad call", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(answer{"2.0", c.ID, result{[]content{{"text", "{}"}}, json.RawMessage(`{}`)}})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: handler}
	go hs.Serve(ln)
	defer hs.Close()
	url := "http://" + ln.Addr().String() + "/mcp"
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"noop","arguments":{}}}`
	b.ReportAllocs()
	cpu, n := cpuTime(), 0
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Mcp-Session-Id", "floor")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(got, []byte(`"structuredContent"`)) {
			b.Fatalf("%s: %s", resp.Status, got)
		}
		n++
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(n), "cpu-ns/op")
}
