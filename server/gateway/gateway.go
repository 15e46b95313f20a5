// Package gateway serves memgate's MCP servers over streamable HTTP: echo in
// front of the SDK's streamable handlers, with admission caps (connections,
// requests in flight, streams, sessions), Host and Origin checks, header and
// body bounds, authentication of every request, the four protocol revisions
// on one path, health, readiness and metrics, and a graceful shutdown. See
// docs/HTTP.md.
//
// It uses the MCP surface only to build servers (New takes a function that
// makes an *mcp.Server, server.Server.NewMCP, as the SDK's own streamable
// handler does) and to encode a tool's result once (answer.go). It declares
// the Authenticator it consumes; cmd/memgate wires package auth in. It
// imports memgate, server (the principal a request carries, a result's
// encoding) and server/message, never storage, tenants or auth.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/telemetry"
)

// Defaults of Options.
const (
	DefaultPath              = "/mcp"
	DefaultMaxConnections    = 1024
	DefaultMaxInflight       = 256
	DefaultMaxStreams        = 256
	DefaultMaxSessions       = 1024
	DefaultSessionIdle       = 30 * time.Minute
	DefaultMaxRequestBytes   = 1 << 20
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 90 * time.Second
	DefaultRequestTimeout    = 60 * time.Second
	DefaultConnLifetime      = 15 * time.Minute
	DefaultShutdownGrace     = 15 * time.Second
)

// Bounds of a request's header, whatever its transport: at most
// MaxHeaderFields fields and MaxHeaderBytes bytes (431 beyond either).
const (
	MaxHeaderFields = 64
	MaxHeaderBytes  = 16 << 10
)

// RevisionStateless is the first protocol revision without sessions; a
// request that names it, or a later one, goes to the stateless handler.
const RevisionStateless = "2026-07-28"

// Options configure the HTTP gateway. A zero field takes its default.
type Options struct {
	// Path is where MCP is served (DefaultPath).
	Path string
	// AllowHosts are the Host values accepted besides loopback names: a
	// host name (any port) or host:port.
	AllowHosts []string
	// AllowOrigins are the origins (scheme://host[:port]) a request with an
	// Origin header may come from, besides the gateway's own.
	AllowOrigins []string

	// MaxConnections bounds open TCP connections; one past it is closed
	// before anything is read from it.
	MaxConnections int
	// MaxInflight bounds requests in progress (streams aside); one past it
	// gets 503 at once.
	MaxInflight int
	// MaxStreams bounds open SSE streams (GET); one past it gets 503.
	MaxStreams int
	// MaxSessions bounds sessions; an initialize past it gets 503.
	MaxSessions int
	// SessionIdle ends a session that has had no request for this long.
	SessionIdle time.Duration
	// MaxRequestBytes bounds a request body (413 beyond it).
	MaxRequestBytes int64
	// MaxResponseBytes bounds the answers of one JSON-RPC batch together; a
	// batch whose answers pass it is refused. Give the bound of one answer
	// the servers have (server.Options.MaxResponseBytes,
	// --max-response-bytes); 0 means memgate.DefaultMaxResponseBytes.
	MaxResponseBytes int64

	// ReadHeaderTimeout bounds the time to read a request's header: the
	// slot of a connection that sends none is freed after it.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no request.
	IdleTimeout time.Duration
	// RequestTimeout bounds reading a body and answering a request; it does
	// not apply to SSE streams.
	RequestTimeout time.Duration
	// ConnLifetime is the age after which a connection is closed once its
	// current request is answered. A stream in progress is not cut.
	ConnLifetime time.Duration
	// ShutdownGrace bounds the wait for requests in progress at shutdown.
	ShutdownGrace time.Duration

	// Auth, when set, authenticates every request to Path.
	Auth Authenticator
	// Metrics, when set, is served at GET /metrics (Prometheus text), without
	// authentication or Host checks: keep the port off public networks or
	// scrape it through a proxy that limits who may.
	Metrics http.Handler
	// Routes are extra GET handlers served without authentication but
	// behind the header bounds and the Host and Origin guard (the
	// protected-resource metadata), by path: literal paths under
	// /.well-known/.
	Routes map[string]http.Handler
	// RateLimit is the requests per second each principal may send (its
	// subject; its client address when nobody is authenticated), with
	// bursts of RateBurst (default: RateLimit, rounded up); past it 429
	// with Retry-After, before the body is read. 0 turns it off.
	RateLimit float64
	RateBurst int
	// MaxRateKeys bounds the principals with a bucket (DefaultMaxRateKeys).
	MaxRateKeys int
	// Admin, when set with AdminAuth, serves the admin API under
	// /admin/v1/, behind the header bounds, the Host and Origin guard, the
	// admission caps and AdminAuth (which must demand the admin scope). It
	// bounds bodies itself (an import streams up to its own bound).
	Admin http.Handler
	// AdminAuth authenticates admin requests; without it there is no admin
	// API (404): never an unauthenticated one.
	AdminAuth Authenticator
	// Console, when set with Admin and AdminAuth, serves the web console's
	// page and assets under /console/, behind the header
	// bounds, the Host and Origin guard and the admission caps. The files
	// are public; what they show comes from the admin API, with its token.
	Console http.Handler
	// Ready reports whether stores can be opened, for GET /ready; nil means
	// always.
	Ready func(context.Context) error
	// Logger receives one line per refused request (status and reason,
	// never a header's value); nil discards them.
	Logger *slog.Logger
	// Telemetry is what the gateway reports spans and metrics through
	// (telemetry.go); the zero value makes no span. Give the servers
	// newServer makes the same.
	Telemetry telemetry.Providers
}

// Gateway serves a Server over streamable HTTP: admission caps, Host and
// Origin checks, body and header bounds, authentication, and the four
// protocol revisions on one path. See docs/HTTP.md.
type Gateway struct {
	opts      Options
	log       *slog.Logger
	echo      *echo.Echo
	handler   http.Handler // echo, instrumented
	metrics   gatewayMetrics
	stateful  *mcp.Server
	sessions  http.Handler // the stateful SDK handler
	stateless http.Handler // the stateless SDK handler (2026-07-28)

	inflight atomic.Int64
	streams  atomic.Int64

	works   sync.Map // workHeader value → *work (admission.go)
	workSeq atomic.Uint64

	sessionMu    sync.Mutex
	initializing int // initialize requests admitted and not yet answered

	draining      atomic.Bool
	stopStreams   context.Context
	endStreams    context.CancelFunc
	stopTransfers context.Context // ends just before the shutdown's grace
	endTransfers  context.CancelFunc

	rates *rateLimiter // nil: no rate limit

	allowHosts   map[string]bool
	allowOrigins map[string]bool
	routes       map[string]bool // the paths registered, for metric labels
}

// New returns a gateway configured by opts that serves the MCP servers
// newServer makes: one for the sessions of the 2025 revisions, one for the
// stateless revision, as the SDK's streamable handler takes a function that
// gives it a server. (server.Server.NewMCP makes memgate's.)
func New(newServer func() *mcp.Server, opts Options) (*Gateway, error) {
	opts = opts.withDefaults()
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = memgate.DefaultMaxResponseBytes
	}
	if err := CheckPath(opts.Path); err != nil {
		return nil, fmt.Errorf("gateway: path: %w", err)
	}
	for path := range opts.Routes {
		if !strings.HasPrefix(path, wellKnown) || !literalPath(path) {
			return nil, fmt.Errorf("gateway: an extra route must be a literal path under %s", wellKnown)
		}
	}
	g := &Gateway{opts: opts, log: opts.Logger, stateful: newServer(),
		allowHosts: map[string]bool{}, allowOrigins: map[string]bool{}}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	for _, h := range opts.AllowHosts {
		g.allowHosts[strings.ToLower(h)] = true
	}
	for _, o := range opts.AllowOrigins {
		g.allowOrigins[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
	}
	if opts.RateLimit > 0 {
		g.rates = newRateLimiter(opts.RateLimit, opts.RateBurst, opts.MaxRateKeys)
	}
	g.stopStreams, g.endStreams = context.WithCancel(context.Background())
	g.stopTransfers, g.endTransfers = context.WithCancel(context.Background())
	if err := g.newMetrics(); err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}

	// The gateway checks Host and Origin itself, on every bind address (the
	// SDK's check, which knows no allowed hosts, fires only on loopback
	// binds), and bounds bodies before the SDK sees them.
	g.sessions = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.stateful },
		&mcp.StreamableHTTPOptions{JSONResponse: true, SessionTimeout: opts.SessionIdle,
			MaxRequestBodyBytes: opts.MaxRequestBytes, DisableLocalhostProtection: true})
	stateless := newServer()
	g.stateful.AddReceivingMiddleware(g.bindWork)
	stateless.AddReceivingMiddleware(g.bindWork)
	g.stateless = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return stateless },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, PropagateRequestCancellation: true,
			MaxRequestBodyBytes: opts.MaxRequestBytes, DisableLocalhostProtection: true})
	if opts.Auth != nil {
		// The SDK binds a session to the user of the TokenInfo in the request's
		// context, which only its own middleware can put there: it is handed
		// the principal that authenticate established.
		bind := sdkauth.RequireBearerToken(establishedToken, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})
		g.sessions, g.stateless = bind(g.sessions), bind(g.stateless)
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Logger.SetOutput(discard{})
	e.HTTPErrorHandler = g.httpError
	e.Use(g.recover, g.route, g.limitHeaders) // every path's header is bounded
	e.GET("/health", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET("/ready", g.ready)
	if opts.Metrics != nil {
		e.GET("/metrics", echo.WrapHandler(opts.Metrics))
	}
	for path, h := range opts.Routes {
		e.GET(path, echo.WrapHandler(h), g.guardHost)
	}
	g.routes = map[string]bool{}
	for _, r := range e.Routes() {
		g.routes[r.Path] = true
	}
	g.routes[opts.Path] = true
	if opts.Admin != nil && opts.AdminAuth != nil {
		e.Any(adminPrefix+"*", g.serveAdmin, g.guardHost, g.admit, g.authenticateAdmin, g.limitRate)
		g.routes[adminPrefix+"*"] = true
		if opts.Console != nil {
			// Any method reaches the console's handler, which refuses all
			// but GET and HEAD itself, under its policy headers.
			serve := echo.WrapHandler(opts.Console)
			e.Any(consolePrefix+"*", serve, g.guardHost, g.admit)
			e.Any(strings.TrimSuffix(consolePrefix, "/"), serve, g.guardHost, g.admit)
			g.routes[consolePrefix+"*"] = true
		}
	}
	e.Any(opts.Path, g.serveMCP, g.guardHost, g.admit, g.authenticate, g.limitRate, g.readBody, g.checkMessages, g.capSessions)
	g.echo = e
	g.handler = g.instrument(e)
	return g, nil
}

// Paths the gateway serves itself, which the MCP path may not take.
var reservedPaths = []string{"/health", "/ready", "/metrics", "/admin", "/console"}

// wellKnown is the prefix of RFC 8615 well-known paths (the RFC 9728
// metadata among them).
const wellKnown = "/.well-known/"

// CheckPath reports whether path can be the MCP path: a literal path of one
// or more segments of letters, digits and - . _ ~ (no echo pattern such as
// /* or /:x, no . or .. segment), and none of the gateway's own paths
// (/health, /ready, /metrics, /.well-known/...), which it would replace.
func CheckPath(path string) error {
	switch {
	case !literalPath(path):
		return errors.New("must be a literal path such as /mcp: segments of letters, digits and - . _ ~, no *, : or empty segment")
	case slices.Contains(reservedPaths, path) || strings.HasPrefix(path+"/", wellKnown) || strings.HasPrefix(path, "/admin/") || strings.HasPrefix(path, consolePrefix):
		return errors.New("must not be /health, /ready, /metrics, /console or under /.well-known/, /admin/ or /console/, which the gateway serves itself")
	}
	return nil
}

// literalPath reports whether path is "/" and segments of unreserved
// characters (RFC 3986), none of them . or ..; so echo matches it as the
// literal it is.
func literalPath(path string) bool {
	if !strings.HasPrefix(path, "/") {
		return false
	}
	for _, seg := range strings.Split(path[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
				return false
			}
		}
	}
	return true
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.Path == "" {
		o.Path = DefaultPath
	}
	def(&o.MaxConnections, DefaultMaxConnections)
	def(&o.MaxInflight, DefaultMaxInflight)
	def(&o.MaxStreams, DefaultMaxStreams)
	def(&o.MaxSessions, DefaultMaxSessions)
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	defd(&o.SessionIdle, DefaultSessionIdle)
	defd(&o.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	defd(&o.IdleTimeout, DefaultIdleTimeout)
	defd(&o.RequestTimeout, DefaultRequestTimeout)
	defd(&o.ConnLifetime, DefaultConnLifetime)
	defd(&o.ShutdownGrace, DefaultShutdownGrace)
	return o
}

// Handler returns the gateway's HTTP handler. Serve adds what only a
// listener can do: the connection cap, timeouts, and graceful shutdown.
func (g *Gateway) Handler() http.Handler { return g.handler }

// Serve serves on ln until ctx ends, then shuts down: /ready turns 503 and
// new requests are refused, SSE streams end, requests in progress are
// answered within ShutdownGrace, and sessions are closed. It returns nil
// after a shutdown, or the error that stopped it serving. The caller closes
// the stores afterwards.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           g.handler,
		ReadHeaderTimeout: g.opts.ReadHeaderTimeout,
		IdleTimeout:       g.opts.IdleTimeout,
		// Go reads up to 4 KiB past this before it answers 431; limitHeaders
		// holds the exact bound.
		MaxHeaderBytes: MaxHeaderBytes,
		ConnContext:    connContext,
		ErrorLog:       slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(newLimitListener(ln, g.opts.MaxConnections)) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}

	start := time.Now()
	g.draining.Store(true)
	g.endStreams()
	grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.opts.ShutdownGrace)
	defer cancel()
	// A transfer still running near the grace's end is stopped, so that its
	// answer (an import's report of how far it got) is written before the
	// connections are cut.
	cut := time.AfterFunc(g.opts.ShutdownGrace-min(g.opts.ShutdownGrace/4, transferAnswerMargin), g.endTransfers)
	defer cut.Stop()
	err := hs.Shutdown(grace)
	if err != nil {
		// Past the grace: cut what is left. A write still running finishes in
		// the store (the pool waits for its lease), unacknowledged.
		hs.Close()
	}
	g.closeSessions(grace)
	<-served
	g.log.Info("http stopped", "op", "http.shutdown", "duration", time.Since(start), "cut", err != nil)
	return nil
}

// transferAnswerMargin is the most of the shutdown's grace left to a
// transfer stopped at its end to answer (a quarter of a shorter grace).
const transferAnswerMargin = 2 * time.Second

// closeSessions closes every session, waiting for them until ctx ends: a
// session closes once its calls in progress return.
func (g *Gateway) closeSessions(ctx context.Context) {
	var wg sync.WaitGroup
	for ss := range g.stateful.Sessions() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ss.Close()
		}()
	}
	closed := make(chan struct{})
	go func() {
		wg.Wait()
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
		g.log.Warn("sessions still closing after the shutdown grace", "op", "http.shutdown")
	}
}

// Draining reports whether the gateway is shutting down.
func (g *Gateway) Draining() bool { return g.draining.Load() }

// serveMCP hands the request to the handler of its protocol revision.
func (g *Gateway) serveMCP(c echo.Context) error {
	r := c.Request()
	if isStateless(r) {
		g.stateless.ServeHTTP(g.answers(c.Response(), r), r)
		return nil
	}
	if msgs, ok := r.Context().Value(batchKey{}).([]json.RawMessage); ok {
		return g.serveBatch(c, msgs)
	}
	g.sessions.ServeHTTP(g.answers(c.Response(), r), r)
	return nil
}

func (g *Gateway) ready(c echo.Context) error {
	if g.draining.Load() {
		return c.String(http.StatusServiceUnavailable, "shutting down\n")
	}
	if g.opts.Ready != nil {
		if err := g.opts.Ready(c.Request().Context()); err != nil {
			g.log.Warn("not ready", "op", "http.ready", "error", err)
			return c.String(http.StatusServiceUnavailable, "stores cannot be opened\n")
		}
	}
	return c.String(http.StatusOK, "ready\n")
}

// refuse answers a request the gateway does not pass on, and logs why.
func (g *Gateway) refuse(c echo.Context, status int, reason string) error {
	g.log.Debug("http refused", "op", "http.admit", "status", status, "reason", reason)
	g.refused(c.Request().Context(), reason)
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		c.Response().Header().Set("Retry-After", "1")
	}
	if r := c.Request(); r.ContentLength != 0 && r.Context().Value(bodyKey{}) == nil {
		// A body not read yet: the server would wait for it before it
		// answered, to keep the connection. Close it instead.
		c.Response().Header().Set("Connection", "close")
	}
	if strings.HasPrefix(c.Request().URL.Path, adminPrefix) {
		// The admin API answers every error in its own shape.
		return c.JSONBlob(status, adminError(status, reason))
	}
	return c.String(status, reason+"\n")
}

// adminError is the admin API's error body of a refusal with status.
func adminError(status int, reason string) []byte {
	code := memgate.CodeUnavailable // 429, 503
	switch status {
	case http.StatusBadRequest:
		code = memgate.CodeInvalidArgument
	case http.StatusUnauthorized, http.StatusForbidden:
		code = memgate.CodeForbidden
	case http.StatusNotFound:
		code = memgate.CodeNotFound
	case http.StatusRequestEntityTooLarge, http.StatusRequestHeaderFieldsTooLarge:
		code = memgate.CodeTooLarge
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": string(code), "message": reason}})
	return b
}

// httpError answers the errors echo itself raises (unknown path, method).
func (g *Gateway) httpError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status := http.StatusInternalServerError
	var he *echo.HTTPError
	if errors.As(err, &he) {
		status = he.Code
	}
	c.String(status, http.StatusText(status)+"\n")
}

// recover turns a handler's panic into a 500, logged without the request.
func (g *Gateway) recover(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				g.log.Error("http handler panicked", "op", "http.recover", "panic", fmt.Sprintf("%T", v))
				err = echo.NewHTTPError(http.StatusInternalServerError)
			}
		}()
		return next(c)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
