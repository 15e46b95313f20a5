package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/memgate/memgate/telemetry/otlptest"
)

// otelVars are the variables that could make serve export anything.
var otelVars = []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_LOGS_EXPORTER",
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_BSP_SCHEDULE_DELAY",
	"OTEL_METRIC_EXPORT_INTERVAL"}

// clearOTEL unsets, for the test, every OTEL_ variable of the process.
func clearOTEL(t *testing.T) {
	for _, k := range otelVars {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

// With nothing set (or exporters set to none, or the SDK disabled), serve
// installs no provider: no span is made, and no exporter runs or starts a
// goroutine.
func TestTelemetryOffWhenNothingIsSet(t *testing.T) {
	clearOTEL(t)
	for _, c := range []struct {
		name string
		env  env
	}{
		{"nothing set", env{}},
		{"exporters none", env{"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}},
		{"the SDK disabled", env{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}},
		{"only a service name", env{"OTEL_SERVICE_NAME": "memgate", "OTEL_RESOURCE_ATTRIBUTES": "a=b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			a := &app{ctx: t.Context(), cfg: &Config{}, getenv: c.env.get, log: (&Config{}).logger(io.Discard)}
			set, err := a.installTelemetry(false)
			if err != nil {
				t.Fatal(err)
			}
			p := set.providers
			if p.Tracer != nil || p.Meter != nil || p.Propagator != nil || set.metrics != nil || set.traces || set.exported {
				t.Fatalf("providers installed: %+v", set)
			}
			if err := set.shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// With nothing set, a server that serves calls sends nothing to where the
// SDK would send by default (OTLP/HTTP on localhost:4318).
func TestServeSendsNothingWhenNothingIsSet(t *testing.T) {
	clearOTEL(t)
	rcv, err := otlptest.StartOn("127.0.0.1:4318")
	if err != nil {
		t.Skipf("the default OTLP port is taken here (%v): the installed providers are checked by TestTelemetryOffWhenNothingIsSet", err)
	}
	defer rcv.Close()
	s := serveHTTP(t, env{}, "--data-dir", t.TempDir())
	callSearch(t, s.url, nil)
	s.stop()
	if err := <-s.done; err != nil {
		t.Fatal(err)
	}
	s.done <- nil
	time.Sleep(200 * time.Millisecond)
	if n := rcv.Connections(); n > 0 {
		t.Fatalf("%d connections to the default OTLP port with nothing set", n)
	}
}

// callSearch remembers a memory and searches for it, with header on every
// request.
func callSearch(t *testing.T, url string, header http.Header) {
	t.Helper()
	client := &http.Client{Transport: headerRoundTripper{header}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "cmd-test", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: client}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, c := range []struct {
		tool string
		args map[string]any
	}{{"remember", map[string]any{"text": "staging deploys happen on Tuesdays"}}, {"search", map[string]any{"query": "staging"}}} {
		if res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args}); err != nil || res.IsError {
			t.Fatalf("%s: %v %v", c.tool, err, res)
		}
	}
}

type headerRoundTripper struct{ h http.Header }

func (rt headerRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range rt.h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// Configured by the OTEL_* variables alone, serve exports the spans of a
// call to the OTLP endpoint they name, in the caller's trace, under the
// service name they give, and its metrics beside the Prometheus endpoint of
// --metrics-bind, which the same meter provider feeds.
func TestServeExportsWhatTheOTELVariablesSay(t *testing.T) {
	clearOTEL(t)
	rcv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	vars := env{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_SERVICE_NAME": "memgate-under-test",
		"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=test", "OTEL_BSP_SCHEDULE_DELAY": "50",
		"OTEL_METRIC_EXPORT_INTERVAL": "100"}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	s := serveHTTP(t, vars, "--data-dir", t.TempDir(), "--metrics-bind", "127.0.0.1:0", "--log", "debug")
	const trace, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	callSearch(t, s.url, http.Header{"Traceparent": {"00-" + trace + "-" + parent + "-01"}})

	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	err = rcv.Wait(ctx, func(spans []otlptest.Span, metrics []otlptest.Metric) bool {
		_, search := otlptest.Find(spans, "tools/call search")
		_, op := otlptest.Find(spans, "search_memory")
		mcpMetric := false
		for _, m := range metrics {
			mcpMetric = mcpMetric || m.Name == "mcp.server.operation.duration"
		}
		return search && op && mcpMetric
	})
	if err != nil {
		t.Fatal(err)
	}
	call, _ := otlptest.Find(rcv.Spans(), "tools/call search")
	if call.TraceID() != trace {
		t.Errorf("the call's span is in trace %s, want the caller's %s", call.TraceID(), trace)
	}
	if name, _ := otlptest.Attr(call.Resource, "service.name"); name != "memgate-under-test" {
		t.Errorf("service.name %q, want OTEL_SERVICE_NAME's", name)
	}
	if env, _ := otlptest.Attr(call.Resource, "deployment.environment.name"); env != "test" {
		t.Errorf("deployment.environment.name %q, want OTEL_RESOURCE_ATTRIBUTES's", env)
	}

	// The Prometheus endpoint on its own listener, fed by the same provider;
	// the MCP listener serves no /metrics then.
	addr := regexp.MustCompile(`msg=metrics .*addr=(127\.0\.0\.1:\d+)`).FindStringSubmatch(s.stderr.String())
	if addr == nil {
		t.Fatalf("no metrics address logged: %s", s.stderr.String())
	}
	body := get(t, "http://"+addr[1]+"/metrics", 200)
	for _, want := range []string{"mcp_server_operation_duration_seconds_bucket", "memory_operation_duration_seconds_bucket",
		"memory_items_total", "memory_bytes_total", "memgate_pool_lease_duration_seconds", "http_server_request_duration_seconds",
		`service_name="memgate-under-test"`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	get(t, strings.TrimSuffix(s.url, "/mcp")+"/metrics", 404)

	// Log lines of a call carry its trace.
	s.stop()
	if err := <-s.done; err != nil {
		t.Fatal(err)
	}
	s.done <- nil
	found := false
	sc := bufio.NewScanner(strings.NewReader(s.stderr.String()))
	for sc.Scan() {
		found = found || strings.Contains(sc.Text(), "trace_id="+trace)
	}
	if !found {
		t.Errorf("no log line carries trace_id=%s: %s", trace, s.stderr.String())
	}
}

func get(t *testing.T, url string, status int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("GET %s: %s, want %d", url, resp.Status, status)
	}
	return string(b)
}

// Every metric the Grafana dashboard in deploy/ queries is one that serve
// exports, under the name Prometheus shows.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	clearOTEL(t)
	b, err := os.ReadFile("../../deploy/grafana/memgate-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	s := serveHTTP(t, env{}, "--data-dir", t.TempDir(), "--metrics")
	callSearch(t, s.url, nil)
	req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader("{}"))
	req.Host = "elsewhere.example" // a refusal
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	body := get(t, strings.TrimSuffix(s.url, "/mcp")+"/metrics", 200)
	// Counters that only appear once their event has happened.
	later := map[string]bool{"memgate_pool_evictions_total": true, "memgate_pool_refusals_total": true}
	names := regexp.MustCompile(`\b([a-z][a-z0-9_]*)\{`)
	checked := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range names.FindAllStringSubmatch(tg.Expr, -1) {
				name := m[1]
				if later[name] {
					continue
				}
				checked++
				if !strings.Contains(body, "\n"+name+"{") && !strings.Contains(body, "\n"+name+" ") {
					t.Errorf("the dashboard queries %s, which /metrics does not have", name)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("%d metric names checked", checked)
	}
}

// The console exporters write to standard output: over stdio, which keeps
// it for the protocol, they refuse to start, in one line.
func TestConsoleExportersRefuseTheStdioTransport(t *testing.T) {
	for _, v := range []string{"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"} {
		mg(t, env{v: "console"}, "", "serve", "--data-dir", t.TempDir()).
			fails(t, 2, v+": console writes to standard output, which the stdio transport keeps for the protocol")
	}
}
