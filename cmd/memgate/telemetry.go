package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/memgate/memgate/telemetry"
)

// The OpenTelemetry SDK is installed here and nowhere else; the packages
// report through the API (package telemetry). What is exported is chosen by
// the standard variables, as for every OpenTelemetry service:
//
//   - traces when OTEL_TRACES_EXPORTER names an exporter (otlp, console), or
//     when it is unset and OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set;
//   - metrics likewise (OTEL_METRICS_EXPORTER,
//     OTEL_EXPORTER_OTLP_METRICS_ENDPOINT), and to the Prometheus endpoint
//     of --metrics;
//   - OTEL_EXPORTER_OTLP_PROTOCOL, _HEADERS, _TIMEOUT..., OTEL_SERVICE_NAME,
//     OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and OTEL_BSP_* as the SDK
//     reads them; OTEL_SDK_DISABLED=true turns all of it off (--metrics
//     still serves its endpoint).
//
// Unlike the SDK's own default (OTLP to localhost), nothing set means no
// provider at all: no span is made, no exporter runs, nothing is sent.

// telemetryKeyEnv names the variable of the key of gen_ai.memory.store.id
// (a secret: environment only). Without it the key is made at random at
// each start.
const telemetryKeyEnv = "MEMGATE_TELEMETRY_KEY"

// telemetrySetup is what serve reports through.
type telemetrySetup struct {
	providers telemetry.Providers
	metrics   http.Handler // GET /metrics, with --metrics
	shutdown  func(context.Context) error
	traces    bool // an exporter of spans runs
	exported  bool // an exporter of metrics other than Prometheus runs
}

// telemetryShutdownGrace bounds the export of what is left at shutdown.
const telemetryShutdownGrace = 5 * time.Second

// signalOn reports whether the variables ask for a signal's exporter:
// exporterVar names one other than none, or it is unset and an OTLP
// endpoint is set (the general one or the signal's, endpointVar).
func signalOn(getenv func(string) string, exporterVar, endpointVar string) bool {
	if v := strings.TrimSpace(getenv(exporterVar)); v != "" {
		return v != "none"
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv(endpointVar) != ""
}

// installTelemetry installs the SDK the variables and prometheus
// (--metrics) ask for. Nothing asked: no provider, and a shutdown that does
// nothing. The variables are read through a.getenv to decide, and by the
// SDK from the process's environment to configure; they are the same in a
// real run.
func (a *app) installTelemetry(withPrometheus bool) (*telemetrySetup, error) {
	set := &telemetrySetup{shutdown: func(context.Context) error { return nil }}
	set.providers.StoreKey = []byte(a.getenv(telemetryKeyEnv))
	disabled := strings.EqualFold(strings.TrimSpace(a.getenv("OTEL_SDK_DISABLED")), "true")
	traces := !disabled && signalOn(a.getenv, "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	metrics := !disabled && signalOn(a.getenv, "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
	if !traces && !metrics && !withPrometheus {
		return set, nil
	}
	if a.cfg.Transport != "http" {
		// The console exporters write to standard output, which the stdio
		// transport keeps for the protocol alone.
		for _, v := range []string{"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"} {
			if slices.Contains(strings.Split(a.getenv(v), ","), "console") {
				return nil, usageError{fmt.Errorf("%s: console writes to standard output, which the stdio transport keeps for the protocol; use otlp, or --transport http", v)}
			}
		}
	}
	ctx := a.ctx
	// The SDK reports export failures here; without a handler it would
	// write them with the standard logger.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		a.log.Warn("telemetry export failed", "op", "otel.export", "error", err)
	}))
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "memgate"), attribute.String("service.version", moduleVersion())),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv()) // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, over the defaults
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES leaves out what it cannot read.
		a.log.Warn("telemetry resource", "op", "cmd.telemetry", "error", err)
		if res == nil {
			res = resource.Default()
		}
	}
	var stops []func(context.Context) error
	set.shutdown = func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), telemetryShutdownGrace)
		defer cancel()
		var errs []error
		for _, stop := range stops {
			errs = append(errs, stop(ctx))
		}
		return errors.Join(errs...)
	}
	fail := func(err error) (*telemetrySetup, error) {
		set.shutdown(ctx)
		return nil, err
	}

	if traces {
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return fail(usageError{fmt.Errorf("OTEL_TRACES_EXPORTER: %w", err)})
		}
		if !autoexport.IsNoneSpanExporter(exp) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
			stops = append(stops, tp.Shutdown)
			set.providers.Tracer, set.traces = tp, true
		}
	}

	var readers []sdkmetric.Option
	if withPrometheus {
		reg := prometheus.NewRegistry()
		if err := reg.Register(collectors.NewGoCollector()); err != nil {
			return fail(err)
		}
		if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
			return fail(err)
		}
		exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			return fail(err)
		}
		readers = append(readers, sdkmetric.WithReader(exporter))
		set.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	if metrics {
		r, err := autoexport.NewMetricReader(ctx)
		if err != nil {
			return fail(usageError{fmt.Errorf("OTEL_METRICS_EXPORTER: %w", err)})
		}
		if !autoexport.IsNoneMetricReader(r) {
			readers = append(readers, sdkmetric.WithReader(r))
			set.exported = true
		}
	}
	if len(readers) > 0 {
		mp := sdkmetric.NewMeterProvider(append(readers, sdkmetric.WithResource(res))...)
		stops = append(stops, mp.Shutdown)
		set.providers.Meter = mp
	}
	a.log.Info("telemetry", "op", "cmd.telemetry", "traces", set.traces, "metrics_exported", set.exported,
		"prometheus", withPrometheus)
	return set, nil
}

// serveMetrics serves GET /metrics on its own listener (--metrics-bind)
// until ctx ends.
func (a *app) serveMetrics(ctx context.Context, ln net.Listener, h http.Handler) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 90 * time.Second,
		MaxHeaderBytes: 16 << 10}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	hs.Shutdown(grace)
	<-served
	return nil
}
