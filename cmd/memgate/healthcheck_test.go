package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheckProbesARunningServer(t *testing.T) {
	s := serveHTTP(t, env{}, "--data-dir", t.TempDir())
	bind := strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/mcp")
	for _, probe := range [][]string{{}, {"--ready"}} {
		mg(t, env{}, "", append([]string{"healthcheck", "--bind", bind}, probe...)...).ok200(t)
	}
	// The bind comes from serve's variable, as in a container.
	mg(t, env{"MEMGATE_BIND": bind}, "", "healthcheck").ok200(t)
}

func TestHealthcheckFailsWithOneLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	mg(t, env{}, "", "healthcheck", "--bind", closed).fails(t, 1, "connection refused")

	draining := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ready" {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	}))
	defer draining.Close()
	bind := strings.TrimPrefix(draining.URL, "http://")
	mg(t, env{}, "", "healthcheck", "--bind", bind).ok200(t)
	mg(t, env{}, "", "healthcheck", "--ready", "--bind", bind).fails(t, 1, "503 Service Unavailable")
	mg(t, env{}, "", "healthcheck", "--bind", "nowhere").fails(t, 2, "--bind: must be HOST:PORT")
	mg(t, env{}, "", "healthcheck", "--timeout", "0s").fails(t, 2, "--timeout")
}

func TestProbeURL(t *testing.T) {
	for _, tc := range []struct {
		bind  string
		ready bool
		want  string
	}{
		{"0.0.0.0:8765", false, "http://127.0.0.1:8765/health"},
		{":9000", true, "http://127.0.0.1:9000/ready"},
		{"[::]:8765", false, "http://127.0.0.1:8765/health"},
		{"10.0.0.7:8765", false, "http://10.0.0.7:8765/health"},
		{"[::1]:8765", false, "http://[::1]:8765/health"},
		{"localhost:8765", false, "http://localhost:8765/health"},
	} {
		got, err := probeURL(tc.bind, tc.ready)
		if err != nil || got != tc.want {
			t.Errorf("probeURL(%q, %v) = %q, %v; want %q", tc.bind, tc.ready, got, err, tc.want)
		}
	}
}

// ok200 checks a healthcheck run that succeeded: status 0 and no output.
func (r result) ok200(t *testing.T) {
	t.Helper()
	if r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
