package main

import (
	"context"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/tenants"
)

type serveCmd struct{}

// Run serves one client over stdin and stdout until stdin ends or a signal
// cancels the context; either is a clean exit. The pool is closed on the way
// out, which flushes every store.
//
// Before serving, it leases the configured namespace once: a store that
// another memgate process holds fails here, at once, with store_locked (one
// line on stderr, status 1), rather than at the client's first call. The
// store stays open, and locked, in the pool.
func (c *serveCmd) Run(a *app) error {
	if a.cfg.Transport == "http" {
		if a.cfg.HTTP.Metrics {
			// Before the pool, so that its instruments are exported too.
			h, shutdown, err := installMetrics()
			if err != nil {
				return err
			}
			defer shutdown(context.WithoutCancel(a.ctx))
			a.metrics = h
		}
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
		if err != nil {
			return err
		}
		release()
		return a.serveStdio(srv, ns)
	})
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
