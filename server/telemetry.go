package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/telemetry"
)

// The server reports through the OpenTelemetry API only (package
// telemetry names what it reports; docs/OBSERVABILITY.md lists it):
//
//   - a SERVER span per MCP request, "{mcp.method.name} {target}", the
//     child of the trace context in the request's params._meta when it has
//     one (linked then to the HTTP request's span), else of the context's
//     span (the HTTP request's, which the gateway hands to the call);
//   - an INTERNAL span per store operation, "{gen_ai.operation.name}"
//     (search_memory, upsert_memory, ...), under the request's span;
//   - mcp.server.operation.duration and the memory metrics.
//
// With no tracer provider and no meter provider installed, a request costs
// one Enabled check and nothing else; a store is not even wrapped.

// RequestIDHeader carries a request's JSON-RPC id, as text, from the
// transport to the span of the request (jsonrpc.request.id): the SDK keeps
// the id to itself. The gateway sets it on the HTTP request of each message
// and drops a client's; RunStdio sets it on each call it reads.
const RequestIDHeader = "Memgate-Jsonrpc-Id"

// maxRequestIDLen bounds the jsonrpc.request.id recorded.
const maxRequestIDLen = 128

// observer holds the instruments of a Server.
type observer struct {
	tracer trace.Tracer // nil: no spans
	prop   propagation.TextMapPropagator
	ids    *telemetry.StoreIDs

	operation metric.Float64Histogram // mcp.server.operation.duration
	memDur    metric.Float64Histogram // memory.operation.duration
	recall    metric.Int64Histogram   // memory.recall.results
	items     metric.Int64Counter     // memory.items
	bytes     metric.Int64Counter     // memory.bytes
	dedup     metric.Int64Counter     // memgate.memory.deduplicated
}

// durationBuckets are the bounds of the duration histograms, in seconds:
// from 100 µs (a search of a small store) to 10 s.
var durationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

func newObserver(p telemetry.Providers) (*observer, error) {
	o := &observer{prop: p.TextMapPropagator(), ids: telemetry.NewStoreIDs(p.StoreKey)}
	if p.Tracer != nil {
		o.tracer = p.Tracer.Tracer(telemetry.ScopeServer)
	}
	m := p.MeterProvider().Meter(telemetry.ScopeServer)
	var err error
	if o.operation, err = m.Float64Histogram(telemetry.MetricMCPOperationDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of MCP requests, by method, tool and outcome."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, err
	}
	if o.memDur, err = m.Float64Histogram(telemetry.MetricMemoryOperationDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of store operations, by operation and outcome."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, err
	}
	if o.recall, err = m.Int64Histogram(telemetry.MetricMemoryRecallResults, metric.WithUnit("{memory}"),
		metric.WithDescription("Memories a search found."),
		metric.WithExplicitBucketBoundaries(0, 1, 2, 5, 10, 20, 50, 100)); err != nil {
		return nil, err
	}
	if o.items, err = m.Int64Counter(telemetry.MetricMemoryItems, metric.WithUnit("{memory}"),
		metric.WithDescription("Memories written or deleted, by operation.")); err != nil {
		return nil, err
	}
	if o.bytes, err = m.Int64Counter(telemetry.MetricMemoryBytes, metric.WithUnit("By"),
		metric.WithDescription("Text bytes of the memories written.")); err != nil {
		return nil, err
	}
	if o.dedup, err = m.Int64Counter(telemetry.MetricMemoryDeduplicated, metric.WithUnit("{memory}"),
		metric.WithDescription("Remembers answered with an existing memory of the same text.")); err != nil {
		return nil, err
	}
	return o, nil
}

// transportKey marks the context of the requests RunStdio serves.
type transportKey struct{}

// observe is the outermost middleware of every SDK server of s: a span and
// a duration per request.
func (s *Server) observe(next mcp.MethodHandler) mcp.MethodHandler {
	o := s.obs
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		metered := o.operation.Enabled(ctx)
		if o.tracer == nil && !metered {
			return next(ctx, method, req)
		}
		start := time.Now()
		attrs := make([]attribute.KeyValue, 0, 8)
		attrs = append(attrs, telemetry.MCPMethodName.String(method))
		target := s.target(method, req)
		switch {
		case target == "":
		case method == "tools/call":
			attrs = append(attrs, telemetry.GenAIToolName.String(target), telemetry.GenAIOperationName.String(telemetry.OpExecuteTool))
		default:
			attrs = append(attrs, telemetry.GenAIPromptName.String(target))
		}
		if v := protocolVersion(req); v != "" {
			attrs = append(attrs, telemetry.MCPProtocolVersion.String(v))
		}
		transport := "tcp"
		if ctx.Value(transportKey{}) != nil {
			transport = "pipe"
		}
		attrs = append(attrs, telemetry.NetworkTransport.String(transport))
		metricAttrs := len(attrs)

		var span trace.Span
		if o.tracer != nil {
			name := method
			if target != "" {
				name += " " + target
			}
			spanAttrs := attrs
			if id := requestID(req); id != "" {
				spanAttrs = append(spanAttrs, telemetry.JSONRPCRequestID.String(id))
			}
			opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(spanAttrs...)}
			parent := ctx
			if meta := metaOf(req); telemetry.HasTraceContext(meta) {
				caller := o.prop.Extract(ctx, telemetry.MetaCarrier(meta))
				if trace.SpanContextFromContext(caller).IsValid() {
					if http := trace.SpanContextFromContext(ctx); http.IsValid() {
						opts = append(opts, trace.WithLinks(trace.Link{SpanContext: http}))
					}
					parent = caller
				}
			}
			ctx, span = o.tracer.Start(parent, name, opts...)
		}

		res, err := next(ctx, method, req)

		errType, code := outcome(res, err)
		if errType != "" {
			attrs = append(attrs[:metricAttrs], telemetry.ErrorType.String(errType))
		}
		if span != nil {
			if errType != "" {
				span.SetAttributes(telemetry.ErrorType.String(errType))
				if errType != telemetry.ToolError {
					span.SetAttributes(telemetry.RPCResponseStatus.String(errType))
				}
				if code != "" {
					span.SetAttributes(telemetry.ErrorCode.String(code))
				}
				span.SetStatus(codes.Error, "")
			}
			span.End()
		}
		if metered {
			o.operation.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attrs...))
		}
		return res, err
	}
}

// target is the tool or prompt a request names, when it is one of s's:
// never a name a caller made up.
func (s *Server) target(method string, req mcp.Request) string {
	switch req := req.(type) {
	case *mcp.CallToolRequest:
		if req.Params != nil && s.handlers[req.Params.Name] != nil {
			return req.Params.Name
		}
	case *mcp.GetPromptRequest:
		if req.Params != nil && slices.Contains(promptNames, req.Params.Name) {
			return req.Params.Name
		}
	}
	return ""
}

// protocolVersion is the revision a request follows, when it is one the
// SDK speaks (an initialize asks for any string it likes).
func protocolVersion(req mcp.Request) string {
	r, ok := req.(interface{ ProtocolVersion() string })
	if !ok {
		return ""
	}
	if v := r.ProtocolVersion(); slices.Contains(supportedVersions, v) {
		return v
	}
	return ""
}

var supportedVersions = mcp.SupportedProtocolVersions()

// requestID is the JSON-RPC id the transport passed along in
// RequestIDHeader, cut to maxRequestIDLen bytes.
func requestID(req mcp.Request) string {
	extra := req.GetExtra()
	if extra == nil || extra.Header == nil {
		return ""
	}
	id := extra.Header.Get(RequestIDHeader)
	if len(id) > maxRequestIDLen {
		id = id[:maxRequestIDLen]
	}
	return id
}

// idText writes a JSON-RPC id as RequestIDHeader carries it.
func idText(id jsonrpc.ID) string {
	switch v := id.Raw().(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return ""
}

// metaOf is the _meta of a request's params, nil when it has none.
func metaOf(req mcp.Request) map[string]any {
	p := req.GetParams()
	if p == nil {
		return nil
	}
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return p.GetMeta()
}

// outcome is the error.type of a request's answer ("" for a success): the
// JSON-RPC code of a protocol error, or tool_error for a tool's error
// result, with memgate's code of that error.
func outcome(res mcp.Result, err error) (errType, code string) {
	if err != nil {
		var rpc *jsonrpc.Error
		if errors.As(err, &rpc) {
			return strconv.FormatInt(rpc.Code, 10), ""
		}
		return "_OTHER", ""
	}
	r, ok := res.(*mcp.CallToolResult)
	if !ok || r == nil || !r.IsError {
		return "", ""
	}
	var env struct {
		Error struct {
			Code memgate.Code `json:"code"`
		} `json:"error"`
	}
	if raw, ok := r.StructuredContent.(json.RawMessage); ok && json.Unmarshal(raw, &env) == nil && knownCode(env.Error.Code) {
		code = string(env.Error.Code)
	}
	return telemetry.ToolError, code
}

// knownCode reports whether c has the shape of memgate's codes, so that no
// other text can reach an attribute.
func knownCode(c memgate.Code) bool {
	if len(c) == 0 || len(c) > 32 {
		return false
	}
	for _, r := range c {
		if (r < 'a' || r > 'z') && r != '_' {
			return false
		}
	}
	return true
}

// observeLease returns l with each store it yields observed, or l itself
// when nothing is reported.
func (s *Server) observeLease(l Lease) Lease {
	if l == nil {
		return nil
	}
	o := s.obs
	return func(ctx context.Context, ns memgate.Namespace) (Store, func(), error) {
		st, release, err := l(ctx, ns)
		if err != nil || (o.tracer == nil && !o.memDur.Enabled(ctx)) {
			return st, release, err
		}
		return &observedStore{Store: st, o: o, id: o.ids.ID(string(ns))}, release, nil
	}
}

// observedStore reports each operation of a leased store: a span and the
// memory metrics. The store's other methods pass through as they are; an
// optional interface a tool asserts on its store (Proposer) needs a method
// here, or the assertion fails whenever telemetry is on
// (TestObservedStoreKeepsTheStoreInterfaces).
type observedStore struct {
	Store
	o  *observer
	id string // gen_ai.memory.store.id
}

// start begins one operation's span (nil when there are no spans).
func (st *observedStore) start(ctx context.Context, name, genaiOp, op string) (context.Context, trace.Span) {
	if st.o.tracer == nil {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{telemetry.MemoryStoreID.String(st.id), telemetry.StoreOperation.String(op)}
	if genaiOp != "" {
		attrs = append(attrs, telemetry.GenAIOperationName.String(genaiOp))
	}
	return st.o.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// end ends one operation: its span with the records it concerned, and its
// duration.
func (st *observedStore) end(ctx context.Context, span trace.Span, genaiOp, op string, start time.Time, records int, err error) {
	var errType string
	if err != nil {
		errType = string(memgate.ErrorCode(err))
	}
	if span != nil {
		if err == nil {
			span.SetAttributes(telemetry.MemoryRecordCount.Int(records))
		} else {
			span.SetAttributes(telemetry.ErrorType.String(errType))
			span.SetStatus(codes.Error, "")
		}
		span.End()
	}
	if st.o.memDur.Enabled(ctx) {
		attrs := []attribute.KeyValue{telemetry.StoreOperation.String(op)}
		if genaiOp != "" {
			attrs = append(attrs, telemetry.GenAIOperationName.String(genaiOp))
		}
		if errType != "" {
			attrs = append(attrs, telemetry.ErrorType.String(errType))
		}
		st.o.memDur.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attrs...))
	}
}

// wrote counts memories written or deleted, and the text bytes written.
func (st *observedStore) wrote(ctx context.Context, op string, n int, textBytes int) {
	if st.o.items.Enabled(ctx) {
		st.o.items.Add(ctx, int64(n), metric.WithAttributes(telemetry.StoreOperation.String(op)))
	}
	if textBytes > 0 && st.o.bytes.Enabled(ctx) {
		st.o.bytes.Add(ctx, int64(textBytes), metric.WithAttributes(telemetry.StoreOperation.String(op)))
	}
}

func (st *observedStore) Get(ctx context.Context, id string) (memgate.Memory, error) {
	const op, gop = "get", telemetry.OpSearchMemory
	start := time.Now()
	sctx, span := st.start(ctx, gop, gop, op)
	m, err := st.Store.Get(sctx, id)
	st.end(sctx, span, gop, op, start, 1, err)
	return m, err
}

func (st *observedStore) List(ctx context.Context, q memgate.ListQuery) (memgate.Page, error) {
	const op, gop = "list", telemetry.OpSearchMemory
	start := time.Now()
	sctx, span := st.start(ctx, gop, gop, op)
	p, err := st.Store.List(sctx, q)
	st.end(sctx, span, gop, op, start, len(p.Memories), err)
	return p, err
}

func (st *observedStore) Search(ctx context.Context, q memgate.Query) (memgate.Result, error) {
	const op, gop = "search", telemetry.OpSearchMemory
	start := time.Now()
	sctx, span := st.start(ctx, gop, gop, op)
	r, err := st.Store.Search(sctx, q)
	st.end(sctx, span, gop, op, start, len(r.Hits), err)
	if err == nil && st.o.recall.Enabled(ctx) {
		st.o.recall.Record(ctx, int64(len(r.Hits)))
	}
	return r, err
}

func (st *observedStore) Stats(ctx context.Context) (memgate.StoreStats, error) {
	const op = "stats"
	start := time.Now()
	sctx, span := st.start(ctx, telemetry.SpanStats, "", op)
	c, err := st.Store.Stats(sctx)
	st.end(sctx, span, "", op, start, int(c.Count), err)
	return c, err
}

func (st *observedStore) Write(ctx context.Context, w memgate.Write) (memgate.Written, error) {
	const op, gop = "put", telemetry.OpUpsertMemory
	start := time.Now()
	sctx, span := st.start(ctx, gop, gop, op)
	done, err := st.Store.Write(sctx, w)
	st.end(sctx, span, gop, op, start, 1, err)
	switch {
	case err == nil && done.Deduplicated:
		// A remember answered with a live memory of the same text.
		if st.o.dedup.Enabled(ctx) {
			st.o.dedup.Add(ctx, 1)
		}
	case err == nil:
		st.wrote(ctx, op, 1, len(w.Text))
	}
	return done, err
}

func (st *observedStore) Delete(ctx context.Context, id string, ifVersion *int64) error {
	const op, gop = "delete", telemetry.OpDeleteMemory
	start := time.Now()
	sctx, span := st.start(ctx, gop, gop, op)
	err := st.Store.Delete(sctx, id, ifVersion)
	st.end(sctx, span, gop, op, start, 1, err)
	if err == nil {
		st.wrote(ctx, op, 1, 0)
	}
	return err
}

func (st *observedStore) ExportLines(ctx context.Context, cursor string, limit int, take func(line []byte) bool) (int, string, error) {
	const op = "export"
	start := time.Now()
	sctx, span := st.start(ctx, telemetry.SpanExport, "", op)
	n, next, err := st.Store.ExportLines(sctx, cursor, limit, take)
	st.end(sctx, span, "", op, start, n, err)
	return n, next, err
}

// errNotProposer is the error of a candidate write to a store that keeps
// no candidates, as remember reports it without the wrapper.
var errNotProposer = memgate.Internal("server.remember", errors.New("store keeps no candidates"))

// Propose passes a candidate on, when the store keeps candidates.
func (st *observedStore) Propose(ctx context.Context, w memgate.Write) (memgate.Memory, error) {
	p, ok := st.Store.(Proposer)
	if !ok {
		return memgate.Memory{}, errNotProposer
	}
	const op, gop = "propose", telemetry.OpCreateMemory
	start := time.Now()
	sctx, span := st.start(ctx, gop, gop, op)
	m, err := p.Propose(sctx, w)
	st.end(sctx, span, gop, op, start, 1, err)
	if err == nil {
		st.wrote(ctx, op, 1, len(w.Text))
	}
	return m, err
}

// errNotRanker is the error of a view's search on a store that cannot rank
// with other stores, as the view reports it without the wrapper.
var errNotRanker = memgate.Internal("server.search", errNoRanker)

// Corpus passes the view's first phase on, when the store can rank.
func (st *observedStore) Corpus(ctx context.Context, text string) (memgate.Corpus, error) {
	r, ok := st.Store.(Ranker)
	if !ok {
		return memgate.Corpus{}, errNotRanker
	}
	return r.Corpus(ctx, text)
}

// SearchWith is Search of a view's store, observed as a search.
func (st *observedStore) SearchWith(ctx context.Context, q memgate.Query, others memgate.Corpus, above float64) (memgate.Result, error) {
	r, ok := st.Store.(Ranker)
	if !ok {
		return memgate.Result{}, errNotRanker
	}
	const op, gop = "search", telemetry.OpSearchMemory
	start := time.Now()
	sctx, span := st.start(ctx, gop, gop, op)
	res, err := r.SearchWith(sctx, q, others, above)
	st.end(sctx, span, gop, op, start, len(res.Hits), err)
	if err == nil && st.o.recall.Enabled(ctx) {
		st.o.recall.Record(ctx, int64(len(res.Hits)))
	}
	return res, err
}

// stdioExtra is what RunStdio attaches to each call it reads, for the
// call's span: its JSON-RPC id.
func stdioExtra(id jsonrpc.ID) *mcp.RequestExtra {
	return &mcp.RequestExtra{Header: http.Header{RequestIDHeader: {idText(id)}}}
}
