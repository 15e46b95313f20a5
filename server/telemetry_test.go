package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/gateway"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/telemetry"
	"github.com/memgate/memgate/telemetry/otlptest"
	"github.com/memgate/memgate/tenants"
)

// exported is the OpenTelemetry SDK as cmd/memgate installs it, exporting
// over OTLP/HTTP to a receiver on 127.0.0.1 that decodes what it gets.
type exported struct {
	rcv *otlptest.Receiver
	tp  *sdktrace.TracerProvider
	mp  *sdkmetric.MeterProvider
}

func newExported(t *testing.T) *exported {
	t.Helper()
	rcv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rcv.Close() })
	ctx := context.Background()
	texp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(rcv.Endpoint()), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	mexp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpoint(rcv.Endpoint()), otlpmetrichttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	e := &exported{rcv: rcv, tp: sdktrace.NewTracerProvider(sdktrace.WithBatcher(texp)),
		mp: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(time.Hour))))}
	t.Cleanup(func() {
		e.tp.Shutdown(context.Background())
		e.mp.Shutdown(context.Background())
	})
	return e
}

func (e *exported) providers() telemetry.Providers {
	return telemetry.Providers{Tracer: e.tp, Meter: e.mp, StoreKey: []byte("a key of the test, 32 bytes long")}
}

// pool opens a pool that reports through e.
func (e *exported) pool(t *testing.T) *tenants.Pool {
	t.Helper()
	pool, err := tenants.NewPool(tenants.Options{Dir: t.TempDir(), Store: storage.Options{NoSync: true},
		Tracer: e.tp, Meter: e.mp.Meter(telemetry.ScopeTenants)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close(context.Background()) })
	return pool
}

// flush exports what is pending and waits until the receiver holds the
// spans named names (each at least as often as it is named).
func (e *exported) flush(t *testing.T, names ...string) ([]otlptest.Span, []otlptest.Metric) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := e.tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.mp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	err := e.rcv.Wait(ctx, func(spans []otlptest.Span, _ []otlptest.Metric) bool {
		want := map[string]int{}
		for _, n := range names {
			want[n]++
		}
		for _, s := range spans {
			want[s.Name]--
		}
		for _, n := range want {
			if n > 0 {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rcv.Err(); err != nil {
		t.Fatal(err)
	}
	return e.rcv.Spans(), e.rcv.Metrics()
}

// A caller's trace context, as W3C traceparent writes it.
type caller struct{ trace, span string }

func (c caller) traceparent() string { return "00-" + c.trace + "-" + c.span + "-01" }

var (
	agentHTTP = caller{"4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"}
	agentMeta = caller{"0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"}
	agentPipe = caller{"5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"}
)

// spanTree indexes spans by id.
type spanTree map[string]otlptest.Span

func tree(spans []otlptest.Span) spanTree {
	t := spanTree{}
	for _, s := range spans {
		t[s.SpanID()] = s
	}
	return t
}

// children returns the spans whose parent is p, by name.
func (tr spanTree) children(p otlptest.Span) map[string]otlptest.Span {
	out := map[string]otlptest.Span{}
	for _, s := range tr {
		if s.ParentID() == p.SpanID() && s.TraceID() == p.TraceID() {
			out[s.Name] = s
		}
	}
	return out
}

// wantAttrs checks attributes of s: each key of want with its value, or,
// for a value of "-", absent.
func wantAttrs(t *testing.T, s otlptest.Span, want map[string]string) {
	t.Helper()
	for k, v := range want {
		got, ok := s.Attr(k)
		switch {
		case v == "-" && ok:
			t.Errorf("%s: %s = %q, want none", s.Name, k, got)
		case v != "-" && got != v:
			t.Errorf("%s: %s = %q (present %v), want %q", s.Name, k, got, ok, v)
		}
	}
}

// mcpSpan finds the MCP server span of the call with JSON-RPC id id.
func mcpSpan(t *testing.T, spans []otlptest.Span, name, id string) otlptest.Span {
	t.Helper()
	for _, s := range spans {
		if got, _ := s.Attr("jsonrpc.request.id"); s.Name == name && got == id {
			return s
		}
	}
	t.Fatalf("no span %q of request %s among %d spans", name, id, len(spans))
	return otlptest.Span{}
}

var hex32 = regexp.MustCompile(`^[0-9a-f]{32}$`)

// One tools/call over HTTP is one trace from the caller's span: the HTTP
// request's span, its MCP call, the lease of the store and the store
// operation. A parent in params._meta takes the place of the header's for
// the MCP call, which then links to the HTTP span.
func TestTelemetryOfACallOverHTTP(t *testing.T) {
	e := newExported(t)
	pool := e.pool(t)
	var logs syncBuffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	g := startGatewayOn(t, pool, gateway.Options{Telemetry: e.providers()},
		server.Options{Telemetry: e.providers(), Logger: log})
	const version = "2025-11-25"
	session := g.initialize(version, nil)
	if _, status := g.call(session, version, "remember", `{"text":"staging deploys happen on Tuesdays"}`, nil); status != 200 {
		t.Fatal(status)
	}

	post := func(body string, header map[string]string) {
		t.Helper()
		resp := g.post(rpc{body: body, session: session, version: version, header: header})
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %s", resp.Status, b)
		}
	}
	post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"query":"staging deploys"}}}`,
		map[string]string{"traceparent": agentHTTP.traceparent()})
	post(`{"jsonrpc":"2.0","id":"call-8","method":"tools/call","params":{"name":"search","arguments":{"query":"deploys"},`+
		`"_meta":{"traceparent":"`+agentMeta.traceparent()+`"}}}`,
		map[string]string{"traceparent": agentHTTP.traceparent()})
	post(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"get","arguments":{"id":"nobody-wrote-this"}}}`, nil)
	post(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"no-such-tool","arguments":{}}}`, nil)

	spans, metrics := e.flush(t, "tools/call search", "tools/call search", "tools/call get", "tools/call", "search_memory")
	tr := tree(spans)

	// The header's parent.
	call := mcpSpan(t, spans, "tools/call search", "7")
	httpSpan, ok := tr[call.ParentID()]
	if !ok {
		t.Fatalf("the MCP span's parent %s was not exported", call.ParentID())
	}
	if httpSpan.Name != "POST /mcp" || httpSpan.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("the HTTP span is %q of kind %v, want POST /mcp, SERVER", httpSpan.Name, httpSpan.Kind)
	}
	if httpSpan.TraceID() != agentHTTP.trace || httpSpan.ParentID() != agentHTTP.span {
		t.Errorf("the HTTP span is in trace %s under %s, want the caller's %s under %s",
			httpSpan.TraceID(), httpSpan.ParentID(), agentHTTP.trace, agentHTTP.span)
	}
	wantAttrs(t, httpSpan, map[string]string{"http.route": "/mcp", "http.request.method": "POST", "http.response.status_code": "200"})
	if call.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("the MCP span's kind is %v, want SERVER", call.Kind)
	}
	wantAttrs(t, call, map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "search",
		"gen_ai.operation.name": "execute_tool", "mcp.protocol.version": version, "jsonrpc.request.id": "7",
		"network.transport": "tcp", "error.type": "-"})
	kids := tr.children(call)
	lease, ok := kids["memgate.lease"]
	if !ok {
		t.Fatalf("no lease span under the MCP span; its children: %v", keys(kids))
	}
	wantAttrs(t, lease, map[string]string{"memgate.lease.outcome": "hit"})
	op, ok := kids["search_memory"]
	if !ok {
		t.Fatalf("no search_memory span under the MCP span; its children: %v", keys(kids))
	}
	wantAttrs(t, op, map[string]string{"gen_ai.operation.name": "search_memory", "gen_ai.memory.record.count": "1",
		"memgate.store.operation": "search"})
	if op.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
		t.Errorf("the memory span's kind is %v, want INTERNAL", op.Kind)
	}
	if id, _ := op.Attr("gen_ai.memory.store.id"); !hex32.MatchString(id) {
		t.Errorf("gen_ai.memory.store.id = %q, want 32 hex digits (a keyed hash of the namespace)", id)
	}

	// The parent in params._meta.
	metaCall := mcpSpan(t, spans, "tools/call search", "call-8")
	if metaCall.TraceID() != agentMeta.trace || metaCall.ParentID() != agentMeta.span {
		t.Errorf("the MCP span of a call with _meta is in trace %s under %s, want %s under %s",
			metaCall.TraceID(), metaCall.ParentID(), agentMeta.trace, agentMeta.span)
	}
	if len(metaCall.Links) != 1 || fmt.Sprintf("%x", metaCall.Links[0].TraceId) != agentHTTP.trace {
		t.Errorf("the MCP span of a call with _meta links to %v, want its HTTP request's span in trace %s", metaCall.Links, agentHTTP.trace)
	} else if l := tr[fmt.Sprintf("%x", metaCall.Links[0].SpanId)]; l.Name != "POST /mcp" {
		t.Errorf("the link leads to %q, want the HTTP span", l.Name)
	}
	if _, ok := tr.children(metaCall)["search_memory"]; !ok {
		t.Error("no search_memory span under the MCP span of the call with _meta")
	}

	// A tool's error, and a tool that does not exist.
	failed := mcpSpan(t, spans, "tools/call get", "9")
	wantAttrs(t, failed, map[string]string{"error.type": "tool_error", "memgate.error.code": "not_found", "gen_ai.tool.name": "get"})
	if failed.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("a tool error's span has status %v, want ERROR", failed.GetStatus())
	}
	if get, ok := tr.children(failed)["search_memory"]; !ok {
		t.Error("no search_memory span under the failed get")
	} else {
		wantAttrs(t, get, map[string]string{"error.type": "not_found", "memgate.store.operation": "get"})
	}
	unknown := mcpSpan(t, spans, "tools/call", "10")
	wantAttrs(t, unknown, map[string]string{"error.type": "-32602", "rpc.response.status_code": "-32602", "gen_ai.tool.name": "-"})

	// The metrics of the same calls.
	points := metricPoints(metrics)
	for _, want := range []struct {
		metric string
		attrs  map[string]string
	}{
		{telemetry.MetricMCPOperationDuration, map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "search", "network.transport": "tcp"}},
		{telemetry.MetricMCPOperationDuration, map[string]string{"gen_ai.tool.name": "get", "error.type": "tool_error"}},
		{telemetry.MetricMCPOperationDuration, map[string]string{"mcp.method.name": "tools/call", "error.type": "-32602"}},
		{telemetry.MetricMemoryOperationDuration, map[string]string{"gen_ai.operation.name": "search_memory", "memgate.store.operation": "search"}},
		{telemetry.MetricMemoryOperationDuration, map[string]string{"gen_ai.operation.name": "upsert_memory", "memgate.store.operation": "put"}},
		{telemetry.MetricMemoryRecallResults, nil},
		{telemetry.MetricMemoryItems, map[string]string{"memgate.store.operation": "put"}},
		{telemetry.MetricMemoryBytes, map[string]string{"memgate.store.operation": "put"}},
		{telemetry.MetricLeaseDuration, map[string]string{"memgate.lease.outcome": "open"}},
		{telemetry.MetricLeaseDuration, map[string]string{"memgate.lease.outcome": "hit"}},
		{"http.server.request.duration", map[string]string{"http.route": "/mcp"}},
	} {
		if !slices.ContainsFunc(points[want.metric], func(attrs map[string]string) bool { return subset(want.attrs, attrs) }) {
			t.Errorf("%s has no point with %v; its points: %v", want.metric, want.attrs, points[want.metric])
		}
	}

	// The log line of a call names its span.
	var line struct {
		Name    string `json:"name"`
		TraceID string `json:"trace_id"`
		SpanID  string `json:"span_id"`
	}
	found := false
	for _, l := range strings.Split(logs.String(), "\n") {
		if json.Unmarshal([]byte(l), &line) == nil && line.Name == "search" && line.TraceID == agentHTTP.trace {
			found = line.SpanID == call.SpanID()
		}
	}
	if !found {
		t.Errorf("no log line of the search carries trace_id %s and span_id %s:\n%s", agentHTTP.trace, call.SpanID(), logs.String())
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// metricPoints lists, by metric name, the attributes of each data point.
func metricPoints(metrics []otlptest.Metric) map[string][]map[string]string {
	out := map[string][]map[string]string{}
	for _, m := range metrics {
		for _, kvs := range m.PointAttributes() {
			attrs := map[string]string{}
			for _, kv := range kvs {
				attrs[kv.Key] = otlptest.Text(kv.Value)
			}
			out[m.Name] = append(out[m.Name], attrs)
		}
	}
	return out
}

func subset(want, got map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// Over stdio, a call joins the trace named in its params._meta, and its
// span says so: pipe, and the call's JSON-RPC id.
func TestTelemetryOfACallOverStdio(t *testing.T) {
	e := newExported(t)
	pool := e.pool(t)
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease), LeaseRead: server.LeaseOf(pool.LeaseRead),
		Telemetry: e.providers()})
	if err != nil {
		t.Fatal(err)
	}
	// Two sessions, one after the other: the calls of one session run
	// concurrently, and the search must find what the remember wrote.
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
`
	out := runLines(t, srv, initialize+`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"remember","arguments":{"text":"staging deploys happen on Tuesdays"}}}
`)
	out += runLines(t, srv, initialize+`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"search","arguments":{"query":"staging"},"_meta":{"traceparent":"`+agentPipe.traceparent()+`","tracestate":"vendor=1"}}}
`)
	if strings.Contains(out, `"isError"`) || strings.Count(out, "\n") != 4 {
		t.Fatalf("answers:\n%s", out)
	}
	spans, _ := e.flush(t, "tools/call search", "search_memory", "tools/call remember", "upsert_memory")
	call := mcpSpan(t, spans, "tools/call search", "5")
	if call.TraceID() != agentPipe.trace || call.ParentID() != agentPipe.span {
		t.Errorf("the MCP span is in trace %s under %s, want the caller's %s under %s",
			call.TraceID(), call.ParentID(), agentPipe.trace, agentPipe.span)
	}
	if call.TraceState != "vendor=1" {
		t.Errorf("tracestate %q, want the caller's vendor=1", call.TraceState)
	}
	wantAttrs(t, call, map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "search",
		"mcp.protocol.version": "2025-11-25", "jsonrpc.request.id": "5", "network.transport": "pipe"})
	kids := tree(spans).children(call)
	if _, ok := kids["memgate.lease"]; !ok {
		t.Errorf("no lease span under the MCP span; its children: %v", keys(kids))
	}
	if op, ok := kids["search_memory"]; !ok {
		t.Errorf("no search_memory span under the MCP span; its children: %v", keys(kids))
	} else {
		wantAttrs(t, op, map[string]string{"gen_ai.memory.record.count": "1"})
	}
	remember := mcpSpan(t, spans, "tools/call remember", "2")
	if len(remember.ParentSpanId) != 0 {
		t.Errorf("a call without a parent has parent %s", remember.ParentID())
	}
	if op, ok := tree(spans).children(remember)["upsert_memory"]; !ok {
		t.Error("no upsert_memory span under the remember")
	} else {
		wantAttrs(t, op, map[string]string{"gen_ai.memory.record.count": "1", "gen_ai.operation.name": "upsert_memory"})
	}
}

// No span or metric holds a memory's text, title, tags, metadata or id, a
// query, a namespace, a subject or a token, whatever the call and however
// it fails: every string of everything exported is scanned.
func TestTelemetryHoldsNoContent(t *testing.T) {
	e := newExported(t)
	pool := e.pool(t)
	secrets := map[string]string{
		"text": "Zanzibarquux pelicanish snorfle", "title": "Titlewordxyzzy", "tag": "tagplughplugh",
		"metadata": "metavaluefrobnitz", "id": "memidgrault42", "query": "pelicanish zanzibarquux",
		"namespace": "nssecretwaldo", "subject": "subjectfredbar", "token": "tokenthud0123456789",
		"prompt topic": "topicgarplyfoo",
	}
	auth := staticAuth{secrets["token"]: &memgate.Principal{Subject: secrets["subject"],
		Scopes: []string{"memory:read", "memory:write"}}}
	var logs syncBuffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	resolver := &tenants.Resolver{Strategy: tenants.Fixed, AllowArg: true}
	g := startGatewayOn(t, pool, gateway.Options{Telemetry: e.providers(), Auth: auth, Logger: log},
		server.Options{Telemetry: e.providers(), Logger: log, NamespaceArg: true, Resolve: resolver.Resolve})
	header := map[string]string{"Authorization": "Bearer " + secrets["token"], "traceparent": agentHTTP.traceparent()}
	const version = "2025-11-25"
	session := g.initialize(version, header)
	ns := fmt.Sprintf(`"namespace":%q`, secrets["namespace"])
	calls := []struct{ tool, args string }{
		{"remember", fmt.Sprintf(`{"text":%q,"title":%q,"tags":[%q],"metadata":{"k":%q},"id":%q,%s}`,
			secrets["text"], secrets["title"], secrets["tag"], secrets["metadata"], secrets["id"], ns)},
		{"remember", fmt.Sprintf(`{"text":%q,"id":%q,"if_version":1,%s}`, secrets["text"], secrets["id"], ns)}, // a conflict
		{"get", fmt.Sprintf(`{"id":%q,%s}`, secrets["id"], ns)},
		{"get", fmt.Sprintf(`{"id":%q,%s}`, secrets["id"]+"x", ns)},
		{"search", fmt.Sprintf(`{"query":%q,"tags":[%q],"filter":{"k":%q},%s}`, secrets["query"], secrets["tag"], secrets["metadata"], ns)},
		{"list", fmt.Sprintf(`{"tags":[%q],%s}`, secrets["tag"], ns)},
		{"stats", fmt.Sprintf(`{%s}`, ns)},
		{"export", fmt.Sprintf(`{%s}`, ns)},
		{"forget", fmt.Sprintf(`{"id":%q,%s}`, secrets["id"], ns)},
		{"forget", fmt.Sprintf(`{"id":%q,%s}`, secrets["id"], ns)},
		{"remember", fmt.Sprintf(`{"text":%q,"bogus":%q}`, secrets["text"], secrets["title"])}, // invalid
		{secrets["title"], `{}`}, // a tool named by a secret
	}
	for i, c := range calls {
		resp := g.post(rpc{session: session, version: version, header: header,
			body: fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, fmt.Sprint(100+i), c.tool, c.args)})
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", c.tool, resp.Status)
		}
	}
	// A path of the caller's, which the HTTP span must not repeat.
	if resp, err := http.Get(g.base + "/" + secrets["namespace"] + "/" + secrets["id"]); err == nil {
		resp.Body.Close()
	}
	// A resource read and a prompt, which carry an id and a topic too.
	for i, body := range []string{
		fmt.Sprintf(`"method":"resources/read","params":{"uri":"memgate://namespace/%s/memory/%s"}`, secrets["namespace"], secrets["id"]),
		fmt.Sprintf(`"method":"prompts/get","params":{"name":"recall-context","arguments":{"topic":%q}}`, secrets["prompt topic"]),
		fmt.Sprintf(`"method":"prompts/get","params":{"name":%q}`, secrets["title"]),
	} {
		resp := g.post(rpc{session: session, version: version, header: header,
			body: fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,%s}`, 200+i, body)})
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	spans, metrics := e.flush(t, "tools/call remember", "tools/call search", "tools/call forget", "prompts/get recall-context", "GET")
	if len(spans) < 20 {
		t.Fatalf("%d spans exported, want those of every call", len(spans))
	}
	scanned := 0
	check := func(where string, strs []string) {
		for _, s := range strs {
			scanned++
			low := strings.ToLower(s)
			for what, secret := range secrets {
				for _, word := range strings.Fields(strings.ToLower(secret)) {
					if strings.Contains(low, word) {
						t.Errorf("%s holds the %s (%q in %q)", where, what, word, s)
					}
				}
			}
		}
	}
	for _, s := range spans {
		check("span "+s.Name, s.Strings())
	}
	for _, m := range metrics {
		check("metric "+m.Name, m.Strings())
		for _, kvs := range m.PointAttributes() {
			for _, kv := range kvs {
				if slices.Contains([]string{"namespace", "memgate.namespace", "enduser.id", "user.id", "gen_ai.memory.store.id",
					"mcp.session.id", "jsonrpc.request.id", "client.address"}, kv.Key) {
					t.Errorf("metric %s is labelled with %s", m.Name, kv.Key)
				}
			}
		}
	}
	if scanned < 200 {
		t.Fatalf("scanned %d strings, fewer than the calls make", scanned)
	}
	t.Logf("%d spans and %d metric exports, %d strings scanned", len(spans), len(metrics), scanned)
}

// A 2026-07-28 request, which has no session, and each call of a
// 2025-03-26 batch get their own MCP span, under the HTTP request's span,
// with their own JSON-RPC ids.
func TestTelemetryOfStatelessRequestsAndBatches(t *testing.T) {
	e := newExported(t)
	g := startGatewayOn(t, e.pool(t), gateway.Options{Telemetry: e.providers()}, server.Options{Telemetry: e.providers()})
	header := map[string]string{"traceparent": agentHTTP.traceparent(), "Mcp-Method": "tools/call", "Mcp-Name": "stats"}
	resp := g.post(rpc{version: gateway.RevisionStateless, header: header,
		body: `{"jsonrpc":"2.0","id":"s-1","method":"tools/call","params":{"name":"stats","arguments":{},"_meta":{` +
			`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
			`"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}`})
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stateless stats: %s", resp.Status)
	}
	session := g.initialize("2025-03-26", nil)
	status, body := g.batch(session, []string{
		`{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"stats","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":"b-32","method":"tools/call","params":{"name":"list","arguments":{}}}`,
	})
	if status != http.StatusOK {
		t.Fatalf("batch: %d %s", status, body)
	}
	spans, _ := e.flush(t, "tools/call stats", "tools/call stats", "tools/call list")
	tr := tree(spans)
	stateless := mcpSpan(t, spans, "tools/call stats", "s-1")
	wantAttrs(t, stateless, map[string]string{"mcp.protocol.version": "2026-07-28", "network.transport": "tcp"})
	if p := tr[stateless.ParentID()]; p.Name != "POST /mcp" || p.ParentID() != agentHTTP.span {
		t.Errorf("the stateless call's parent is %q under %s, want POST /mcp under the caller's %s", p.Name, p.ParentID(), agentHTTP.span)
	}
	if _, ok := tr.children(stateless)["memgate.lease"]; !ok {
		t.Error("no lease span under the stateless call")
	}
	first, second := mcpSpan(t, spans, "tools/call stats", "31"), mcpSpan(t, spans, "tools/call list", "b-32")
	wantAttrs(t, first, map[string]string{"mcp.protocol.version": "2025-03-26"})
	if first.ParentID() != second.ParentID() || tr[first.ParentID()].Name != "POST /mcp" {
		t.Errorf("the batch's calls are under %q and %q, want both under its one HTTP span",
			tr[first.ParentID()].Name, tr[second.ParentID()].Name)
	}
}
