// Package otlptest is an OTLP/HTTP receiver for tests: it listens on
// 127.0.0.1, decodes the protobuf export requests of traces and metrics as
// a collector does, and keeps what it received. It uses the OTLP protocol's
// own messages (go.opentelemetry.io/proto/otlp), never the SDK.
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	collmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one span received, with the resource and scope it came under.
type Span struct {
	*tracepb.Span
	Resource []*commonpb.KeyValue
	Scope    string
}

// Attr returns the value of the span's attribute key as text ("" when it
// has none), and whether it has it.
func (s Span) Attr(key string) (string, bool) { return attr(s.Attributes, key) }

// TraceID, SpanID and ParentID are the span's ids in hex.
func (s Span) TraceID() string  { return hex.EncodeToString(s.TraceId) }
func (s Span) SpanID() string   { return hex.EncodeToString(s.SpanId) }
func (s Span) ParentID() string { return hex.EncodeToString(s.ParentSpanId) }

// Metric is one metric received, with its resource and scope.
type Metric struct {
	*metricpb.Metric
	Resource []*commonpb.KeyValue
	Scope    string
}

// Receiver is an OTLP/HTTP endpoint on 127.0.0.1.
type Receiver struct {
	URL string // http://127.0.0.1:PORT, what OTEL_EXPORTER_OTLP_ENDPOINT takes

	srv     *http.Server
	mu      sync.Mutex
	changed chan struct{}
	spans   []Span
	metrics []Metric
	errs    []error
	conns   atomic.Int64
}

// Connections is the number of connections made to the receiver: an
// exporter left at its defaults speaks TLS, which is never a request here.
func (r *Receiver) Connections() int64 { return r.conns.Load() }

// Start starts a receiver on a free loopback port.
func Start() (*Receiver, error) { return StartOn("127.0.0.1:0") }

// StartOn starts a receiver on addr, a loopback address.
func StartOn(addr string) (*Receiver, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	r := &Receiver{URL: "http://" + ln.Addr().String(), changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.traces)
	mux.HandleFunc("POST /v1/metrics", r.metricsExport)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				r.conns.Add(1)
			}
		}}
	go r.srv.Serve(ln)
	return r, nil
}

// Close stops the receiver.
func (r *Receiver) Close() error { return r.srv.Close() }

// Endpoint is the receiver's host:port.
func (r *Receiver) Endpoint() string { return strings.TrimPrefix(r.URL, "http://") }

func (r *Receiver) body(w http.ResponseWriter, req *http.Request, msg proto.Message) bool {
	var in io.Reader = http.MaxBytesReader(w, req.Body, 64<<20)
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(in)
		if err != nil {
			r.fail(w, err)
			return false
		}
		in = gz
	}
	b, err := io.ReadAll(in)
	if err == nil && req.Header.Get("Content-Type") != "application/x-protobuf" {
		err = fmt.Errorf("content type %q, want application/x-protobuf", req.Header.Get("Content-Type"))
	}
	if err == nil {
		err = proto.Unmarshal(b, msg)
	}
	if err != nil {
		r.fail(w, err)
		return false
	}
	return true
}

func (r *Receiver) fail(w http.ResponseWriter, err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
	http.Error(w, err.Error(), http.StatusBadRequest)
}

func (r *Receiver) traces(w http.ResponseWriter, req *http.Request) {
	var msg colltracepb.ExportTraceServiceRequest
	if !r.body(w, req, &msg) {
		return
	}
	r.mu.Lock()
	for _, rs := range msg.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, Span{Span: s, Resource: rs.GetResource().GetAttributes(), Scope: ss.GetScope().GetName()})
			}
		}
	}
	r.notify()
	r.mu.Unlock()
	r.reply(w, &colltracepb.ExportTraceServiceResponse{})
}

func (r *Receiver) metricsExport(w http.ResponseWriter, req *http.Request) {
	var msg collmetricpb.ExportMetricsServiceRequest
	if !r.body(w, req, &msg) {
		return
	}
	r.mu.Lock()
	for _, rm := range msg.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				r.metrics = append(r.metrics, Metric{Metric: m, Resource: rm.GetResource().GetAttributes(), Scope: sm.GetScope().GetName()})
			}
		}
	}
	r.notify()
	r.mu.Unlock()
	r.reply(w, &collmetricpb.ExportMetricsServiceResponse{})
}

func (r *Receiver) reply(w http.ResponseWriter, msg proto.Message) {
	b, _ := proto.Marshal(msg)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(b)
}

// notify wakes the waiters. Called with r.mu held.
func (r *Receiver) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Metrics returns the metrics received so far, one entry per export of
// each.
func (r *Receiver) Metrics() []Metric {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Metric(nil), r.metrics...)
}

// Err reports the requests the receiver could not decode.
func (r *Receiver) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

// Wait waits until done holds of what was received, or ctx ends.
func (r *Receiver) Wait(ctx context.Context, done func(spans []Span, metrics []Metric) bool) error {
	for {
		r.mu.Lock()
		ok := done(r.spans, r.metrics)
		changed := r.changed
		r.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("otlptest: %w; received %d spans and %d metrics", ctx.Err(), len(r.Spans()), len(r.Metrics()))
		}
	}
}

// Find returns the first span named name, and whether there is one.
func Find(spans []Span, name string) (Span, bool) {
	for _, s := range spans {
		if s.Name == name {
			return s, true
		}
	}
	return Span{}, false
}

// Attr returns the value of attribute key among attrs as text.
func Attr(attrs []*commonpb.KeyValue, key string) (string, bool) { return attr(attrs, key) }

func attr(attrs []*commonpb.KeyValue, key string) (string, bool) {
	for _, kv := range attrs {
		if kv.Key == key {
			return Text(kv.Value), true
		}
	}
	return "", false
}

// Text writes an attribute value as text: strings as they are, other
// values as Go prints them.
func Text(v *commonpb.AnyValue) string {
	switch v := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return v.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(v.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(v.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(v.DoubleValue)
	case *commonpb.AnyValue_BytesValue:
		return string(v.BytesValue)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range v.ArrayValue.GetValues() {
			parts = append(parts, Text(e))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case *commonpb.AnyValue_KvlistValue:
		var parts []string
		for _, kv := range v.KvlistValue.GetValues() {
			parts = append(parts, kv.Key+"="+Text(kv.Value))
		}
		return "{" + strings.Join(parts, " ") + "}"
	}
	return ""
}

// Strings lists every string a span holds that could carry content: its
// name, status message, trace state, and every key and value of its
// attributes, events, links and resource.
func (s Span) Strings() []string {
	out := []string{s.Name, s.GetStatus().GetMessage(), s.TraceState}
	out = appendKVs(out, s.Attributes)
	out = appendKVs(out, s.Resource)
	for _, e := range s.Events {
		out = append(out, e.Name)
		out = appendKVs(out, e.Attributes)
	}
	for _, l := range s.Links {
		out = append(out, l.TraceState)
		out = appendKVs(out, l.Attributes)
	}
	return out
}

// Strings lists every string a metric holds: its name, description, unit,
// and every attribute key and value of its data points and exemplars.
func (m Metric) Strings() []string {
	out := []string{m.Name, m.Description, m.Unit}
	out = appendKVs(out, m.Resource)
	for _, kvs := range m.PointAttributes() {
		out = appendKVs(out, kvs)
	}
	return out
}

// PointAttributes lists the attributes of each data point (and of each
// exemplar) of m.
func (m Metric) PointAttributes() [][]*commonpb.KeyValue {
	var out [][]*commonpb.KeyValue
	ex := func(es []*metricpb.Exemplar) {
		for _, e := range es {
			out = append(out, e.FilteredAttributes)
		}
	}
	switch d := m.Data.(type) {
	case *metricpb.Metric_Sum:
		for _, p := range d.Sum.DataPoints {
			out = append(out, p.Attributes)
			ex(p.Exemplars)
		}
	case *metricpb.Metric_Gauge:
		for _, p := range d.Gauge.DataPoints {
			out = append(out, p.Attributes)
			ex(p.Exemplars)
		}
	case *metricpb.Metric_Histogram:
		for _, p := range d.Histogram.DataPoints {
			out = append(out, p.Attributes)
			ex(p.Exemplars)
		}
	case *metricpb.Metric_ExponentialHistogram:
		for _, p := range d.ExponentialHistogram.DataPoints {
			out = append(out, p.Attributes)
			ex(p.Exemplars)
		}
	case *metricpb.Metric_Summary:
		for _, p := range d.Summary.DataPoints {
			out = append(out, p.Attributes)
		}
	}
	return out
}

func appendKVs(out []string, kvs []*commonpb.KeyValue) []string {
	for _, kv := range kvs {
		out = append(out, kv.Key, Text(kv.Value))
	}
	return out
}
