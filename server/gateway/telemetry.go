package gateway

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/memgate/memgate/telemetry"
)

// The gateway reports through the OpenTelemetry API only; cmd/memgate
// installs the SDK and its exporters (a Prometheus endpoint with
// --metrics, OTLP with the OTEL_* variables). Without them every instrument
// is a no-op. A request's span is the parent of its MCP calls' spans
// (bindWork hands it to them), or their link when a call names a parent of
// its own in params._meta.

// gatewayMetrics are the gateway's own instruments. Request counts and
// durations by route and status come from otelhttp.
type gatewayMetrics struct {
	refusals metric.Int64Counter
}

// Attribute of a refusal: why the gateway answered it itself.
var attrReason = attribute.Key("memgate.refusal")

func (g *Gateway) newMetrics() error {
	m := g.opts.Telemetry.MeterProvider().Meter(telemetry.ScopeGateway)
	var err error
	if g.metrics.refusals, err = m.Int64Counter("memgate.http.refusals",
		metric.WithDescription("Requests the gateway answered itself: caps, guards, bounds, authentication.")); err != nil {
		return err
	}
	gauge := func(name, desc string, read func() int64) error {
		_, err := m.Int64ObservableGauge(name, metric.WithDescription(desc),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
				o.Observe(read())
				return nil
			}))
		return err
	}
	if err = gauge("memgate.http.inflight", "Requests in progress (streams aside).", g.inflight.Load); err != nil {
		return err
	}
	if err = gauge("memgate.http.streams", "Open SSE streams.", g.streams.Load); err != nil {
		return err
	}
	return gauge("memgate.http.sessions", "Open MCP sessions.", func() int64 {
		n := int64(0)
		for range g.stateful.Sessions() {
			n++
		}
		return n
	})
}

// refused counts one refusal.
func (g *Gateway) refused(ctx context.Context, reason string) {
	g.metrics.refusals.Add(ctx, 1, metric.WithAttributes(attrReason.String(reason)))
}

// instrument wraps the gateway's handler in otelhttp: a span and the
// http.server.* metrics per request. No label may come from what a caller
// chooses, or 20,000 distinct Host headers make 20,000 series: otelhttp
// labels server.address and server.port from Host, so it is shown the
// fixed serverName instead (the handlers get the real Host back), and
// http.route is echo's route or unmatchedRoute, never the raw path. The
// method is one of the standard ones or _OTHER (otelhttp's own rule), the
// protocol version one Go's server accepts.
func (g *Gateway) instrument(h http.Handler) http.Handler {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A copy: otelhttp labels the metrics from the request it passed on.
		real := r.WithContext(r.Context())
		if host, ok := r.Context().Value(hostKey{}).(string); ok {
			real.Host = host
		}
		h.ServeHTTP(w, real)
	})
	// Without spans, a caller's trace context is not even read.
	tp, prop := g.opts.Telemetry.Tracer, g.opts.Telemetry.TextMapPropagator()
	if tp == nil {
		tp, prop = noop.NewTracerProvider(), propagation.NewCompositeTextMapPropagator()
	}
	traced := otelhttp.NewHandler(inner, "memgate.http",
		otelhttp.WithServerName(serverName),
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithMeterProvider(g.opts.Telemetry.MeterProvider()),
		otelhttp.WithPropagators(prop),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return spanMethod(r.Method) }))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		shown := r.WithContext(context.WithValue(r.Context(), hostKey{}, r.Host))
		shown.Host = serverName
		traced.ServeHTTP(w, shown)
	})
}

// serverName is the server.address of every request's metrics.
const serverName = "memgate"

// unmatchedRoute is the http.route of a request to no route.
const unmatchedRoute = "unmatched"

type hostKey struct{}

// route labels a request's metrics with the route echo matched: one of the
// paths the gateway registered, or unmatchedRoute; and names its span
// "{method} {route}" (just the method for no route), as the HTTP
// conventions do.
func (g *Gateway) route(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		route := c.Path()
		if !g.routes[route] {
			route = unmatchedRoute
		}
		if l, ok := otelhttp.LabelerFromContext(ctx); ok {
			l.Add(attribute.String("http.route", route))
		}
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			// url.path is the route too, never the path sent: a path may
			// name a namespace or a memory.
			span.SetAttributes(attribute.String("url.path", route))
			if route != unmatchedRoute {
				span.SetName(spanMethod(c.Request().Method) + " " + route)
				span.SetAttributes(attribute.String("http.route", route))
			}
		}
		return next(c)
	}
}

// spanMethod is a request's method as a span name shows it: one of the
// standard methods, or HTTP for any other (a caller's word never names a
// span).
func spanMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "HTTP"
}

// traced reports whether the gateway makes spans.
func (g *Gateway) traced() bool { return g.opts.Telemetry.Tracer != nil }
