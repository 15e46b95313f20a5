package main

import (
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/memgate/memgate/server/gateway"
)

// httpFlags configure serve --transport http.
type httpFlags struct {
	Bind              string        `name:"bind" default:"127.0.0.1:8765" placeholder:"HOST:PORT" help:"Address of the HTTP transport (port 0 picks a free one)."`
	Path              string        `name:"path" placeholder:"PATH" help:"Path of the MCP endpoint."`
	AllowRemote       bool          `name:"allow-remote" help:"Allow a non-loopback --bind (an auth mode is required too)."`
	AllowHost         []string      `name:"allow-host" placeholder:"HOST" help:"Host header value accepted besides loopback names: a name (any port) or name:port (repeatable)."`
	AllowOrigin       []string      `name:"allow-origin" placeholder:"ORIGIN" help:"Origin (scheme://host[:port]) whose pages may call the server (repeatable)."`
	MaxConnections    int           `name:"max-connections" placeholder:"N" help:"Most TCP connections at once; more are closed before reading."`
	MaxInflight       int           `name:"max-inflight" placeholder:"N" help:"Most requests in progress; more get 503 at once."`
	MaxStreams        int           `name:"max-streams" placeholder:"N" help:"Most open SSE streams."`
	MaxSessions       int           `name:"max-sessions" placeholder:"N" help:"Most MCP sessions."`
	SessionIdle       time.Duration `name:"session-idle" placeholder:"DURATION" help:"End a session without requests for this long."`
	MaxRequestBytes   int64         `name:"max-request-bytes" placeholder:"BYTES" help:"Largest request body (413 beyond it)."`
	ReadHeaderTimeout time.Duration `name:"read-header-timeout" placeholder:"DURATION" help:"Time a client has to send a request's header."`
	IdleTimeout       time.Duration `name:"idle-timeout" placeholder:"DURATION" help:"Close a keep-alive connection idle for this long."`
	RequestTimeout    time.Duration `name:"request-timeout" placeholder:"DURATION" help:"Time to read a request's body and answer it (not SSE streams)."`
	ConnLifetime      time.Duration `name:"conn-lifetime" placeholder:"DURATION" help:"Close a connection older than this after its current request."`
	Metrics           bool          `name:"metrics" help:"Serve Prometheus metrics at GET /metrics (no authentication: keep the port private)."`
	MetricsBind       string        `name:"metrics-bind" placeholder:"HOST:PORT" help:"Serve GET /metrics on this address of its own instead of --bind's (implies --metrics; with either transport)."`
	RateLimit         float64       `name:"rate-limit" default:"0" placeholder:"N" help:"Requests per second each principal may send (its subject; its address without auth); past it 429 with Retry-After (0: off)."`
	RateBurst         int           `name:"rate-burst" default:"0" placeholder:"N" help:"Requests a principal may send at once before --rate-limit applies (default: --rate-limit, rounded up)."`
	MaxImportBytes    int64         `name:"max-import-bytes" default:"1073741824" placeholder:"BYTES" help:"Largest body of an admin import (413 beyond it); the import streams, whatever its size."`
	Console           bool          `name:"console" help:"Serve the web console at /console/, for administrators (needs MEMGATE_ADMIN_TOKEN or an auth mode whose tokens can carry the memory:admin scope)."`
	ShutdownGrace     time.Duration `name:"shutdown-grace" placeholder:"DURATION" help:"Time requests in progress get to finish at shutdown."`
}

// validate reports the problems of the HTTP flags through bad.
func (f *httpFlags) validate(bad badFunc) {
	if _, _, err := net.SplitHostPort(f.Bind); err != nil {
		bad("bind", "must be HOST:PORT, such as 127.0.0.1:8765")
	}
	if f.MetricsBind != "" {
		switch _, _, err := net.SplitHostPort(f.MetricsBind); {
		case err != nil:
			bad("metrics-bind", "must be HOST:PORT, such as 127.0.0.1:9464")
		case !loopbackBind(f.MetricsBind) && !f.AllowRemote:
			bad("metrics-bind", "not a loopback address; add --allow-remote to let other machines scrape it")
		case f.MetricsBind == f.Bind && !strings.HasSuffix(f.Bind, ":0"):
			bad("metrics-bind", "must differ from --bind")
		}
	}
	if f.RateLimit < 0 || f.RateBurst < 0 {
		bad("rate-limit", "--rate-limit and --rate-burst must be 0 (off, default) or more")
	}
	if f.MaxImportBytes < 1 {
		bad("max-import-bytes", "must be at least 1")
	}
	if err := gateway.CheckPath(f.Path); err != nil {
		bad("path", "%s", err.Error())
	}
	for _, o := range f.AllowOrigin {
		if !isOrigin(o) {
			bad("allow-origin", "must be scheme://host[:port], such as https://app.example.com")
			break
		}
	}
	for _, n := range []struct {
		flag string
		v    int
	}{{"max-connections", f.MaxConnections}, {"max-inflight", f.MaxInflight}, {"max-streams", f.MaxStreams}, {"max-sessions", f.MaxSessions}} {
		if n.v < 1 {
			bad(n.flag, "must be at least 1")
		}
	}
	if f.MaxRequestBytes < 1024 || f.MaxRequestBytes > 64<<20 {
		bad("max-request-bytes", "must be from 1024 to %d", 64<<20)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"session-idle", f.SessionIdle}, {"read-header-timeout", f.ReadHeaderTimeout}, {"idle-timeout", f.IdleTimeout},
		{"request-timeout", f.RequestTimeout}, {"conn-lifetime", f.ConnLifetime}, {"shutdown-grace", f.ShutdownGrace}} {
		if d.v <= 0 {
			bad(d.flag, "must be a positive duration, such as 30s")
		}
	}
}

// isOrigin reports whether s is an origin as browsers send it: http or
// https, a host, an optional port, and nothing else (a trailing slash is
// tolerated).
func isOrigin(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil &&
		(u.Path == "" || u.Path == "/") && u.RawQuery == "" && u.Fragment == "" && !u.ForceQuery
}

// loopbackBind reports whether a --bind address is a loopback one.
func loopbackBind(bind string) bool {
	host, _, err := net.SplitHostPort(bind)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// gatewayOptions are the gateway's options of the configuration.
func (f *httpFlags) gatewayOptions() gateway.Options {
	return gateway.Options{
		Path: f.Path, AllowHosts: f.AllowHost, AllowOrigins: f.AllowOrigin,
		MaxConnections: f.MaxConnections, MaxInflight: f.MaxInflight, MaxStreams: f.MaxStreams,
		MaxSessions: f.MaxSessions, SessionIdle: f.SessionIdle, MaxRequestBytes: f.MaxRequestBytes,
		ReadHeaderTimeout: f.ReadHeaderTimeout, IdleTimeout: f.IdleTimeout, RequestTimeout: f.RequestTimeout,
		ConnLifetime: f.ConnLifetime, ShutdownGrace: f.ShutdownGrace,
	}
}
