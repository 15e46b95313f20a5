package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/memgate/memgate/telemetry"
)

func TestStoreIDsAreKeyedHashes(t *testing.T) {
	a, b := telemetry.NewStoreIDs([]byte("key one")), telemetry.NewStoreIDs([]byte("key two"))
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for _, ns := range []string{"default", "team-a", "x"} {
		id := a.ID(ns)
		if !hex32.MatchString(id) {
			t.Errorf("%s: id %q, want 32 hex digits", ns, id)
		}
		if again := telemetry.NewStoreIDs([]byte("key one")).ID(ns); again != id {
			t.Errorf("%s: %q then %q under the same key", ns, id, again)
		}
		if other := b.ID(ns); other == id {
			t.Errorf("%s: the same id %q under two keys", ns, id)
		}
	}
	if a.ID("team-a") == a.ID("team-b") {
		t.Error("two namespaces share an id")
	}
	random := telemetry.NewStoreIDs(nil)
	if random.ID("default") != telemetry.NewStoreIDs(nil).ID("default") {
		t.Error("without a key, ids differ within one process")
	}
}

func TestLogHandlerAddsTheSpansIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil)))
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	log.InfoContext(ctx, "within a span")
	log.With("k", "v").InfoContext(context.Background(), "without")
	dec := json.NewDecoder(&buf)
	var in, out map[string]any
	if err := dec.Decode(&in); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&out); err != nil {
		t.Fatal(err)
	}
	if in["trace_id"] != tid.String() || in["span_id"] != sid.String() {
		t.Errorf("within a span: %v", in)
	}
	if _, ok := out["trace_id"]; ok || out["k"] != "v" {
		t.Errorf("without a span: %v", out)
	}
}

func TestMetaCarrierReadsTraceContext(t *testing.T) {
	meta := map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "a=1", "other": 5}
	if !telemetry.HasTraceContext(meta) || telemetry.HasTraceContext(map[string]any{"traceparent": 1}) {
		t.Fatal("HasTraceContext")
	}
	ctx := telemetry.Providers{}.TextMapPropagator().Extract(context.Background(), telemetry.MetaCarrier(meta))
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsRemote() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.TraceState().String() != "a=1" {
		t.Fatalf("extracted %v", sc)
	}
	if got := telemetry.MetaCarrier(meta).Get("other"); got != "" {
		t.Errorf("a value that is not a string reads %q", got)
	}
}
