package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/telemetry"
	"github.com/memgate/memgate/tenants"
)

// closeGrace bounds the wait, at the end of a command, for running calls
// to release their stores before the pool flushes and closes them.
const closeGrace = 10 * time.Second

// resolver is the namespace policy of the configuration. The project
// strategy reads its folder (--project-dir, else the working directory)
// once, here, and returns the binding of its namespace to that folder (nil
// for the other strategies). The token strategy needs a caller, which only
// serve has: a store command, run where the server's configuration is,
// works on --namespace instead.
func (a *app) resolver() (*tenants.Resolver, *tenants.ProjectBinding, error) {
	strategy, err := tenants.ParseStrategy(a.cfg.NamespaceStrategy)
	if err != nil {
		return nil, nil, usageError{errors.New("--namespace-strategy: must be fixed, project or token")}
	}
	if strategy == tenants.Token && !a.cfg.serves() {
		strategy = tenants.Fixed
	}
	r := &tenants.Resolver{Strategy: strategy, Default: memgate.Namespace(a.cfg.Namespace), AllowArg: a.cfg.NamespaceArg}
	if strategy != tenants.Project {
		return r, nil, nil
	}
	dir := a.cfg.ProjectDir
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return nil, nil, fmt.Errorf("--namespace-strategy project: the working directory: %w", err)
		}
	} else if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		// An editor that does not expand ${workspaceFolder} passes it as is.
		return nil, nil, usageError{errors.New("--project-dir: not a folder")}
	}
	b, err := tenants.BindProject(dir)
	if err != nil {
		return nil, nil, err
	}
	r.Default = b.Namespace
	return r, &b, nil
}

// openPool opens the pool of stores in the data folder, the store of the
// project namespace, if any, bound to its folder. The caller closes it with
// closePool.
func (a *app) openPool(project *tenants.ProjectBinding) (*tenants.Pool, error) {
	enc, err := a.encryption()
	if err != nil {
		return nil, err
	}
	store := storage.Options{MaxTextBytes: a.cfg.MaxMemoryBytes, Logger: a.log, Encryption: enc,
		MaxMemories: a.cfg.MaxMemories, MaxBytes: a.cfg.MaxNamespaceBytes, TrashRetention: a.cfg.TrashRetention}
	a.cfg.storeOptions(&store)
	a.embedderOptions(&store)
	dir := a.cfg.DataDir
	var shared tenants.Shared
	if a.cfg.shared() {
		db, err := a.openDatabase()
		if err != nil {
			return nil, err
		}
		a.closers = append(a.closers, db.Close)
		shared = db
		store.Staleness = a.cfg.serveFlags.Replica.ReplicaStaleness
		if !a.cfg.serves() {
			// A command's replicas are its own, and go with it: a server
			// may be using the data folder's.
			if dir, err = os.MkdirTemp("", "memgate-replicas-*"); err != nil {
				return nil, err
			}
			a.closers = append(a.closers, func() { os.RemoveAll(dir) })
		}
		if enc != nil {
			// The replicas' files share one derivation, beside them.
			enc.UseSaltFile(filepath.Join(dir, saltFileName))
		}
	}
	tel := a.telemetry()
	return tenants.NewPool(tenants.Options{
		Meter:         tel.MeterProvider().Meter(telemetry.ScopeTenants),
		Tracer:        tel.Tracer,
		Shared:        shared,
		Dir:           dir,
		MaxStores:     a.cfg.MaxStores,
		IdleTimeout:   a.cfg.StoreIdleTimeout,
		SweepInterval: a.cfg.SweepInterval,
		KeepTrash:     !a.cfg.serves() && a.cfg.TrashRetention == 0,
		Store:         store,
		Logger:        a.log,
		Project:       project,
	})
}

// closePool flushes and closes every store, with a deadline of its own: the
// command's context may already be cancelled by a signal.
func (a *app) closePool(pool *tenants.Pool) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), closeGrace)
	defer cancel()
	err := pool.Close(ctx)
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
	if err != nil {
		a.log.Error("closing the stores failed", "op", "cmd.close", "error", err)
		return memgate.Internal("cmd.close", err)
	}
	return nil
}

// newServer returns the MCP server of the configuration on pool.
func (a *app) newServer(pool *tenants.Pool, r *tenants.Resolver) (*server.Server, error) {
	return a.newServerScoped(pool, r, "")
}

// newServerScoped is newServer with the scope remember and forget need
// ("" for none: a transport that authenticates nobody).
func (a *app) newServerScoped(pool *tenants.Pool, r *tenants.Resolver, writeScope string) (*server.Server, error) {
	return a.newServerWith(pool, r, writeScope, nil)
}

// adminServer is the MCP server of the admin API's tool calls: the serving
// configuration's limits, its namespace the principal's (the route's), and
// every tool but export (a route of its own) writing directly, whatever the
// write mode and --disable-tool say of agents' calls: it is an
// administrator's curation.
func (a *app) adminServer(pool *tenants.Pool) (*server.Server, error) {
	return a.newServerWith(pool, &tenants.Resolver{Strategy: tenants.Token}, "", func(o *server.Options) {
		o.WriteMode, o.DisabledTools, o.View, o.Middleware = server.WriteFull, []string{server.ToolExport}, nil, nil
	})
}

// newServerWith is newServerScoped with edit, when not nil, changing the
// options first.
func (a *app) newServerWith(pool *tenants.Pool, r *tenants.Resolver, writeScope string, edit func(*server.Options)) (*server.Server, error) {
	opts := server.Options{
		Lease:            server.LeaseOf(pool.Lease),
		LeaseRead:        server.LeaseOf(pool.LeaseRead),
		Resolve:          r.Resolve,
		View:             a.cfg.view(r),
		Logger:           a.log,
		DisabledTools:    a.cfg.DisableTool,
		NamespaceArg:     a.cfg.NamespaceArg,
		WriteMode:        a.cfg.WriteMode,
		MaxTextBytes:     a.cfg.MaxMemoryBytes,
		AllowSecrets:     a.cfg.AllowSecrets,
		MaxResponseBytes: a.cfg.MaxResponseBytes,
		MaxMemories:      a.cfg.MaxMemories, MaxNamespaceBytes: a.cfg.MaxNamespaceBytes,
		Recall:     a.recall(),
		WriteScope: writeScope,
		Version:    moduleVersion(),
		Telemetry:  a.telemetry(),
		Middleware: a.toolMiddleware(r),
	}
	if edit != nil {
		edit(&opts)
	}
	srv, err := server.New(opts)
	if err != nil {
		return nil, usageError{err} // Config.Validate let through what server refuses
	}
	a.cfg.addTools(srv.MCP())
	return srv, nil
}

// withPool runs fn with the resolver and a pool of the configuration, and
// closes the pool (flushing every store) afterwards.
func (a *app) withPool(fn func(pool *tenants.Pool, r *tenants.Resolver) error) (err error) {
	r, project, err := a.resolver()
	if err != nil {
		return err
	}
	pool, err := a.openPool(project)
	if err != nil {
		return err
	}
	defer func() {
		if !a.cfg.serves() {
			a.sweepAtExit(pool)
		}
		if cerr := a.closePool(pool); err == nil {
			err = cerr
		}
	}()
	return fn(pool, r)
}

// sweepAtExitBudget bounds a store command's sweep before it closes.
const sweepAtExitBudget = 2 * time.Second

// sweepAtExit sweeps the stores a store command opened: for a store that
// only the command line touches, it is what a server's sweeper would do
// within --sweep-interval (what expired, or passed the trash's retention,
// is deleted for good). A store the command could not write is left as it
// is.
func (a *app) sweepAtExit(pool *tenants.Pool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), sweepAtExitBudget)
	defer cancel()
	pool.SweepOpen(ctx)
}

// withServer runs fn with a server on a pool of the configuration.
func (a *app) withServer(fn func(srv *server.Server) error) error {
	return a.withPool(func(pool *tenants.Pool, r *tenants.Resolver) error {
		srv, err := a.newServer(pool, r)
		if err != nil {
			return err
		}
		return fn(srv)
	})
}

// withStore runs fn with the store of the configured namespace, leased from
// a pool that is closed afterwards.
func (a *app) withStore(fn func(st *storage.Store, ns memgate.Namespace) error) error {
	return a.withPool(func(pool *tenants.Pool, r *tenants.Resolver) error {
		ns, err := r.Resolve(nil, "")
		if err != nil {
			return err
		}
		st, release, err := pool.Lease(a.ctx, ns)
		if err != nil {
			return err
		}
		defer release()
		return fn(st, ns)
	})
}

// call runs one tool exactly as tools/call would and returns its result.
// A protocol error (an unknown or disabled tool, arguments that are not an
// object) is a usage error.
func call(ctx context.Context, srv *server.Server, tool string, args []byte) (*mcp.CallToolResult, error) {
	res, err := srv.Call(ctx, tool, args)
	var rpc *jsonrpc.Error
	switch {
	case errors.As(err, &rpc):
		if !srv.Enabled(tool) {
			return nil, usageError{fmt.Errorf("%s is not a tool this server offers (unknown, disabled, or not in this write mode)", tool)}
		}
		return nil, usageError{errors.New(rpc.Message)}
	case err != nil:
		return nil, err
	}
	return res, nil
}

// resultError returns the toolError of a failed result, nil for a success.
func resultError(res *mcp.CallToolResult) error {
	if !res.IsError {
		return nil
	}
	var env struct {
		Error struct {
			Code    memgate.Code `json:"code"`
			Message string       `json:"message"`
		} `json:"error"`
	}
	if b, err := json.Marshal(res.StructuredContent); err != nil || json.Unmarshal(b, &env) != nil || env.Error.Code == "" {
		return &toolError{Code: memgate.CodeInternal, Message: memgate.InternalMessage}
	}
	return &toolError{Code: env.Error.Code, Message: env.Error.Message}
}

// encodeJSON returns v as one line of JSON, with <, > and & as they are.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// printJSON writes v on stdout as one line of JSON.
func (a *app) printJSON(v any) error {
	b, err := encodeJSON(v)
	if err != nil {
		return memgate.Internal("cmd.print", err)
	}
	_, err = a.stdout.Write(b)
	return err
}
