package server

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The gateway reports through the OpenTelemetry API only; cmd/memgate
// installs the SDK and its exporters (a Prometheus endpoint with
// --metrics). Without them every instrument is a no-op.

// gatewayMetrics are the gateway's own instruments. Request counts and
// durations by route and status come from otelhttp.
type gatewayMetrics struct {
	refusals metric.Int64Counter
}

// Attribute of a refusal: why the gateway answered it itself.
var attrReason = attribute.Key("memgate.refusal")

func (g *Gateway) newMetrics() error {
	m := otel.Meter("github.com/memgate/memgate/server")
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
// http.server.* metrics per request, labelled with echo's route (never
// the raw path).
func (g *Gateway) instrument(h http.Handler) http.Handler {
	return otelhttp.NewHandler(h, "memgate.http",
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }))
}

// route labels a request's metrics with the route echo matched.
func route(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if l, ok := otelhttp.LabelerFromContext(c.Request().Context()); ok {
			l.Add(attribute.String("http.route", c.Path()))
		}
		return next(c)
	}
}
