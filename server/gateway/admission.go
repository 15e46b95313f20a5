package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/memgate/memgate"

	"github.com/memgate/memgate/server"
)

// The gateway's middleware, in the order a request meets it: the connection
// cap (limitListener), header bounds, Host and Origin, the in-flight and
// stream caps, authentication (from the header alone: a caller without a
// credential never gets its body read), the body, the session cap. Each
// refusal is answered at once; nothing waits in a queue.

// limitHeaders answers 431 to a header of more than MaxHeaderFields fields
// or MaxHeaderBytes bytes (each field counted as "Name: value\r\n").
func (g *Gateway) limitHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		fields, size := 0, len(r.Method)+len(r.RequestURI)+len(r.Proto)+4
		if r.Host != "" {
			fields, size = 1, size+len("Host: \r\n")+len(r.Host)
		}
		for name, values := range r.Header {
			for _, v := range values {
				fields++
				size += len(name) + len(v) + 4
			}
		}
		if fields > MaxHeaderFields || size > MaxHeaderBytes {
			return g.refuse(c, http.StatusRequestHeaderFieldsTooLarge, "request header too large")
		}
		return next(c)
	}
}

// guardHost answers 403 unless Host is a loopback name or an allowed host,
// and unless a present Origin is allowed: against DNS rebinding and calls
// from other sites' pages, whatever address the gateway is bound to.
func (g *Gateway) guardHost(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if !g.hostAllowed(r.Host) {
			return g.refuse(c, http.StatusForbidden, "host not allowed")
		}
		if origin, ok := r.Header["Origin"]; ok && (len(origin) != 1 || !g.originAllowed(origin[0], r.Host)) {
			return g.refuse(c, http.StatusForbidden, "origin not allowed")
		}
		return next(c)
	}
}

func (g *Gateway) hostAllowed(host string) bool {
	host = strings.ToLower(host)
	if host == "" {
		return false
	}
	if g.allowHosts[host] {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	return g.allowHosts[name] || isLoopbackName(name)
}

// isLoopbackName reports whether a host name is loopback: localhost,
// 127.0.0.0/8 or ::1.
func isLoopbackName(name string) bool {
	if name == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(name)
	return err == nil && ip.IsLoopback()
}

// originAllowed accepts an allowed origin and the gateway's own (the
// request's Host, already checked, under http or https).
func (g *Gateway) originAllowed(origin, host string) bool {
	origin = strings.ToLower(strings.TrimSuffix(origin, "/"))
	if g.allowOrigins[origin] {
		return true
	}
	host = strings.ToLower(host)
	return origin == "http://"+host || origin == "https://"+host
}

// admit holds a slot of the in-flight cap for a request, or of the stream
// cap for an SSE stream, and answers 503 when none is free. It gives
// a request its deadline, ties a stream to shutdown, and closes a
// connection past its lifetime once the request is answered.
func (g *Gateway) admit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if g.draining.Load() {
			return g.refuse(c, http.StatusServiceUnavailable, "shutting down")
		}
		r, w := c.Request(), c.Response()
		if born, ok := r.Context().Value(connBornKey{}).(time.Time); ok && time.Since(born) > g.opts.ConnLifetime {
			w.Header().Set("Connection", "close")
		}
		rc := http.NewResponseController(w)
		if r.URL.Path == g.opts.Path && isStream(r) || isTransfer(r) {
			if n := g.streams.Add(1); n > int64(g.opts.MaxStreams) {
				g.streams.Add(-1)
				return g.refuse(c, http.StatusServiceUnavailable, "too many streams")
			}
			defer g.streams.Add(-1)
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			// A stream ends when shutdown begins; a transfer, which has an
			// end, gets the shutdown's grace as other requests do, less the
			// time its answer takes.
			stopAt := g.stopStreams
			if isTransfer(r) {
				stopAt = g.stopTransfers
			}
			stop := context.AfterFunc(stopAt, func() {
				cancel()
				// An import waiting for its client's next bytes stops too.
				_ = rc.SetReadDeadline(time.Now())
			})
			defer stop()
			_ = rc.SetWriteDeadline(time.Time{})
			c.SetRequest(r.WithContext(ctx))
			return next(c)
		}
		if n := g.inflight.Add(1); n > int64(g.opts.MaxInflight) {
			g.inflight.Add(-1)
			return g.refuse(c, http.StatusServiceUnavailable, "too many requests in progress")
		}
		defer g.inflight.Add(-1)
		// The handler's context ends at the deadline; the connection's write
		// deadline comes a little later, so that the answer saying so still
		// reaches a client that is reading.
		deadline := time.Now().Add(g.opts.RequestTimeout)
		_ = rc.SetWriteDeadline(deadline.Add(answerGrace))
		ctx, cancel := context.WithDeadline(r.Context(), deadline)
		defer cancel()
		// The SDK runs a call on its session's context, not the request's: the
		// call finds the request again by the work header (bindWork), takes
		// its deadline, and holds the slot until it has returned, after the
		// answer if the answer came first (a timeout).
		wk := g.startWork(ctx, r)
		c.SetRequest(r.WithContext(ctx))
		err := next(c)
		if err == nil && !w.Committed && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// The answer goes now, whole (its length known, so the client
			// need not wait for the end of the handler), the slot when the
			// work has ended; the connection closes after, so the client
			// sends nothing more on it meanwhile.
			const reason = "request timed out"
			// The handler may have set its own type before the deadline.
			w.Header().Set(echo.HeaderContentType, echo.MIMETextPlainCharsetUTF8)
			w.Header().Set("Content-Length", strconv.Itoa(len(reason)+1))
			w.Header().Set("Connection", "close")
			err = g.refuse(c, http.StatusServiceUnavailable, reason)
			_ = rc.Flush()
		}
		g.endWork(wk)
		return err
	}
}

// workHeader carries, from admit to bindWork, the name of the work a
// request admitted under the in-flight cap started. A client's own value is
// dropped.
const workHeader = "Memgate-Work"

// work is the calls one admitted request started in the SDK.
type work struct {
	id    string
	ctx   context.Context
	mu    sync.Mutex
	ended bool // the request is over: a call that starts now does not run
	calls sync.WaitGroup
	// answer is a tool's result encoded once (server.EncodeResult), which
	// the request's answerWriter puts in place of the placeholder the SDK
	// encoded; nil when there is none.
	answer []byte
}

// keep holds a call's encoded result for the request's answer; false when
// the request is over or already holds one (a call of a batch whose answer
// never went out), and the result then goes through the SDK.
func (wk *work) keep(answer []byte) bool {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	if wk.ended || wk.answer != nil {
		return false
	}
	wk.answer = answer
	return true
}

// take returns the encoded result held, and forgets it.
func (wk *work) take() []byte {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	a := wk.answer
	wk.answer = nil
	return a
}

func (g *Gateway) startWork(ctx context.Context, r *http.Request) *work {
	wk := &work{ctx: ctx, id: strconv.FormatUint(g.workSeq.Add(1), 36)}
	r.Header.Set(workHeader, wk.id) // replaces a client's
	g.works.Store(wk.id, wk)
	return wk
}

// endWork waits for the calls the request started, which its context's end
// stops, and forgets the work.
func (g *Gateway) endWork(wk *work) {
	wk.mu.Lock()
	wk.ended = true
	wk.mu.Unlock()
	wk.calls.Wait()
	g.works.Delete(wk.id)
}

var errRequestOver = &memgate.Error{Code: memgate.CodeUnavailable, Message: "the request timed out or was cancelled"}

// bindWork is the SDK servers' middleware that runs each call of an admitted
// request under that request's context (its deadline, its cancel) and
// counts it in the request's work, so admit holds the in-flight slot until
// the call has returned.
func (g *Gateway) bindWork(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		extra := req.GetExtra()
		if extra == nil || extra.Header == nil {
			return next(ctx, method, req)
		}
		v, ok := g.works.Load(extra.Header.Get(workHeader))
		if !ok {
			return next(ctx, method, req)
		}
		wk := v.(*work)
		wk.mu.Lock()
		if wk.ended {
			wk.mu.Unlock()
			return nil, errRequestOver
		}
		wk.calls.Add(1)
		wk.mu.Unlock()
		defer wk.calls.Done()
		if span := trace.SpanFromContext(wk.ctx); span.SpanContext().IsValid() {
			// The call's span is the request's child (or links to it).
			ctx = trace.ContextWithSpan(ctx, span)
		}
		var cancel context.CancelFunc
		if d, ok := wk.ctx.Deadline(); ok {
			ctx, cancel = context.WithDeadline(ctx, d)
		} else {
			ctx, cancel = context.WithCancel(ctx)
		}
		defer cancel()
		stop := context.AfterFunc(wk.ctx, func() {
			if !errors.Is(wk.ctx.Err(), context.DeadlineExceeded) {
				cancel() // the client went away; a deadline says so itself
			}
		})
		defer stop()
		res, err := next(ctx, method, req)
		if err != nil || method != "tools/call" {
			return res, err
		}
		if b, ok := server.EncodeResult(method, req, res); ok && wk.keep(b) {
			return server.EncodedPlaceholder(), nil
		}
		return res, err
	}
}

// answerGrace is how long past a request's deadline its answer may take to
// write.
const answerGrace = 5 * time.Second

// isStream reports whether a request to the MCP path opens a long-lived SSE
// stream rather than asking for one answer: a GET (a session's stream), or
// a 2026-07-28 subscriptions/listen.
func isStream(r *http.Request) bool {
	return r.Method == http.MethodGet ||
		r.Method == http.MethodPost && isStateless(r) && r.Header.Get("Mcp-Method") == "subscriptions/listen"
}

// isStateless reports whether a request belongs to the stateless handler:
// it names a revision from RevisionStateless on, or one that is not a
// session revision's date at all. Both handlers refuse a version they do not
// speak with 400; the stateless one answers in the form 2026-07-28 clients
// read (UnsupportedProtocolVersionError with the supported versions).
func isStateless(r *http.Request) bool {
	v := r.Header.Get("Mcp-Protocol-Version")
	return v != "" && (v >= RevisionStateless || !revisionShape.MatchString(v))
}

var revisionShape = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)

type bodyKey struct{}

// readBody reads a POST body whole, within MaxRequestBytes (413 beyond it,
// known from Content-Length or found while reading) and RequestTimeout
// (408), so that the handlers after it never wait on a slow client. Its
// refusals close the connection (see refuse).
func (g *Gateway) readBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r, w := c.Request(), c.Response()
		if r.Method != http.MethodPost {
			return next(c)
		}
		limit := g.opts.MaxRequestBytes
		if r.ContentLength > limit {
			return g.refuse(c, http.StatusRequestEntityTooLarge, "request body too large")
		}
		// On a failure the read deadline stays: the server then cannot wait on
		// the rest of the body before it closes the connection.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(g.opts.RequestTimeout))
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		if err == nil {
			_ = rc.SetReadDeadline(time.Time{})
		}
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			return g.refuse(c, http.StatusRequestEntityTooLarge, "request body too large")
		case errors.Is(err, os.ErrDeadlineExceeded):
			return g.refuse(c, http.StatusRequestTimeout, "request body too slow")
		case err != nil:
			return g.refuse(c, http.StatusBadRequest, "request body unreadable")
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		c.SetRequest(r.WithContext(context.WithValue(r.Context(), bodyKey{}, body)))
		return next(c)
	}
}

type tokenInfoKey struct{}

// authenticate establishes the caller, when the gateway has an
// Authenticator, and puts its token information in the request's context,
// where the SDK's bearer middleware finds it and hands it to this request's
// handlers (see TokenInfoPrincipal). The principal itself is not put in the
// context: a session's handlers run under the context of the request that
// opened it.
func (g *Gateway) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if g.opts.Auth == nil {
			return next(c)
		}
		r := c.Request()
		p, expires, err := g.opts.Auth.Authenticate(r)
		if err != nil {
			return g.refuseCredential(c, err)
		}
		ctx := context.WithValue(r.Context(), tokenInfoKey{}, server.NewTokenInfo(p, expires))
		c.SetRequest(r.WithContext(ctx))
		return next(c)
	}
}

// establishedToken is the SDK's token verifier: it returns the token
// information authenticate established for the request.
func establishedToken(ctx context.Context, _ string, _ *http.Request) (*sdkauth.TokenInfo, error) {
	if ti, ok := ctx.Value(tokenInfoKey{}).(*sdkauth.TokenInfo); ok {
		return ti, nil
	}
	return nil, sdkauth.ErrInvalidToken
}

// capSessions answers 503 to an initialize request (which opens a session)
// when MaxSessions sessions are open or opening, and 400 to any other
// request of a session revision that names no session.
func (g *Gateway) capSessions(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		body, _ := r.Context().Value(bodyKey{}).([]byte)
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" || isStateless(r) {
			return next(c)
		}
		if !isInitialize(body) {
			return g.refuse(c, http.StatusBadRequest, "no Mcp-Session-Id: send initialize first")
		}
		g.sessionMu.Lock()
		open := 0
		for range g.stateful.Sessions() {
			open++
		}
		if open+g.initializing >= g.opts.MaxSessions {
			g.sessionMu.Unlock()
			return g.refuse(c, http.StatusServiceUnavailable, "too many sessions")
		}
		g.initializing++
		g.sessionMu.Unlock()
		defer func() {
			g.sessionMu.Lock()
			g.initializing--
			g.sessionMu.Unlock()
		}()
		return next(c)
	}
}

// isInitialize reports whether a JSON-RPC body (one message or a batch)
// holds an initialize request.
func isInitialize(body []byte) bool {
	if !bytes.Contains(body, []byte(`"initialize"`)) {
		return false
	}
	type message struct {
		Method string `json:"method"`
	}
	var msgs []message
	if body = bytes.TrimSpace(body); len(body) > 0 && body[0] == '[' {
		if json.Unmarshal(body, &msgs) != nil {
			return false
		}
	} else {
		var m message
		if json.Unmarshal(body, &m) != nil {
			return false
		}
		msgs = append(msgs, m)
	}
	for _, m := range msgs {
		if m.Method == "initialize" {
			return true
		}
	}
	return false
}

type connBornKey struct{}

// connContext records when a connection was accepted, for ConnLifetime.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitedConn); ok {
		return context.WithValue(ctx, connBornKey{}, lc.born)
	}
	return ctx
}

// limitListener accepts at most max connections at once: one past it is
// closed as soon as it is accepted, before anything is read from it, so an
// excess never waits in a queue and never costs a goroutine.
type limitListener struct {
	net.Listener
	slots chan struct{}
}

func newLimitListener(ln net.Listener, max int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, max)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitedConn{Conn: c, born: time.Now(), free: l.free}, nil
		default:
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset: the client learns at once
			}
			c.Close()
		}
	}
}

func (l *limitListener) free() { <-l.slots }

// limitedConn gives its slot back when it closes.
type limitedConn struct {
	net.Conn
	born time.Time
	once sync.Once
	free func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}

// refuseCredential answers a request whose credential an Authenticator
// refused: the refusal's status and challenge, else 401 invalid_token.
func (g *Gateway) refuseCredential(c echo.Context, err error) error {
	status, challenge := http.StatusUnauthorized, `Bearer error="invalid_token"`
	var refusal Refusal
	if errors.As(err, &refusal) {
		status, challenge = refusal.Status(), refusal.Challenge()
	}
	if challenge != "" {
		c.Response().Header().Set("WWW-Authenticate", challenge)
	}
	return g.refuse(c, status, http.StatusText(status))
}
