package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/admin"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

// A data folder holds these files of the servers that serve it:
//
//   - http.lock, locked (flock) for as long as an HTTP server runs: a
//     second `serve --transport http` on the folder refuses to start with
//     one line, instead of reporting ready and failing every call of the
//     stores the first one holds. Stdio servers do not take it: two
//     editors on two projects share a data folder, each with its own
//     namespace.
//   - control.sock, the HTTP server's control socket, and control/PID-RANDOM.sock,
//     one per stdio server (mode 0600; a peer of another user is closed
//     before anything is read): the admin API without tokens, for the store
//     commands of the same user. When a store command finds its store held
//     (store_locked), it asks each socket whether its server holds the
//     store and does its work through the one that does, with the same
//     output. A stdio server's socket answers for the stores it holds
//     only.
const (
	httpLockFile  = "http.lock"
	controlSocket = "control.sock"
	controlDir    = "control"
)

// errServedOverHTTP is the one line a second HTTP server on a data folder
// stops with.
var errServedOverHTTP = errors.New("--data-dir: another memgate already serves this data folder over HTTP; stop it, or serve another --data-dir")

// stdioSocket is a control socket path of a stdio server of this process:
// its pid and a random part (tests run several servers in one process).
func (a *app) stdioSocket() string {
	return filepath.Join(a.cfg.DataDir, controlDir, strconv.Itoa(os.Getpid())+"-"+rand.Text()[:8]+".sock")
}

// startControl serves the control socket at path on pool until the
// command ends (the returned function stops it); onlyHeld limits it to the
// stores pool holds. Without a socket (a data folder whose path is too long
// for one, say) the server still serves, and store commands on its stores
// answer store_locked, as before.
func (a *app) startControl(pool *tenants.Pool, path string, onlyHeld bool) func() {
	stats, err := a.controlServer(pool)
	if err == nil {
		var tools *server.Server
		if tools, err = a.adminServer(pool); err == nil {
			var stop func()
			if stop, err = a.serveControl(a.ctx, path, a.controlHandler(pool, stats, tools, onlyHeld)); err == nil {
				return stop
			}
		}
	}
	a.log.Warn("no control socket; store commands cannot reach the stores this server holds", "op", "cmd.control", "error", err)
	return func() {}
}

// serveControl serves h on the control socket at path until ctx ends. The
// path is this server's alone (the HTTP lock is held, or it names this
// process), so a socket file left there is a dead server's.
func (a *app) serveControl(ctx context.Context, path string, h http.Handler) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("the control socket: %w", err)
	}
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("the control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("the control socket: %w", err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelDebug), BaseContext: func(net.Listener) context.Context { return ctx }}
	go hs.Serve(sameUser{ln.(*net.UnixListener), a.log.Warn})
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeGrace)
		defer cancel()
		hs.Shutdown(sctx)
		os.Remove(path)
	}, nil
}

// sameUser accepts only peers of this process's user: another user's
// connection is closed before anything is read from it.
type sameUser struct {
	*net.UnixListener
	warn func(msg string, args ...any)
}

func (l sameUser) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		if err := checkPeer(c, os.Getuid()); err != nil {
			l.warn("control socket peer refused", "op", "cmd.control", "error", err)
			c.Close()
			continue
		}
		return c, nil
	}
}

// checkPeer refuses a connection whose peer is not of user uid.
func checkPeer(c *net.UnixConn, uid int) error {
	got, err := peerUID(c)
	if err != nil {
		return err
	}
	return samePeer(got, uid)
}

func samePeer(peer, uid int) error {
	if peer != uid {
		return fmt.Errorf("peer of uid %d, not %d", peer, uid)
	}
	return nil
}

// controlHandler is the admin API on pool with the routes only the store
// commands use: whether this server holds a store, the stats tool's
// answer, and purging the trash. With onlyHeld, a request for a store the
// pool does not hold is store_locked: it is another server's, or nobody's.
func (a *app) controlHandler(pool *tenants.Pool, stats, tools *server.Server, onlyHeld bool) http.Handler {
	local := &memgate.Principal{Subject: "local"} // the server's own user (the peer check)
	var audit func(admin.Action)
	if a.audit != nil {
		audit = a.audit.auditAdmin
	}
	// route is one of the socket's own routes on {ns}: fn's answer as JSON,
	// or its error; audited as op like the admin routes.
	route := func(op string, fn func(r *http.Request, ns memgate.Namespace) (any, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			ns, err := memgate.ParseNamespace("namespace", r.PathValue("ns"))
			var v any
			if err == nil {
				v, err = fn(r, ns)
			}
			var b []byte
			if err == nil {
				if b, err = encodeJSON(v); err != nil {
					err = memgate.Internal(op, err)
				}
			}
			if err != nil {
				admin.WriteError(w, err)
			} else {
				w.Header().Set("Content-Type", "application/json")
				w.Write(b)
			}
			if audit != nil {
				audit(admin.Action{Op: op, Namespace: ns, Code: memgate.ErrorCode(err), Duration: time.Since(start), Request: r})
			}
		}
	}
	// The local user's own files: an import through the socket is not bounded.
	o := admin.Options{MaxImportBytes: 1 << 62, Logger: a.log, Audit: audit,
		Extra: map[string]http.HandlerFunc{
			"GET /control/v1/holds/{ns}": func(w http.ResponseWriter, r *http.Request) {
				b, _ := encodeJSON(map[string]bool{"holds": pool.Holds(memgate.Namespace(r.PathValue("ns")))})
				w.Header().Set("Content-Type", "application/json")
				w.Write(b)
			},
			"GET /control/v1/stats/{ns}": route("admin.stats", func(r *http.Request, ns memgate.Namespace) (any, error) {
				ctx := server.WithPrincipal(r.Context(), &memgate.Principal{Subject: "control", Namespace: string(ns)})
				return stats.Invoke(ctx, server.ToolStats, []byte("{}"))
			}),
			"GET /control/v1/sealing/{ns}": route("admin.sealing", func(r *http.Request, ns memgate.Namespace) (any, error) {
				st, release, ok, err := leaseStore(r.Context(), pool, ns)
				if err != nil || !ok {
					return sealingAnswer{}, err
				}
				defer release()
				sl := st.Sealing()
				return sealingAnswer{KDF: sl.KDF, Check: sl.Check, Binding: sl.Binding, Known: sl.Known()}, nil
			}),
			"POST /control/v1/trash/{ns}/purge": route("admin.trash.purge", func(r *http.Request, ns memgate.Namespace) (any, error) {
				st, release, ok, err := leaseStore(r.Context(), pool, ns)
				if err != nil || !ok {
					return map[string]any{"purged": 0}, err
				}
				defer release()
				n, err := st.EmptyTrash(r.Context())
				return map[string]any{"purged": n}, err
			}),
		}}
	h := admin.Handler(adminOps(pool, a.cfg.DataDir, tools, a.log), o)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ns, ok := controlNamespace(r.URL.Path); ok && onlyHeld && !pool.Holds(ns) {
			admin.WriteError(w, errNotHeld)
			return
		}
		h.ServeHTTP(w, r.WithContext(server.WithPrincipal(r.Context(), local)))
	})
}

var errNotHeld = &memgate.Error{Code: memgate.CodeStoreLocked, Message: "this server does not hold that store"}

// controlNamespace is the namespace a control request works on, if any
// (not for the question whether a store is held).
func controlNamespace(path string) (memgate.Namespace, bool) {
	for _, prefix := range []string{admin.Prefix + "namespaces/", "/control/v1/stats/"} {
		if rest, ok := strings.CutPrefix(path, prefix); ok {
			name, _, _ := strings.Cut(rest, "/")
			return memgate.Namespace(name), true
		}
	}
	return "", false
}

// controlServer is the MCP server the control socket's stats route calls:
// the serving configuration, its namespace the one the route names.
func (a *app) controlServer(pool *tenants.Pool) (*server.Server, error) {
	return a.newServerScoped(pool, &tenants.Resolver{Strategy: tenants.Token}, "")
}

// remote is a client of the control socket of the server that holds the
// data folder's stores.
type remote struct {
	hc *http.Client
}

// heldStore runs direct; when it fails because a running server holds the
// store, it runs through instead, on the namespace the command would have
// used, through the control socket of the server that holds the store.
func (a *app) heldStore(direct func() error, through func(r *remote, ns memgate.Namespace) error) error {
	err := direct()
	if !storeLocked(err) {
		return err
	}
	res, _, rerr := a.resolver()
	if rerr != nil {
		return err
	}
	ns, rerr := res.Resolve(nil, "")
	if rerr != nil {
		return err
	}
	r := a.holder(ns)
	if r == nil {
		// The holder may have let the store go meanwhile (its idle timeout).
		if err = direct(); !storeLocked(err) {
			return err
		}
		if r = a.holder(ns); r == nil {
			return err
		}
	}
	a.log.Info("store held by a running server: through its control socket", "op", "cmd.control", "namespace", string(ns))
	if err := a.opensHeld(r, ns); err != nil {
		return err
	}
	return through(r, ns)
}

// sealingAnswer is what the control socket tells of what opens a store:
// nothing secret (see storage.Sealing).
type sealingAnswer struct {
	KDF     []byte `json:"kdf"`
	Check   []byte `json:"check"`
	Binding string `json:"binding"`
	Known   bool   `json:"known"`
}

// opensHeld refuses a command whose own --encrypt and passphrase would not
// open the store the server holds, with the error the store's file would
// give it: going through the server must not read what the file would
// refuse. A server that cannot tell (one of an earlier memgate) is taken
// at its word.
func (a *app) opensHeld(r *remote, ns memgate.Namespace) error {
	resp, err := r.do(a.ctx, http.MethodGet, "/control/v1/sealing/"+string(ns), nil)
	if memgate.ErrorCode(err) == memgate.CodeNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var sl sealingAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&sl); err != nil {
		return memgate.Internal("cmd.control", err)
	}
	enc, err := a.encryption()
	if err != nil {
		return err
	}
	if !sl.Known {
		return nil
	}
	return storage.SealingOf(sl.KDF, sl.Check, sl.Binding).Opens(enc)
}

// storeLocked reports whether err says a store is held by another process.
func storeLocked(err error) bool {
	var te *toolError // the tools' own failure
	return memgate.ErrorCode(err) == memgate.CodeStoreLocked || errors.As(err, &te) && te.Code == memgate.CodeStoreLocked
}

// holder returns a client of the control socket of the server that holds
// ns's store: the HTTP server's, or a stdio server's; nil when none says it
// does. A stdio server's socket that nobody listens on any more is a dead
// server's, and goes.
func (a *app) holder(ns memgate.Namespace) *remote {
	paths := []string{filepath.Join(a.cfg.DataDir, controlSocket)}
	stdio, _ := filepath.Glob(filepath.Join(a.cfg.DataDir, controlDir, "*.sock"))
	for _, path := range append(paths, stdio...) {
		if _, err := os.Stat(path); err != nil {
			continue
		}
		r := &remote{hc: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			}}}}
		var held struct {
			Holds bool `json:"holds"`
		}
		err := r.get(a.ctx, "/control/v1/holds/"+string(ns), &held)
		if errors.Is(err, syscall.ECONNREFUSED) && path != paths[0] {
			os.Remove(path)
		}
		if err == nil && held.Holds {
			return r
		}
	}
	return nil
}

// get decodes the JSON answer of a GET of path into v.
func (r *remote) get(ctx context.Context, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://memgate"+path, nil)
	if err != nil {
		return err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("control socket answered %d", resp.StatusCode)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<10)).Decode(v)
}

// do sends a request and returns the response of a success; an error
// answer becomes its *memgate.Error.
func (r *remote) do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://memgate"+path, body)
	if err != nil {
		return nil, memgate.Internal("cmd.control", err)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, &memgate.Error{Code: memgate.CodeStoreLocked, Cause: err,
			Message: "the store is held by a running memgate whose control socket does not answer"}
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	var env struct {
		Error struct {
			Code    memgate.Code   `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&env) != nil || env.Error.Code == "" {
		return nil, memgate.Internal("cmd.control", fmt.Errorf("control socket answered %d", resp.StatusCode))
	}
	return nil, &memgate.Error{Code: env.Error.Code, Message: env.Error.Message, Details: env.Error.Details}
}

// json does a request whose answer is JSON and copies it to w as it came.
func (r *remote) json(ctx context.Context, method, path string, body io.Reader, w io.Writer) error {
	resp, err := r.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}

// nsPath is the admin path of ns, then the rest.
func nsPath(ns memgate.Namespace, rest ...string) string {
	return admin.Prefix + "namespaces/" + string(ns) + strings.Join(rest, "")
}
