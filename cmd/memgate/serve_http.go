package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/memgate/memgate/server/admin"
	"github.com/memgate/memgate/server/console"
	"github.com/memgate/memgate/server/gateway"
	"github.com/memgate/memgate/tenants"
)

// serveHTTP serves MCP over streamable HTTP until a signal comes, then shuts
// the gateway down gracefully; withPool closes (and flushes) every store
// after it. Once the listener is bound it prints one line on stdout:
// "memgate listening on http://ADDR/PATH", with an address a client on this
// machine can use (see clientHost).
func (a *app) serveHTTP(pool *tenants.Pool, r *tenants.Resolver) error {
	f := &a.cfg.HTTP
	setup, err := a.authenticator()
	if err != nil {
		return err
	}
	if !loopbackBind(f.Bind) {
		switch {
		case !f.AllowRemote:
			return usageError{errors.New("--bind: not a loopback address; add --allow-remote (and an auth mode) to serve other machines")}
		case setup.Auth == nil:
			return usageError{errors.New("--bind: serving other machines needs an auth mode (MEMGATE_TOKEN, --tokens-file, JWT or OAuth)")}
		}
	}
	if f.Console && setup.Admin == nil {
		return usageError{errors.New("--console: the console signs in with an admin credential: set MEMGATE_ADMIN_TOKEN, or an auth mode (--tokens-file, JWT, OAuth) whose tokens can carry the memory:admin scope")}
	}
	if r.Strategy == tenants.Token && setup.Auth == nil {
		return usageError{errors.New("--namespace-strategy: token needs an auth mode (MEMGATE_TOKEN, --tokens-file, JWT or OAuth)")}
	}
	srv, err := a.newServerScoped(pool, r, setup.WriteScope)
	if err != nil {
		return err
	}
	unlock, err := lockHTTP(a.cfg.DataDir)
	if err != nil {
		return err
	}
	defer unlock()
	opts := f.gatewayOptions()
	opts.Auth, opts.Routes, opts.Logger = setup.Auth, setup.Routes, a.log
	opts.Ready, opts.Telemetry = a.storesReady, a.telemetry()
	opts.RateLimit, opts.RateBurst = f.RateLimit, f.RateBurst
	if a.cfg.HTTP.MetricsBind == "" && a.tel != nil {
		opts.Metrics = a.tel.metrics // else on its own listener (serve.go)
	}
	opts.MaxResponseBytes = int64(a.cfg.MaxResponseBytes) // a batch's answers together, as one answer's
	if setup.Admin != nil {
		tools, err := a.adminServer(pool)
		if err != nil {
			return err
		}
		ao := admin.Options{MaxImportBytes: f.MaxImportBytes, Logger: a.log, MayUse: adminMayUse}
		if a.audit != nil {
			ao.Audit = a.audit.auditAdmin
		}
		opts.Admin = admin.Handler(adminOps(pool, a.cfg.DataDir, tools, a.log), ao)
		opts.AdminAuth = setup.Admin
		if f.Console {
			opts.Console = console.Handler()
		}
	}
	newMCP := a.cfg.withTools(srv.NewMCP)
	gw, err := gateway.New(newMCP, opts)
	if err != nil {
		return usageError{err}
	}
	ln, err := net.Listen("tcp", f.Bind)
	if err != nil {
		return fmt.Errorf("--bind: cannot listen: %w", err)
	}
	defer a.startControl(pool, filepath.Join(a.cfg.DataDir, controlSocket), false)()
	host, all := clientHost(ln.Addr())
	if all {
		a.log.Warn("listening on all interfaces; other machines reach this server at this machine's address",
			"op", "cmd.serve", "addr", host)
	}
	fmt.Fprintf(a.stdout, "memgate listening on http://%s%s\n", host, f.Path)
	start := time.Now()
	a.log.Info("serving", "op", "cmd.serve", "transport", "http", "auth", setup.Mode,
		"strategy", a.cfg.NamespaceStrategy, "namespace_arg", a.cfg.NamespaceArg, "write_mode", a.cfg.WriteMode)
	err = gw.Serve(a.ctx, ln)
	a.log.Info("stopped", "op", "cmd.serve", "duration", time.Since(start), "signal", a.ctx.Err() != nil)
	return err
}

// storesReady reports whether stores can be opened: the data folder's
// stores folder exists (or can be made) and takes a new file.
func (a *app) storesReady(context.Context) error {
	dir := tenants.StoresDir(a.cfg.DataDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".ready-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// clientHost returns the host:port of a bound listener as a client on this
// machine dials it: a listener on every interface (0.0.0.0 or [::]) is
// reached at 127.0.0.1, and all says it also serves other machines. Go's
// listener on [::] takes IPv4 as well.
func clientHost(addr net.Addr) (host string, all bool) {
	ta, ok := addr.(*net.TCPAddr)
	if !ok || (len(ta.IP) > 0 && !ta.IP.IsUnspecified()) {
		return addr.String(), false
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ta.Port)), true
}
