package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/auth"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/gateway"
	"github.com/memgate/memgate/server/message"
	"github.com/memgate/memgate/tenants"
)

// liveGateway is a gateway serving on a real listener on 127.0.0.1.
type liveGateway struct {
	t    *testing.T
	url  string // the MCP endpoint
	base string // scheme and address
	addr string
	pool *tenants.Pool
	stop context.CancelFunc
	done chan error
}

// startGateway serves a server on a fresh pool through a gateway with
// gopts. sopts may set anything but Lease, which is the pool's unless given.
func startGateway(t *testing.T, gopts gateway.Options, sopts server.Options) *liveGateway {
	t.Helper()
	return startGatewayOn(t, newPool(t, 0), gopts, sopts)
}

// startGatewayOn is startGateway on a pool of the caller's.
func startGatewayOn(t *testing.T, pool *tenants.Pool, gopts gateway.Options, sopts server.Options) *liveGateway {
	t.Helper()
	if sopts.Lease == nil {
		sopts.Lease = server.LeaseOf(pool.Lease)
		sopts.LeaseRead = server.LeaseOf(pool.LeaseRead)
	}
	srv, err := server.New(sopts)
	if err != nil {
		t.Fatal(err)
	}
	if gopts.MaxResponseBytes == 0 {
		gopts.MaxResponseBytes = int64(sopts.MaxResponseBytes) // as memgate serve passes it
	}
	gw, err := gateway.New(srv.NewMCP, gopts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	g := &liveGateway{t: t, base: "http://" + ln.Addr().String(), addr: ln.Addr().String(), pool: pool, stop: stop,
		done: make(chan error, 1)}
	g.url = g.base + "/mcp"
	go func() { g.done <- gw.Serve(ctx, ln) }()
	t.Cleanup(func() { g.shutdown() })
	return g
}

// shutdown stops the gateway as a signal would and waits for Serve.
func (g *liveGateway) shutdown() error {
	g.stop()
	select {
	case err := <-g.done:
		g.done <- err
		return err
	case <-time.After(30 * time.Second):
		g.t.Fatal("the gateway did not shut down")
		return nil
	}
}

// rpc is one JSON-RPC POST to the gateway.
type rpc struct {
	body    string
	session string
	version string
	header  map[string]string
}

func (g *liveGateway) post(r rpc) *http.Response {
	g.t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.url, strings.NewReader(r.body))
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if r.session != "" {
		req.Header.Set("Mcp-Session-Id", r.session)
	}
	if r.version != "" {
		req.Header.Set("Mcp-Protocol-Version", r.version)
	}
	for k, v := range r.header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	return resp
}

// status POSTs r and returns the status, closing the body.
func (g *liveGateway) status(r rpc) int {
	g.t.Helper()
	resp := g.post(r)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func initBody(version string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,`+
		`"capabilities":{},"clientInfo":{"name":"gateway-test","version":"1"}}}`, version)
}

// initialize opens a session at revision version and returns its id.
func (g *liveGateway) initialize(version string, header map[string]string) string {
	g.t.Helper()
	resp := g.post(rpc{body: initBody(version), header: header})
	defer resp.Body.Close()
	var res struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if resp.StatusCode != http.StatusOK {
		g.t.Fatalf("initialize %s: %s", version, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || res.Result.ProtocolVersion != version {
		g.t.Fatalf("initialize %s: answered %q (%v)", version, res.Result.ProtocolVersion, err)
	}
	id := resp.Header.Get("Mcp-Session-Id")
	if id == "" {
		g.t.Fatalf("initialize %s: no session id", version)
	}
	if s := g.status(rpc{body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, session: id, version: version, header: header}); s != http.StatusAccepted {
		g.t.Fatalf("initialized: %d", s)
	}
	return id
}

// call calls a tool in a session and returns the structured result.
func (g *liveGateway) call(session, version, tool, args string, header map[string]string) (map[string]any, int) {
	g.t.Helper()
	resp := g.post(rpc{body: fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, args),
		session: session, version: version, header: header})
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode
	}
	var res struct {
		Result struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		g.t.Fatal(err)
	}
	return res.Result.StructuredContent, resp.StatusCode
}

func TestGatewayServesEverySessionRevision(t *testing.T) {
	g := startGateway(t, gateway.Options{}, server.Options{})
	for _, v := range []string{"2025-03-26", "2025-06-18", "2025-11-25"} {
		id := g.initialize(v, nil)
		res, status := g.call(id, v, "remember", `{"text":"kept over `+v+`"}`, nil)
		if status != http.StatusOK || res["created"] != true {
			t.Fatalf("%s: remember answered %d %v", v, status, res)
		}
	}
	res, _ := g.call(g.initialize("2025-11-25", nil), "2025-11-25", "stats", `{}`, nil)
	if res["count"] != 3.0 {
		t.Fatalf("stats after three writes: %v", res)
	}
}

func TestGatewayRoutesTheStatelessRevision(t *testing.T) {
	g := startGateway(t, gateway.Options{}, server.Options{})
	cs := connectHTTP(t, g.url, nil)
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "remember",
		Arguments: map[string]any{"text": "written in a session"}}); err != nil {
		t.Fatal(err)
	}
	// A 2026-07-28 request needs no session; the stateful handler would
	// refuse it.
	resp := g.post(rpc{version: gateway.RevisionStateless, header: map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "stats"},
		body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"stats","arguments":{},"_meta":{` +
			`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
			`"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}`})
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") != "" || !bytes.Contains(body, []byte(`"count":1`)) {
		t.Fatalf("stateless stats: %s %s %s", resp.Status, resp.Header.Get("Mcp-Session-Id"), body)
	}
	// GET has no meaning without sessions.
	req, _ := http.NewRequest(http.MethodGet, g.url, nil)
	req.Header.Set("Mcp-Protocol-Version", gateway.RevisionStateless)
	req.Header.Set("Accept", "text/event-stream")
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("stateless GET: %s", r2.Status)
	}
}

// connectHTTP connects the SDK's streamable client to url, adding header to
// every request.
func connectHTTP(t *testing.T, url string, header http.Header) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: headerTransport{header}}
	client := mcp.NewClient(&mcp.Implementation{Name: "gateway-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type headerTransport struct{ h http.Header }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestGatewayHealthAndReadiness(t *testing.T) {
	notReady := errors.New("disk gone")
	var mu sync.Mutex
	var readyErr error
	g := startGateway(t, gateway.Options{Ready: func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		return readyErr
	}}, server.Options{})
	get := func(path string, host string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, g.base+path, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	// Probes come from anywhere (a kubelet sends the pod's address as Host).
	if s, b := get("/health", "10.1.2.3:8765"); s != 200 || b != "ok" {
		t.Fatalf("/health: %d %q", s, b)
	}
	if s, _ := get("/ready", ""); s != 200 {
		t.Fatalf("/ready: %d", s)
	}
	mu.Lock()
	readyErr = notReady
	mu.Unlock()
	if s, b := get("/ready", ""); s != 503 || strings.Contains(b, "disk") {
		t.Fatalf("/ready with stores that cannot open: %d %q", s, b)
	}
	if s, _ := get("/nowhere", ""); s != 404 {
		t.Fatalf("unknown path: %d", s)
	}
}

func TestGatewayHostAndOrigin(t *testing.T) {
	g := startGateway(t, gateway.Options{AllowHosts: []string{"memory.example.com", "pinned.example.com:9000"},
		AllowOrigins: []string{"https://app.example.com"}}, server.Options{})
	init := initBody("2025-11-25")
	for _, c := range []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"loopback address", nil, 200},
		{"localhost", map[string]string{"Host": "localhost:1234"}, 200},
		{"ipv6 loopback", map[string]string{"Host": "[::1]:1234"}, 200},
		{"rebinding name", map[string]string{"Host": "evil.example.net"}, 403},
		{"rebinding name with port", map[string]string{"Host": "evil.example.net:8765"}, 403},
		{"allowed host, any port", map[string]string{"Host": "memory.example.com:443"}, 200},
		{"allowed host and port", map[string]string{"Host": "pinned.example.com:9000"}, 200},
		{"allowed host, other port", map[string]string{"Host": "pinned.example.com:9001"}, 403},
		{"lookalike", map[string]string{"Host": "localhost.evil.example.net"}, 403},
		{"allowed origin", map[string]string{"Origin": "https://app.example.com"}, 200},
		{"own origin", map[string]string{"Host": "localhost:7000", "Origin": "http://localhost:7000"}, 200},
		{"other site", map[string]string{"Origin": "https://evil.example.net"}, 403},
		{"other loopback port", map[string]string{"Host": "localhost:7000", "Origin": "http://localhost:3000"}, 403},
		{"null origin", map[string]string{"Origin": "null"}, 403},
		{"allowed origin over http", map[string]string{"Origin": "http://app.example.com"}, 403},
	} {
		if got := g.status(rpc{body: init, header: c.header}); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestGatewayBodyBound(t *testing.T) {
	const limit = 4096
	g := startGateway(t, gateway.Options{MaxRequestBytes: limit}, server.Options{})
	id := g.initialize("2025-11-25", nil)
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"stats","arguments":{}}}`
	pad := func(n int) string { return call + strings.Repeat(" ", n-len(call)) }
	if s := g.status(rpc{body: pad(limit), session: id, version: "2025-11-25"}); s != 200 {
		t.Fatalf("a body of exactly the limit: %d", s)
	}
	if s := g.status(rpc{body: pad(limit + 1), session: id, version: "2025-11-25"}); s != 413 {
		t.Fatalf("a body one byte over: %d", s)
	}
	// Without a Content-Length, the bound holds while reading.
	for _, n := range []int{limit, limit + 1} {
		req, _ := http.NewRequest(http.MethodPost, g.url, io.MultiReader(strings.NewReader(pad(n))))
		req.ContentLength = -1
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[bool]int{true: 200, false: 413}[n == limit]; resp.StatusCode != want {
			t.Fatalf("chunked body of %d: %d, want %d", n, resp.StatusCode, want)
		}
	}
}

func TestGatewayHeaderBounds(t *testing.T) {
	g := startGateway(t, gateway.Options{}, server.Options{})
	init := initBody("2025-11-25")
	// http.Client sends Host, User-Agent, Content-Length, Content-Type,
	// Accept and Accept-Encoding: 6 fields.
	fields := func(n int) map[string]string {
		h := map[string]string{}
		for i := 0; i < n-6; i++ {
			h[fmt.Sprintf("X-Pad-%d", i)] = "1"
		}
		return h
	}
	if s := g.status(rpc{body: init, header: fields(gateway.MaxHeaderFields)}); s != 200 {
		t.Fatalf("%d fields: %d", gateway.MaxHeaderFields, s)
	}
	if s := g.status(rpc{body: init, header: fields(gateway.MaxHeaderFields + 1)}); s != 431 {
		t.Fatalf("%d fields: %d", gateway.MaxHeaderFields+1, s)
	}
	// Size: measure the request's header as the gateway counts it, then pad
	// one field to land on the bound and one byte past it.
	base := len("POST /mcp HTTP/1.1\r\n") + len("Host: \r\n") + len(g.addr) +
		len("User-Agent: Go-http-client/1.1\r\n") + len("Content-Length: \r\n") + len(fmt.Sprint(len(init))) +
		len("Content-Type: application/json\r\n") + len("Accept: application/json, text/event-stream\r\n") +
		len("Accept-Encoding: gzip\r\n") + len("X-Pad: \r\n")
	for _, extra := range []int{0, 1} {
		pad := strings.Repeat("a", gateway.MaxHeaderBytes-base+extra)
		want := map[int]int{0: 200, 1: 431}[extra]
		if s := g.status(rpc{body: init, header: map[string]string{"X-Pad": pad}}); s != want {
			t.Fatalf("header of %d bytes: %d, want %d", gateway.MaxHeaderBytes+extra, s, want)
		}
	}
	// Every path is bounded, not the MCP path alone.
	for _, path := range []string{"/health", "/ready", "/nothing-here"} {
		req, _ := http.NewRequest("GET", "http://"+g.addr+path, nil)
		for i := range gateway.MaxHeaderFields + 1 {
			req.Header.Set(fmt.Sprintf("X-Pad-%d", i), "1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 431 {
			t.Fatalf("GET %s with %d fields: %d", path, gateway.MaxHeaderFields+1, resp.StatusCode)
		}
	}
}

// gate is a Lease that holds every call until it is opened.
type gate struct {
	lease   server.Lease
	entered chan struct{}
	open    chan struct{}
}

func newGate(lease server.Lease) *gate {
	return &gate{lease: lease, entered: make(chan struct{}, 1024), open: make(chan struct{})}
}

func (g *gate) Lease(ctx context.Context, ns memgate.Namespace) (server.Store, func(), error) {
	g.entered <- struct{}{}
	<-g.open
	return g.lease(ctx, ns)
}

func TestGatewayInflightCap(t *testing.T) {
	const max = 3
	pool := newPool(t, 0)
	held := newGate(server.LeaseOf(pool.Lease))
	g := startGateway(t, gateway.Options{MaxInflight: max}, server.Options{Lease: held.Lease})
	call := func() int {
		return g.status(rpc{version: gateway.RevisionStateless, header: map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "stats"},
			body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"stats","arguments":{},"_meta":{` +
				`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`})
	}
	results := make(chan int, max)
	for range max {
		go func() { results <- call() }()
	}
	for range max {
		<-held.entered
	}
	// Every slot is held: the next request is refused at once.
	resp := g.post(rpc{body: initBody("2025-11-25")})
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("request %d: %s, Retry-After %q", max+1, resp.Status, resp.Header.Get("Retry-After"))
	}
	close(held.open)
	for range max {
		if s := <-results; s != 200 {
			t.Fatalf("a held request: %d", s)
		}
	}
	if s := call(); s != 200 {
		t.Fatalf("after the slots are free: %d", s)
	}
}

func TestGatewaySessionCap(t *testing.T) {
	const max = 2
	g := startGateway(t, gateway.Options{MaxSessions: max}, server.Options{})
	ids := []string{g.initialize("2025-11-25", nil), g.initialize("2025-06-18", nil)}
	resp := g.post(rpc{body: initBody("2025-11-25")})
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("session %d: %s", max+1, resp.Status)
	}
	// Sessions in use go on; ending one frees its place.
	if _, s := g.call(ids[0], "2025-11-25", "stats", `{}`, nil); s != 200 {
		t.Fatalf("an open session: %d", s)
	}
	req, _ := http.NewRequest(http.MethodDelete, g.url, nil)
	req.Header.Set("Mcp-Session-Id", ids[1])
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	g.initialize("2025-11-25", nil)
}

func TestGatewaySessionIdleExpiry(t *testing.T) {
	g := startGateway(t, gateway.Options{MaxSessions: 1, SessionIdle: 200 * time.Millisecond}, server.Options{})
	id := g.initialize("2025-11-25", nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, s := g.call(id, "2025-11-25", "stats", `{}`, nil)
		if s == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an idle session was never reaped")
		}
		time.Sleep(300 * time.Millisecond)
	}
	g.initialize("2025-11-25", nil) // its place is free again
}

func TestGatewayStreamCap(t *testing.T) {
	const max = 2
	g := startGateway(t, gateway.Options{MaxStreams: max}, server.Options{})
	// A session has at most one stream of its own: each stream opens one.
	var id string
	open := func() *http.Response {
		id = g.initialize("2025-11-25", nil)
		req, _ := http.NewRequest(http.MethodGet, g.url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var streams []*http.Response
	for range max {
		r := open()
		if r.StatusCode != 200 {
			t.Fatalf("a stream within the cap: %s", r.Status)
		}
		streams = append(streams, r)
	}
	if r := open(); r.StatusCode != 503 {
		t.Fatalf("stream %d: %s", max+1, r.Status)
	} else {
		r.Body.Close()
	}
	// Streams do not take the places of requests.
	if _, s := g.call(id, "2025-11-25", "stats", `{}`, nil); s != 200 {
		t.Fatalf("a call beside the streams: %d", s)
	}
	streams[0].Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := open()
		r.Body.Close()
		if r.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed stream's place never came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	streams[1].Body.Close()
}

func TestGatewayConnectionCap(t *testing.T) {
	const max = 4
	g := startGateway(t, gateway.Options{MaxConnections: max, ReadHeaderTimeout: 300 * time.Millisecond}, server.Options{})
	// max connections that send nothing hold every slot...
	var held []net.Conn
	for range max {
		c, err := net.Dial("tcp", g.addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	time.Sleep(50 * time.Millisecond) // let the server accept them
	// ...so one more is closed before anything is read from it.
	// (It may be reset while it is still connecting.)
	if c, err := net.Dial("tcp", g.addr); err == nil {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
		if n, err := c.Read(make([]byte, 1)); err == nil || n > 0 {
			t.Fatalf("connection %d was served", max+1)
		}
		c.Close()
	}
	// The header timeout frees the held slots; a normal client is served.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(g.base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("half-open connections kept their slots")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range held {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			// The server answered 408 before closing: read until EOF.
			io.Copy(io.Discard, c)
		}
		c.Close()
	}
}

// staticAuth is a test Authenticator: a token names a principal.
type staticAuth map[string]*memgate.Principal

type refusal struct {
	status    int
	challenge string
}

func (r refusal) Error() string     { return "refused" }
func (r refusal) Status() int       { return r.status }
func (r refusal) Challenge() string { return r.challenge }

func (a staticAuth) Authenticate(r *http.Request) (*memgate.Principal, time.Time, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, time.Time{}, refusal{401, `Bearer realm="memgate"`}
	}
	if h == "Bearer scopeless" {
		return nil, time.Time{}, refusal{403, `Bearer error="insufficient_scope", scope="memory:read"`}
	}
	if h == "Bearer broken" {
		return nil, time.Time{}, errors.New("identity service exploded")
	}
	p, ok := a[strings.TrimPrefix(h, "Bearer ")]
	if !ok {
		return nil, time.Time{}, refusal{401, `Bearer error="invalid_token"`}
	}
	return p, time.Now().Add(time.Hour), nil
}

func TestGatewayAuthentication(t *testing.T) {
	users := staticAuth{
		"alice-token": {Subject: "alice", Namespace: "alice", Namespaces: []string{"alice"}, Scopes: []string{"memory:read", "memory:write"}},
		"bob-token":   {Subject: "bob", Namespace: "bob", Namespaces: []string{"bob"}, Scopes: []string{"memory:read"}},
	}
	r := &tenants.Resolver{Strategy: tenants.Token}
	g := startGateway(t, gateway.Options{Auth: users}, server.Options{Resolve: r.Resolve, WriteScope: "memory:write"})
	init := initBody("2025-11-25")
	for _, c := range []struct {
		name, auth, challenge string
		want                  int
	}{
		{"no credential", "", `Bearer realm="memgate"`, 401},
		{"bad token", "Bearer nope", `Bearer error="invalid_token"`, 401},
		{"missing scope", "Bearer scopeless", `Bearer error="insufficient_scope", scope="memory:read"`, 403},
		{"not a refusal", "Bearer broken", `Bearer error="invalid_token"`, 401},
	} {
		resp := g.post(rpc{body: init, header: map[string]string{"Authorization": c.auth}})
		resp.Body.Close()
		if resp.StatusCode != c.want || resp.Header.Get("WWW-Authenticate") != c.challenge {
			t.Errorf("%s: %d %q, want %d %q", c.name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), c.want, c.challenge)
		}
	}
	alice := map[string]string{"Authorization": "Bearer alice-token"}
	bob := map[string]string{"Authorization": "Bearer bob-token"}
	id := g.initialize("2025-11-25", alice)
	if res, s := g.call(id, "2025-11-25", "remember", `{"text":"alice's note"}`, alice); s != 200 || res["created"] != true {
		t.Fatalf("alice remembers: %d %v", s, res)
	}
	// Bob cannot use Alice's session.
	if _, s := g.call(id, "2025-11-25", "stats", `{}`, bob); s != http.StatusForbidden {
		t.Fatalf("bob in alice's session: %d", s)
	}
	// Bob's own session sees his namespace only, and he may not write.
	bid := g.initialize("2025-11-25", bob)
	if res, _ := g.call(bid, "2025-11-25", "stats", `{}`, bob); res["count"] != 0.0 || res["namespace"] != "bob" {
		t.Fatalf("bob's stats: %v", res)
	}
	if res, _ := g.call(bid, "2025-11-25", "remember", `{"text":"bob's note"}`, bob); res["error"] == nil {
		t.Fatalf("bob wrote without the write scope: %v", res)
	}
}

func TestGatewayShutdownKeepsAcknowledgedWrites(t *testing.T) {
	dir := t.TempDir()
	pool, err := tenants.NewPool(tenants.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	g := startGatewayOn(t, pool, gateway.Options{ShutdownGrace: 10 * time.Second}, server.Options{})
	id := g.initialize("2025-11-25", nil)

	// Writers run until the gateway refuses them; each counts what it saw
	// acknowledged.
	var acked sync.Map
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"remember","arguments":{"id":"w%d-%d","text":"note %d of writer %d"}}}`, w, i, i, w)
				req, _ := http.NewRequest(http.MethodPost, g.url, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Session-Id", id)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					return
				}
				if bytes.Contains(b, []byte(`"created":true`)) {
					acked.Store(fmt.Sprintf("w%d-%d", w, i), true)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	if err := g.shutdown(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	wg.Wait()
	if err := pool.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Reopen the data and count.
	reopened, err := tenants.NewPool(tenants.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close(context.Background())
	st, release, err := reopened.Lease(context.Background(), memgate.DefaultNamespace)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	n := 0
	acked.Range(func(k, _ any) bool {
		n++
		if _, err := st.Get(context.Background(), k.(string)); err != nil {
			t.Errorf("an acknowledged write is gone: %v", err)
		}
		return true
	})
	if n == 0 {
		t.Fatal("no write was acknowledged before the shutdown")
	}
}

func TestGatewayShutdownEndsStreams(t *testing.T) {
	// A stream left open would hold the shutdown for the whole grace.
	g := startGateway(t, gateway.Options{ShutdownGrace: time.Minute}, server.Options{})
	id := g.initialize("2025-11-25", nil)
	req, _ := http.NewRequest(http.MethodGet, g.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ended := make(chan struct{})
	go func() {
		bufio.NewReader(resp.Body).WriteTo(io.Discard)
		close(ended)
	}()
	g.stop()
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("an SSE stream outlived the shutdown")
	}
	if err := g.shutdown(); err != nil {
		t.Fatal(err)
	}
}

func TestGatewayRequestDeadline(t *testing.T) {
	pool := newPool(t, 0)
	held := newGate(server.LeaseOf(pool.Lease))
	t.Cleanup(func() { close(held.open) }) // after the gateway has stopped
	g := startGateway(t, gateway.Options{RequestTimeout: 300 * time.Millisecond, ShutdownGrace: time.Second},
		server.Options{Lease: held.Lease})
	id := g.initialize("2025-11-25", nil)
	resp := g.post(rpc{body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"stats","arguments":{}}}`,
		session: id, version: "2025-11-25"})
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a call past its deadline: %s", resp.Status)
	}
	// Streams are not held to it.
	req, _ := http.NewRequest(http.MethodGet, g.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", g.initialize("2025-11-25", nil))
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	read := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, stream.Body)
		read <- err
	}()
	select {
	case err := <-read:
		t.Fatalf("a stream ended by the request deadline (%v)", err)
	case <-time.After(time.Second):
	}
}

func TestGatewayRequestsOutsideASession(t *testing.T) {
	g := startGateway(t, gateway.Options{}, server.Options{})
	list := `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`
	// A session revision needs a session for anything but initialize.
	for _, v := range []string{"", "2025-06-18", "2025-11-25"} {
		if s := g.status(rpc{body: list, version: v}); s != http.StatusBadRequest {
			t.Errorf("tools/list without a session at %q: %d", v, s)
		}
	}
	// A version memgate does not speak is refused, wherever it would sort:
	// a session revision's date by the stateful handler, anything else in
	// the stateless form, which lists the supported versions.
	for _, v := range []string{"2025-13-45", "bogus", "v999.0.0", "9999-99-99x"} {
		resp := g.post(rpc{version: v, session: "any", header: map[string]string{"Mcp-Method": "server/discover"},
			body: `{"jsonrpc":"2.0","id":9,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + v +
				`","io.modelcontextprotocol/clientCapabilities":{}}}}`})
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(strings.ToLower(string(b)), "unsupported") {
			t.Errorf("version %q: %d %s", v, resp.StatusCode, b)
		}
	}
}

func TestGatewayRefusesAStrangerBeforeReadingItsBody(t *testing.T) {
	users := staticAuth{"alice-token": {Subject: "alice", Scopes: []string{"memory:read"}}}
	g := startGateway(t, gateway.Options{Auth: users, RequestTimeout: time.Minute}, server.Options{})
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A body announced and never sent: only a refusal from the header alone
	// can answer before the request timeout.
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{")
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 401 ") {
		t.Fatalf("a stranger's unsent body: %q %v", line, err)
	}
}

func TestGatewayClosesAConnectionPastItsLifetime(t *testing.T) {
	g := startGateway(t, gateway.Options{ConnLifetime: 300 * time.Millisecond}, server.Options{})
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	ask := func() *http.Response {
		body := initBody("2025-11-25")
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"+
			"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	// A young connection stays open for the next request...
	if resp := ask(); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("a young connection: %s, close %v", resp.Status, resp.Close)
	}
	time.Sleep(500 * time.Millisecond)
	// ...an old one is answered, then closed.
	if resp := ask(); resp.StatusCode != 200 || !resp.Close {
		t.Fatalf("an old connection: %s, close %v", resp.Status, resp.Close)
	}
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("the old connection stayed open: %v", err)
	}
}

// TestGatewayAuthorizesEveryRequestWithItsOwnToken: a session binds its
// subject, not the rights of the token that opened it. Another token of the
// same subject gets its own rights on that session, and a token revoked in
// the tokens file loses the session at once.
func TestGatewayAuthorizesEveryRequestWithItsOwnToken(t *testing.T) {
	const tokenA, tokenB = "token-a-0123456789abcdef", "token-b-0123456789abcdef"
	file := filepath.Join(t.TempDir(), "tokens.jsonl")
	line := func(token, ns string, scopes string) string {
		sum := sha256.Sum256([]byte(token))
		return fmt.Sprintf(`{"sha256":%q,"subject":"carol","namespaces":[%q],"scopes":%s}`, hex.EncodeToString(sum[:]), ns, scopes)
	}
	write := func(lines ...string) {
		if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(line(tokenA, "x", `["memory:read","memory:write"]`), line(tokenB, "y", `["memory:read"]`))
	static, err := auth.NewStaticTokens(auth.StaticOptions{File: file, ReloadEvery: time.Nanosecond,
		AllScopes: []string{"memory:read", "memory:write"}})
	if err != nil {
		t.Fatal(err)
	}
	authn, err := auth.New(auth.Options{Static: static, ReadScope: "memory:read", WriteScope: "memory:write"})
	if err != nil {
		t.Fatal(err)
	}
	r := &tenants.Resolver{Strategy: tenants.Token, AllowArg: true}
	g := startGateway(t, gateway.Options{Auth: authn},
		server.Options{Resolve: r.Resolve, NamespaceArg: true, WriteScope: "memory:write"})
	a := map[string]string{"Authorization": "Bearer " + tokenA}
	b := map[string]string{"Authorization": "Bearer " + tokenB}

	const v = "2025-11-25"
	id := g.initialize(v, a)
	if res, s := g.call(id, v, "remember", `{"text":"carol's plan","id":"plan"}`, a); s != 200 || res["created"] != true {
		t.Fatalf("token A remembers in x: %d %v", s, res)
	}
	for _, c := range []struct{ tool, args, want string }{
		{"remember", `{"text":"written with a read-only token"}`, "forbidden"},
		{"forget", `{"id":"plan","namespace":"y"}`, "forbidden"},
		{"get", `{"id":"plan","namespace":"x"}`, "forbidden"},
		{"search", `{"query":"plan","namespace":"x"}`, "forbidden"},
		{"stats", `{}`, ""},
	} {
		res, s := g.call(id, v, c.tool, c.args, b)
		if s != 200 {
			t.Fatalf("token B %s on A's session: HTTP %d", c.tool, s)
		}
		code := ""
		if e, ok := res["error"].(map[string]any); ok {
			code, _ = e["code"].(string)
		}
		if code != c.want {
			t.Errorf("token B %s %s on A's session: code %q, want %q (%v)", c.tool, c.args, code, c.want, res)
		}
		if c.tool == "stats" && res["namespace"] != "y" {
			t.Errorf("token B's stats on A's session name %v, want y", res["namespace"])
		}
	}
	// Narrowed: A loses the write scope on its live session.
	write(line(tokenA, "x", `["memory:read"]`), line(tokenB, "y", `["memory:read"]`))
	if res, _ := g.call(id, v, "remember", `{"text":"after narrowing"}`, a); res["error"] == nil {
		t.Fatalf("a narrowed token still writes: %v", res)
	}
	if res, s := g.call(id, v, "get", `{"id":"plan"}`, a); s != 200 || res["memory"] == nil {
		t.Fatalf("a narrowed token lost its read: %d %v", s, res)
	}
	// Revoked: A's next request is refused.
	write(line(tokenB, "y", `["memory:read"]`))
	if _, s := g.call(id, v, "get", `{"id":"plan"}`, a); s != http.StatusUnauthorized {
		t.Fatalf("a revoked token on its live session: HTTP %d, want 401", s)
	}
}

// batch POSTs a JSON-RPC batch in session id and returns the status and body.
func (g *liveGateway) batch(session string, msgs []string) (int, []byte) {
	g.t.Helper()
	return g.batchAs(session, "2025-03-26", msgs)
}

// batchAs is batch with the protocol version header version ("": none).
func (g *liveGateway) batchAs(session, version string, msgs []string) (int, []byte) {
	g.t.Helper()
	resp := g.post(rpc{body: "[" + strings.Join(msgs, ",") + "]", session: session, version: version})
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		g.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// Every batch the SDK would serve is screened: the header of 2025-03-26,
// none (which the SDK takes for it), and the revision before it, which the
// SDK serves batches of as well.
func TestGatewayBatchHoldsAtMost32Messages(t *testing.T) {
	for _, v := range []string{"2025-03-26", "", "2024-11-05"} {
		t.Run("version "+v, func(t *testing.T) { batchHoldsAtMost32Messages(t, v) })
	}
}

func batchHoldsAtMost32Messages(t *testing.T, version string) {
	g := startGateway(t, gateway.Options{}, server.Options{})
	id := g.initialize("2025-03-26", nil)
	pings := func(n int) []string {
		msgs := make([]string, n)
		for i := range msgs {
			msgs[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)
		}
		return msgs
	}
	status, body := g.batchAs(id, version, pings(message.MaxBatch))
	var answers []struct {
		ID     int64           `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &answers); status != 200 || err != nil || len(answers) != message.MaxBatch {
		t.Fatalf("a batch of %d: %d, %d answers (%v) %s", message.MaxBatch, status, len(answers), err, body)
	}
	status, body = g.batchAs(id, version, pings(message.MaxBatch+1))
	if status != http.StatusBadRequest || !strings.Contains(string(body), `"code":-32600`) || !strings.Contains(string(body), "at most 32") {
		t.Fatalf("a batch of %d: %d %s", message.MaxBatch+1, status, body)
	}
	// A batch that holds initialize, or a malformed message, is refused whole.
	for name, msgs := range map[string][]string{
		"initialize":                 {strings.Replace(initBody("2025-03-26"), `"id":1`, `"id":"i"`, 1)},
		"a malformed message":        {`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":2,"Method":"ping"}`},
		"an id given twice":          {`{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`},
		"an id of 1.5":               {`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`},
		"a message with params null": {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`},
		"two calls of one id":        {`{"jsonrpc":"2.0","id":7,"method":"ping"}`, `{"jsonrpc":"2.0","id":7,"method":"ping"}`},
		"two calls of one string id": {`{"jsonrpc":"2.0","id":"a","method":"ping"}`, `{"jsonrpc":"2.0","id":"\u0061","method":"ping"}`},
	} {
		if status, body := g.batchAs(id, version, msgs); status != http.StatusBadRequest || !strings.Contains(string(body), `"code":-32600`) {
			t.Errorf("a batch with %s: %d %s", name, status, body)
		}
	}
	// Notifications alone are accepted without an answer; the ids 7 and
	// "7" are two ids.
	if status, body := g.batchAs(id, version, []string{`{"jsonrpc":"2.0","method":"notifications/initialized"}`}); status != http.StatusAccepted || len(body) != 0 {
		t.Fatalf("a batch of notifications: %d %s", status, body)
	}
	if status, body := g.batchAs(id, version, []string{`{"jsonrpc":"2.0","id":7,"method":"ping"}`, `{"jsonrpc":"2.0","id":"7","method":"ping"}`}); status != 200 {
		t.Fatalf("a batch of the ids 7 and \"7\": %d %s", status, body)
	}
}

// A batch in a session of a revision without batches is refused in JSON,
// as memgate's other refusals are, not in the SDK's plain text.
func TestGatewayRefusesABatchOfALaterRevisionInJSON(t *testing.T) {
	g := startGateway(t, gateway.Options{}, server.Options{})
	for _, v := range []string{"2025-06-18", "2025-11-25"} {
		id := g.initialize(v, nil)
		status, body := g.batchAs(id, v, []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`})
		if status != http.StatusBadRequest || !strings.Contains(string(body), `"code":-32600`) || !strings.Contains(string(body), "2025-06-18 and later") {
			t.Errorf("%s: %d %s", v, status, body)
		}
	}
}

// TestGatewayBatchAnswersCountTogether: a batch's answers together are
// bounded by MaxResponseBytes: at the size of its answers it is served, one
// byte below it refused.
func TestGatewayBatchAnswersCountTogether(t *testing.T) {
	pool := newPool(t, 0)
	seed := startGatewayOn(t, pool, gateway.Options{}, server.Options{})
	sid := seed.initialize("2025-11-25", nil)
	for i := range 20 {
		if res, s := seed.call(sid, "2025-11-25", "remember", fmt.Sprintf(`{"id":"m%d","text":%q}`, i, strings.Repeat("x", 2000)), nil); s != 200 || res["created"] != true {
			t.Fatalf("remember: %d %v", s, res)
		}
	}
	lists := make([]string, 25)
	for i := range lists {
		lists[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"list","arguments":{}}}`, i)
	}
	big := startGatewayOn(t, pool, gateway.Options{MaxResponseBytes: 64 << 20}, server.Options{})
	status, body := big.batch(big.initialize("2025-03-26", nil), lists)
	if status != 200 || !json.Valid(body) || len(body) < 25*20*2000 {
		t.Fatalf("25 lists under a large bound: %d, %d bytes", status, len(body))
	}
	size := int64(len(body))
	at := startGatewayOn(t, pool, gateway.Options{MaxResponseBytes: size}, server.Options{})
	if status, got := at.batch(at.initialize("2025-03-26", nil), lists); status != 200 || int64(len(got)) != size {
		t.Fatalf("25 lists at a bound of their size: %d, %d bytes of %d", status, len(got), size)
	}
	// One byte less: the last answer does not fit. Its call ran and says
	// so; every answer is in the array, and the array within the bound.
	below := startGatewayOn(t, pool, gateway.Options{MaxResponseBytes: size - 1}, server.Options{})
	status, got := below.batch(below.initialize("2025-03-26", nil), lists)
	codes := batchCodes(t, got)
	if status != 200 || int64(len(got)) > size-1 || len(codes) != 25 || codes[24] != -32000 || codes[23] != 0 {
		t.Fatalf("25 lists one byte past the bound: %d, %d bytes, codes %v", status, len(got), codes)
	}
	if !strings.Contains(string(got), "the call ran") {
		t.Fatalf("the call past the bound does not say it ran: %.300s", got[len(got)-300:])
	}
	// A bound that holds a few answers: the calls after the first that
	// does not fit are not run, each answered by its own error.
	few := startGatewayOn(t, pool, gateway.Options{MaxResponseBytes: size / 10}, server.Options{})
	mixed := append([]string{
		`{"jsonrpc":"2.0","id":"w","method":"tools/call","params":{"name":"remember","arguments":{"id":"w","text":"before"}}}`},
		lists...)
	mixed = append(mixed, `{"jsonrpc":"2.0","id":"late","method":"tools/call","params":{"name":"remember","arguments":{"id":"late","text":"never"}}}`)
	status, got = few.batch(few.initialize("2025-03-26", nil), mixed)
	codes = batchCodes(t, got)
	ran := 0
	for ran < len(codes) && codes[ran] == 0 {
		ran++
	}
	if status != 200 || int64(len(got)) > size/10 || len(codes) != len(mixed) || ran < 2 || codes[ran] != -32000 ||
		!strings.Contains(string(got), "not run") {
		t.Fatalf("a batch past a small bound: %d, %d bytes, codes %v", status, len(got), codes)
	}
	sid = few.initialize("2025-11-25", nil)
	if res, _ := few.call(sid, "2025-11-25", "get", `{"id":"w"}`, nil); res["memory"] == nil {
		t.Fatalf("the write before the bound did not run: %v", res)
	}
	if res, _ := few.call(sid, "2025-11-25", "get", `{"id":"late"}`, nil); res["memory"] != nil {
		t.Fatalf("the write after the bound ran: %v", res)
	}
}

// A batch holding a call without an id is refused whole, before any of
// its messages runs (the SDK would refuse it after the calls before it).
func TestGatewayBatchWithACallWithoutAnIDRunsNothing(t *testing.T) {
	g := startGateway(t, gateway.Options{}, server.Options{})
	sid := g.initialize("2025-03-26", nil)
	status, body := g.batch(sid, []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"remember","arguments":{"id":"nb1","text":"x"}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"stats","arguments":{}}}`,
	})
	if status != http.StatusBadRequest || !strings.Contains(string(body), `"code":-32600`) {
		t.Fatalf("a batch with a null-id call: %d %s", status, body)
	}
	sid = g.initialize("2025-11-25", nil)
	if res, _ := g.call(sid, "2025-11-25", "get", `{"id":"nb1"}`, nil); res["memory"] != nil {
		t.Fatalf("a call of the refused batch ran: %v", res)
	}
}

// batchCodes returns the error code of each answer of a batch's array (0
// for a result).
func batchCodes(t *testing.T, body []byte) []int64 {
	t.Helper()
	var answers []struct {
		Error *struct {
			Code int64 `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &answers); err != nil {
		t.Fatalf("a batch answer that is not an array: %v %.200s", err, body)
	}
	codes := make([]int64, len(answers))
	for i, a := range answers {
		if a.Error != nil {
			codes[i] = a.Error.Code
		}
	}
	return codes
}

// TestGatewayAnswersMalformedMessagesInJSON: what the SDK would answer in
// plain text, drop with a 202, or answer under a changed id, the gateway
// refuses with a JSON-RPC error in JSON, in a session and statelessly.
func TestGatewayAnswersMalformedMessagesInJSON(t *testing.T) {
	g := startGateway(t, gateway.Options{}, server.Options{})
	id := g.initialize("2025-11-25", nil)
	for _, c := range []struct {
		name, body string
		code       int64
		id         string
	}{
		{"params null on tools/call", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":null}`, -32602, "3"},
		{"no params on tools/call", `{"jsonrpc":"2.0","id":4,"method":"tools/call"}`, -32602, "4"},
		{"params null on resources/read", `{"jsonrpc":"2.0","id":5,"method":"resources/read","params":null}`, -32602, "5"},
		{"Method for method", `{"jsonrpc":"2.0","id":6,"Method":"tools/call","params":{"name":"stats"}}`, -32600, "6"},
		{"ID beside id", `{"jsonrpc":"2.0","id":7,"ID":8,"method":"ping"}`, -32600, "7"},
		{"a key twice", `{"jsonrpc":"2.0","id":9,"method":"ping","method":"tools/call"}`, -32600, "null"},
		{"a fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, -32600, "null"},
		{"a call with a null id", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"stats"}}`, -32600, "null"},
		{"a call without an id", `{"jsonrpc":"2.0","method":"ping"}`, -32600, "null"},
		{"an id past int64", `{"jsonrpc":"2.0","id":9223372036854775808,"method":"ping"}`, -32600, "null"},
		{"an id past 2^53", `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, -32600, "null"},
	} {
		for _, v := range []string{"2025-11-25", gateway.RevisionStateless} {
			session := id
			if v == gateway.RevisionStateless {
				session = ""
			}
			resp := g.post(rpc{body: c.body, session: session, version: v})
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var m struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Code int64 `json:"code"`
				} `json:"error"`
			}
			err := json.Unmarshal(b, &m)
			gotID := string(m.ID)
			if gotID == "" {
				gotID = "null"
			}
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/json" || err != nil ||
				m.Error.Code != c.code || gotID != c.id {
				t.Errorf("%s (%s): %d %s %s, want 400 with %d for id %s", c.name, v, resp.StatusCode, resp.Header.Get("Content-Type"), b, c.code, c.id)
			}
		}
	}
	// The largest exact id comes back unchanged.
	resp := g.post(rpc{body: `{"jsonrpc":"2.0","id":9007199254740992,"method":"ping"}`, session: id, version: "2025-11-25"})
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"id":9007199254740992`) {
		t.Fatalf("ping with id 2^53: %d %s", resp.StatusCode, b)
	}
}

// stubborn is a store whose searches run past their request's deadline:
// each waits for its context to end, says so, and returns only when let go.
type stubborn struct {
	server.Store
	started chan struct{}
	stopped chan error // the context's end, as the search saw it
	letGo   chan struct{}
}

func (s *stubborn) Search(ctx context.Context, q memgate.Query) (memgate.Result, error) {
	s.started <- struct{}{}
	<-ctx.Done()
	s.stopped <- ctx.Err()
	<-s.letGo
	return memgate.Result{}, &memgate.Error{Code: memgate.CodeUnavailable, Message: "the request timed out or was cancelled", Cause: ctx.Err()}
}

// A request past its deadline stops its work, and its in-flight slot stays
// held until the work has returned, whichever revision it speaks.
func TestGatewayTimeoutStopsTheWorkAndHoldsTheSlot(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		t.Run(fmt.Sprint("stateless ", stateless), func(t *testing.T) {
			pool := newPool(t, 0)
			st := &stubborn{started: make(chan struct{}, 1), stopped: make(chan error, 1), letGo: make(chan struct{})}
			var once sync.Once
			letGo := func() { once.Do(func() { close(st.letGo) }) }
			t.Cleanup(letGo)
			lease := func(ctx context.Context, ns memgate.Namespace) (server.Store, func(), error) {
				s, release, err := pool.Lease(ctx, ns)
				if err != nil {
					return nil, nil, err
				}
				st.Store = s
				return st, release, nil
			}
			g := startGateway(t, gateway.Options{MaxInflight: 1, RequestTimeout: 200 * time.Millisecond},
				server.Options{Lease: lease})
			search := rpc{body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search","arguments":{"query":"x"}}}`}
			if stateless {
				search = rpc{version: gateway.RevisionStateless, header: map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "search"},
					body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search","arguments":{"query":"x"},"_meta":{` +
						`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`}
			} else {
				search.session, search.version = g.initialize("2025-11-25", nil), "2025-11-25"
			}
			type answer struct {
				status      int
				contentType string
				body        string
			}
			first := make(chan answer, 1)
			go func() {
				resp := g.post(search)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				first <- answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(body)}
			}()
			<-st.started
			// The deadline reaches the search.
			if err := <-st.stopped; !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the search's context ended with %v", err)
			}
			// Its work still runs: the slot is still held.
			stats := rpc{body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"stats","arguments":{}}}`,
				session: search.session, version: search.version}
			if stateless {
				stats = rpc{version: gateway.RevisionStateless, header: map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "stats"},
					body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"stats","arguments":{},"_meta":{` +
						`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`}
			}
			if s := g.status(stats); s != http.StatusServiceUnavailable {
				t.Fatalf("a request while the timed-out work runs: %d", s)
			}
			letGo()
			// It is answered 503, or, when the SDK waited for the call, with
			// the call's own unavailable error.
			a := <-first
			if a.status != http.StatusServiceUnavailable &&
				(a.status != http.StatusOK || !strings.Contains(a.body, `unavailable`)) {
				t.Fatalf("the timed-out request: %d %s", a.status, a.body)
			}
			// A 503 in plain text says so, whatever the handler had set.
			if a.status == http.StatusServiceUnavailable && !strings.HasPrefix(a.contentType, "text/plain") {
				t.Fatalf("the timed-out request's 503 is labelled %q: %q", a.contentType, a.body)
			}
			// Once the work has returned, the slot is free again.
			for i := 0; ; i++ {
				s := g.status(stats)
				if s == http.StatusOK {
					break
				}
				if s != http.StatusServiceUnavailable || i == 1000 {
					t.Fatalf("after the work returned: %d", s)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

func TestGatewayPathIsALiteralOfItsOwn(t *testing.T) {
	srv, err := server.New(server.Options{Lease: server.LeaseOf(newPool(t, 0).Lease)})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/mcp", "/api/v1/memory", "/a.b_c~-", "/healthz", "/metrics2"} {
		if _, err := gateway.New(srv.NewMCP, gateway.Options{Path: p}); err != nil {
			t.Errorf("path %q refused: %v", p, err)
		}
	}
	for _, p := range []string{"mcp", "/", "/*", "/:x", "/mcp/*", "/mcp/:id", "/mcp/", "//mcp", "/a/../b", "/./mcp", "/m cp", "/mcp?x",
		"/health", "/ready", "/metrics", "/.well-known", "/.well-known/oauth-protected-resource", "/.well-known/x"} {
		if _, err := gateway.New(srv.NewMCP, gateway.Options{Path: p}); err == nil {
			t.Errorf("path %q accepted", p)
		}
	}
}

// TestGatewayGuardsItsExtraRoutes: the protected-resource metadata is served
// behind the Host and Origin guard, so no Host of a caller's choosing is
// ever stated in it.
func TestGatewayGuardsItsExtraRoutes(t *testing.T) {
	doc := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, `{"resource":"http://%s/mcp"}`, r.Host) })
	g := startGateway(t, gateway.Options{Routes: map[string]http.Handler{"/.well-known/oauth-protected-resource/mcp": doc}}, server.Options{})
	get := func(host, origin string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, g.base+"/.well-known/oauth-protected-resource/mcp", nil)
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if s, b := get(g.addr, ""); s != 200 || !strings.Contains(b, g.addr) {
		t.Fatalf("from the gateway's own host: %d %s", s, b)
	}
	if s, b := get("evil.example.net", ""); s != http.StatusForbidden || strings.Contains(b, "evil") {
		t.Fatalf("from another host: %d %s", s, b)
	}
	if s, _ := get(g.addr, "https://evil.example.net"); s != http.StatusForbidden {
		t.Fatalf("from another origin: %d", s)
	}
	srv, _ := server.New(server.Options{Lease: server.LeaseOf(newPool(t, 0).Lease)})
	if _, err := gateway.New(srv.NewMCP, gateway.Options{Routes: map[string]http.Handler{"/health": doc}}); err == nil {
		t.Fatal("an extra route replaced /health")
	}
}

// TestGatewayAnswersAsTheSDKEncodes: a tool's answer over HTTP, which the
// gateway encodes once and puts in place of the SDK's placeholder, is byte
// for byte what the SDK writes (json.Marshal of the result in the JSON-RPC
// answer), in every revision, alone and in a batch; a 2026-07-28 answer,
// which carries the resultType the SDK sets, goes through the SDK.
func TestGatewayAnswersAsTheSDKEncodes(t *testing.T) {
	pool := newPool(t, 0)
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease)})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := srv.Call(t.Context(), "remember", json.RawMessage(`{"id":"m1","text":"deploy <pipeline> & \"staging\"\n\u2028 é","tags":["x-y"],"metadata":{"k":"<v> &"}}`)); err != nil || res.IsError {
		t.Fatal(err, res.StructuredContent)
	}
	g := startGatewayOn(t, pool, gateway.Options{}, server.Options{})
	calls := []string{`{"query":"deploy staging","limit":10}`, `{"query":""}`}
	want := func(id int, args string) string {
		res, err := srv.Call(t.Context(), "search", json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":%s}`, id, b)
	}
	callBody := func(id int, args string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"search","arguments":%s}}`, id, args)
	}
	read := func(r rpc) string {
		t.Helper()
		resp := g.post(r)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %v %s", resp.Status, err, b)
		}
		return strings.TrimSpace(string(b))
	}
	for _, revision := range []string{"2025-03-26", "2025-06-18", "2025-11-25"} {
		t.Run(revision, func(t *testing.T) {
			sid := g.initialize(revision, nil)
			for i, args := range calls {
				got := read(rpc{body: callBody(i+2, args), session: sid, version: revision})
				if i == 0 && !strings.Contains(got, `"hits":[{`) {
					t.Fatalf("the search found nothing: %s", got)
				}
				if w := want(i+2, args); got != w {
					t.Errorf("call %d:\n got %s\nwant %s", i, got, w)
				}
			}
			if revision != "2025-03-26" {
				return
			}
			got := read(rpc{body: "[" + callBody(7, calls[0]) + `,{"jsonrpc":"2.0","id":8,"method":"ping"},` + callBody(9, calls[1]) + "]",
				session: sid, version: revision})
			if w := "[" + want(7, calls[0]) + `,{"jsonrpc":"2.0","id":8,"result":{}},` + want(9, calls[1]) + "]"; got != w {
				t.Errorf("batch:\n got %s\nwant %s", got, w)
			}
		})
	}
	t.Run(gateway.RevisionStateless, func(t *testing.T) {
		got := read(rpc{version: gateway.RevisionStateless, header: map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "search"},
			body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search","arguments":` + calls[0] + `,"_meta":{` +
				`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
				`"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}`})
		// The SDK's own encoding, with the _meta (and resultType) it sets.
		sdk := regexp.MustCompile(`"_meta":\{"io\.modelcontextprotocol/serverInfo":\{[^}]*\}\},|,"resultType":"complete"`)
		if !strings.Contains(got, `"io.modelcontextprotocol/serverInfo"`) {
			t.Errorf("not the SDK's encoding: %s", got)
		}
		if got, w := sdk.ReplaceAllString(got, ""), want(2, calls[0]); got != w {
			t.Errorf("\n got %s\nwant %s", got, w)
		}
	})
}

// A batch whose MCP-Protocol-Version is no revision at all is refused in
// JSON with a fixed message, which does not quote the header.
func TestGatewayRefusesABatchOfNoRevisionWithoutQuotingIt(t *testing.T) {
	g := startGateway(t, gateway.Options{}, server.Options{})
	for _, v := range []string{"zzz<script>", "bogus", "2025-06-18x"} {
		resp := g.post(rpc{version: v, body: `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`})
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"code":-32600`) ||
			!strings.Contains(string(b), "not a protocol revision") || strings.Contains(string(b), v) {
			t.Errorf("version %q: %d %s", v, resp.StatusCode, b)
		}
	}
}
