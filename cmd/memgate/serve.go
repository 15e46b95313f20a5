package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

// serveCmd takes every setting: the store's, the tools', and its own.
type serveCmd struct {
	Store  storeFlags  `embed:""`
	Server serverFlags `embed:""`
	Serve  serveFlags  `embed:"" group:"serve"`
	Bench  benchFlags  `embed:""` // none, but in the benchmark build (bench.go)
}

// serveFlags configure what only serve does: talk to its clients, and keep
// the stores of several namespaces open.
type serveFlags struct {
	Transport        string        `name:"transport" default:"stdio" placeholder:"stdio|http" help:"How serve talks to its clients: stdio (one client) or http (streamable HTTP)."`
	MaxStores        int           `name:"max-stores" placeholder:"N" help:"Most stores open at once."`
	StoreIdleTimeout time.Duration `name:"store-idle-timeout" default:"0s" placeholder:"DURATION" help:"Close a store unused for this long (0s: never)."`
	AuditLog         string        `name:"audit-log" placeholder:"PATH" help:"Append one JSON line per tool call and admin action (who, namespace, operation, outcome, duration; never content, ids, queries or tokens) to PATH (-: stderr); reopened on SIGHUP."`
	SweepInterval    time.Duration `name:"sweep-interval" placeholder:"DURATION" help:"How often expired memories, and trash past --trash-retention, are deleted from the open stores (readers never see an expired memory meanwhile)."`

	Embed   embedderFlags `embed:"" group:"config"` // embedder.go
	Replica replicaFlags  `embed:"" group:"config"` // backend.go

	HTTP httpFlags `embed:"" group:"http"` // http_flags.go
	Auth authFlags `embed:"" group:"auth"` // auth_flags.go
}

func (f *serveFlags) AfterApply(c *Config) error {
	c.serveFlags, c.taken = *f, c.taken|takesServe
	return nil
}

// validate reports the problems of serve's flags through bad.
func (f *serveFlags) validate(c *Config, bad badFunc) {
	f.Embed.validate(bad)
	f.Replica.validate(c, bad)
	switch f.Transport {
	case "stdio", "http":
	default:
		bad("transport", "must be stdio or http")
	}
	if c.NamespaceStrategy == string(tenants.Token) && f.Transport != "http" {
		bad("namespace-strategy", "token takes the namespace from an authenticated caller: it needs --transport http and an auth mode (MEMGATE_TOKEN, --tokens-file, --jwt-* or --oauth-*)")
	}
	if f.HTTP.Console && f.Transport != "http" {
		bad("console", "the console is a page of the HTTP gateway: it needs --transport http")
	}
	if f.MaxStores < 1 {
		bad("max-stores", "must be at least 1")
	}
	if f.StoreIdleTimeout < 0 {
		bad("store-idle-timeout", "must not be negative")
	}
	if f.SweepInterval < time.Second {
		bad("sweep-interval", "must be at least 1s")
	}
	f.HTTP.validate(bad)
	f.Auth.validate(c, bad)
}

// Run serves one client over stdin and stdout until stdin ends or a signal
// cancels the context; either is a clean exit. The pool is closed on the way
// out, which flushes every store.
//
// Before serving, it leases the configured namespace once: a store that
// another memgate process holds fails here, at once, with store_locked (one
// line on stderr, status 1), rather than at the client's first call. The
// store stays open, and locked, in the pool. A store that cannot be used
// (damaged, on a full or failing disk) is no reason not to serve: its calls
// fail unavailable, saying why, and the other namespaces answer.
func (c *serveCmd) Run(a *app) error {
	setGCPolicy(a.getenv, "/sys/fs/cgroup")
	stop, err := a.cfg.startProfiles()
	if err != nil {
		return err
	}
	defer stop()
	// Before the pool and the servers, which report through it; shut down
	// after the pool has closed, so that the last spans are exported.
	prometheus := a.cfg.Transport == "http" && a.cfg.HTTP.Metrics || a.cfg.HTTP.MetricsBind != ""
	tel, err := a.installTelemetry(prometheus)
	if err != nil {
		return err
	}
	a.tel = tel
	defer func() {
		if err := tel.shutdown(a.ctx); err != nil {
			a.log.Warn("telemetry shutdown failed", "op", "cmd.telemetry", "error", err)
		}
	}()
	if a.cfg.AuditLog != "" {
		if a.audit, err = openAudit(a.cfg.AuditLog, a.stderr, a.log.Warn); err != nil {
			return fmt.Errorf("--audit-log: %w", err)
		}
		defer a.audit.close()
	}
	if bind := a.cfg.HTTP.MetricsBind; bind != "" {
		ln, err := net.Listen("tcp", bind)
		if err != nil {
			return fmt.Errorf("--metrics-bind: cannot listen: %w", err)
		}
		a.log.Info("metrics", "op", "cmd.serve", "addr", ln.Addr().String())
		ctx, cancel := context.WithCancel(a.ctx)
		done := make(chan error, 1)
		go func() { done <- a.serveMetrics(ctx, ln, tel.metrics) }()
		defer func() { cancel(); <-done }()
	}
	if a.cfg.Transport == "http" {
		return a.withPool(a.serveHTTP)
	}
	return a.withPool(func(pool *tenants.Pool, r *tenants.Resolver) error {
		ns, err := r.Resolve(nil, "")
		if err != nil {
			return err
		}
		srv, err := a.newServer(pool, r)
		if err != nil {
			return err
		}
		_, release, err := pool.Lease(a.ctx, ns)
		switch {
		case err == nil:
			release()
		case unusableStore(err):
			a.log.Warn("the namespace's store cannot be used; its calls fail until it can", "op", "cmd.serve",
				"namespace", string(ns), "error", err)
		default:
			return err
		}
		defer a.startControl(pool, a.stdioSocket(), true)()
		return a.serveStdio(srv, ns)
	})
}

// unusableStore reports whether err is a condition of a store's file
// (damage, a full, read-only or failing disk) rather than of the server's
// configuration (a lock another process holds, a wrong passphrase), which
// stops serve at start.
func unusableStore(err error) bool {
	if memgate.ErrorCode(err) != memgate.CodeUnavailable {
		return false
	}
	for _, cond := range []error{storage.ErrDamaged, syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EIO} {
		if errors.Is(err, cond) {
			return true
		}
	}
	return false
}

// serveStdio serves srv until stdin closes or a signal comes.
func (a *app) serveStdio(srv *server.Server, ns memgate.Namespace) error {
	start := time.Now()
	a.log.Info("serving", "op", "cmd.serve", "transport", a.cfg.Transport, "namespace", string(ns),
		"strategy", a.cfg.NamespaceStrategy, "namespace_arg", a.cfg.NamespaceArg, "write_mode", a.cfg.WriteMode)
	err := srv.RunStdio(a.ctx, a.stdin, a.stdout)
	a.log.Info("stopped", "op", "cmd.serve", "duration", time.Since(start), "signal", a.ctx.Err() != nil)
	return err
}
