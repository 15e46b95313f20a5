package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// servedHTTP is one `memgate serve --transport http` run in-process.
type servedHTTP struct {
	url    string
	stderr *syncBuffer
	stop   context.CancelFunc
	done   chan error
}

// serveHTTP starts run(serve --transport http --bind 127.0.0.1:0, args...)
// and waits for its listening line.
func serveHTTP(t *testing.T, e env, args ...string) *servedHTTP {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	outR, outW := io.Pipe()
	s := &servedHTTP{stderr: &syncBuffer{}, stop: stop, done: make(chan error, 1)}
	go func() {
		err := run(ctx, append([]string{"serve", "--transport", "http", "--bind", "127.0.0.1:0"}, args...), e.get,
			strings.NewReader(""), outW, s.stderr)
		outW.Close()
		s.done <- err
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	go io.Copy(io.Discard, outR)
	const prefix = "memgate listening on "
	if err != nil || !strings.HasPrefix(line, prefix) {
		t.Fatalf("listening line %q (%v); stderr %q", line, err, s.stderr.String())
	}
	s.url = strings.TrimSpace(strings.TrimPrefix(line, prefix))
	t.Cleanup(func() { stop(); <-s.done })
	return s
}

func TestServeOverHTTP(t *testing.T) {
	dir := t.TempDir()
	s := serveHTTP(t, env{}, "--data-dir", dir, "--path", "/memory")
	if !strings.HasSuffix(s.url, "/memory") || !strings.HasPrefix(s.url, "http://127.0.0.1:") {
		t.Fatalf("url %q", s.url)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "cmd-test", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "remember", Arguments: map[string]any{"text": "over http"}})
	if err != nil || res.IsError {
		t.Fatalf("remember: %v %v", err, res)
	}
	cs.Close()
	resp, err := http.Get(strings.TrimSuffix(s.url, "/memory") + "/ready")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/ready: %v %v", err, resp)
	}
	resp.Body.Close()
	// A signal is a clean exit, and the write is on disk.
	s.stop()
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("serve returned %v; stderr %q", err, s.stderr.String())
		}
		s.done <- nil
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
	st := mg(t, env{}, "", "stats", "--data-dir", dir).ok(t)
	if st["count"] != 1.0 {
		t.Fatalf("after restart: %v", st)
	}
}

func TestServeHTTPRefusesUnsafeStarts(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"remote bind", []string{"--bind", "0.0.0.0:0"}, "--bind: not a loopback address"},
		{"remote bind without auth", []string{"--bind", "0.0.0.0:0", "--allow-remote"}, "needs an auth mode"},
		{"bad bind", []string{"--bind", "nowhere"}, "--bind: must be HOST:PORT"},
		{"bad path", []string{"--path", "mcp"}, "--path: must be a literal path"},
		{"a wildcard path", []string{"--path", "/*"}, "--path: must be a literal path"},
		{"a parameter path", []string{"--path", "/:x"}, "--path: must be a literal path"},
		{"a path with a wildcard segment", []string{"--path", "/mcp/*"}, "--path: must be a literal path"},
		{"an empty segment", []string{"--path", "/mcp/"}, "--path: must be a literal path"},
		{"a dot segment", []string{"--path", "/a/../health"}, "--path: must be a literal path"},
		{"the health path", []string{"--path", "/health"}, "--path: must not be /health"},
		{"the ready path", []string{"--path", "/ready"}, "--path: must not be /health"},
		{"the metrics path", []string{"--path", "/metrics"}, "--path: must not be /health"},
		{"a well-known path", []string{"--path", "/.well-known/oauth-protected-resource"}, "--path: must not be /health"},
		{"the well-known folder", []string{"--path", "/.well-known"}, "--path: must not be /health"},
		{"the console path", []string{"--path", "/console"}, "--path: must not be /health"},
		{"under the console", []string{"--path", "/console/mcp"}, "--path: must not be /health"},
		{"a console without an admin credential", []string{"--console"}, "--console: the console signs in with an admin credential"},
		{"zero cap", []string{"--max-inflight", "0"}, "--max-inflight: must be at least 1"},
		{"tiny body", []string{"--max-request-bytes", "10"}, "--max-request-bytes"},
		{"bad origin", []string{"--allow-origin", "evil.example.com"}, "--allow-origin"},
		{"origin with a path", []string{"--allow-origin", "https://app.example.com/x/"}, "--allow-origin"},
		{"origin with a query", []string{"--allow-origin", "https://app.example.com?x"}, "--allow-origin"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := mg(t, env{}, "", append([]string{"serve", "--transport", "http", "--data-dir", t.TempDir()}, c.args...)...)
			r.fails(t, 2, c.want)
			if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 {
				t.Fatalf("want one line, got %q", r.stderr)
			}
		})
	}
}

func TestServeHTTPMetrics(t *testing.T) {
	s := serveHTTP(t, env{}, "--data-dir", t.TempDir(), "--metrics")
	base := strings.TrimSuffix(s.url, "/mcp")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "cmd-test", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A write, which opens (creates) its store: a read of a namespace without one opens nothing.
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "remember", Arguments: map[string]any{"text": "a memory"}}); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader("{}"))
	req.Host = "evil.example.net"
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"http_server_request_duration_seconds", `http_route="/mcp"`, "memgate_http_refusals",
		"memgate_pool_opens", "memgate_http_sessions", "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}

// TestServeHTTPMetricLabelsAreNotTheCallers: 500 requests with Host
// headers, paths and methods of their own add no series to /metrics.
func TestServeHTTPMetricLabelsAreNotTheCallers(t *testing.T) {
	s := serveHTTP(t, env{}, "--data-dir", t.TempDir(), "--metrics")
	base := strings.TrimSuffix(s.url, "/mcp")
	send := func(from, to int) {
		for i := from; i < to; i++ {
			for _, c := range []struct{ method, path, host string }{
				{http.MethodPost, "/mcp", fmt.Sprintf("h%d.example.net:%d", i, 1000+i)},
				{http.MethodGet, fmt.Sprintf("/p%d", i), ""},
				{http.MethodGet, fmt.Sprintf("/mcp/%d", i), fmt.Sprintf("localhost:%d", 1000+i)},
				{fmt.Sprintf("M%d", i), "/mcp", ""},
			} {
				req, err := http.NewRequest(c.method, base+c.path, strings.NewReader("{}"))
				if err != nil {
					t.Fatal(err)
				}
				if c.host != "" {
					req.Host = c.host
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}
	scrape := func() (series int, size int) {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, l := range strings.Split(string(body), "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				series++
			}
		}
		if strings.Contains(string(body), "example.net") || strings.Contains(string(body), `"/p1"`) {
			t.Fatalf("a caller's Host or path is a label:\n%s", body)
		}
		return series, len(body)
	}
	send(0, 20)
	scrape() // the scrape's own series
	series, size := scrape()
	send(20, 520)
	series2, size2 := scrape()
	if series2 != series || size2-size > 4<<10 {
		t.Fatalf("after 500 more requests: %d series and %d bytes, from %d and %d", series2, size2, series, size)
	}
	t.Logf("/metrics: %d series, %d then %d bytes", series, size, size2)
}

// TestServeHTTPSessionGivesEachTokenItsOwnRights: two JWTs of one subject,
// one reading and writing team-a, one reading team-b only. The second, sent
// on the first one's session, has its own rights there.
func TestServeHTTPSessionGivesEachTokenItsOwnRights(t *testing.T) {
	p := newIDP(t)
	s := serveHTTP(t, env{}, "--data-dir", t.TempDir(), "--jwt-issuer", testIss, "--jwt-audience", testAud,
		"--jwt-jwks-file", p.path, "--namespace-strategy", "token", "--namespace-arg")
	strong := p.token(t, "erin", "memory:read memory:write", map[string]any{"memgate_namespace": []string{"team-a"}})
	weak := p.token(t, "erin", "memory:read", map[string]any{"memgate_namespace": []string{"team-b"}})
	post := func(token, session, body string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, _ := post(strong, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || session == "" {
		t.Fatalf("initialize: %d", resp.StatusCode)
	}
	post(strong, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	call := func(token, tool, args string) string {
		_, b := post(token, session, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, args))
		return b
	}
	if b := call(strong, "remember", `{"id":"plan","text":"team-a's plan"}`); !strings.Contains(b, `"created":true`) {
		t.Fatalf("the strong token remembers: %s", b)
	}
	for _, c := range []struct{ tool, args string }{
		{"remember", `{"text":"written with a read-only token"}`},
		{"get", `{"id":"plan","namespace":"team-a"}`},
	} {
		if b := call(weak, c.tool, c.args); !strings.Contains(b, `"code":"forbidden"`) {
			t.Errorf("the weak token's %s on the strong token's session: %s", c.tool, b)
		}
	}
	if b := call(weak, "stats", `{}`); !strings.Contains(b, `"namespace":"team-b"`) {
		t.Errorf("the weak token's stats on the strong token's session: %s", b)
	}
}
