package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/admin"
	"github.com/memgate/memgate/tenants"
)

// A data folder served over HTTP holds two files of the server that
// serves it:
//
//   - http.lock, locked (flock) for as long as the server runs: a second
//     `serve --transport http` on the folder refuses to start with one
//     line, instead of reporting ready and failing every call of the
//     stores the first one holds. Stdio servers do not take it: two
//     editors on two projects share a data folder, each with its own
//     namespace.
//   - control.sock, the control socket (mode 0600; a peer of another user
//     is closed before anything is read): the admin API without tokens,
//     for the store commands of the same user. When a store command finds
//     its store held (store_locked), it does its work through the socket,
//     with the same output.
const (
	httpLockFile  = "http.lock"
	controlSocket = "control.sock"
)

// errServedOverHTTP is the one line a second HTTP server on a data folder
// stops with.
var errServedOverHTTP = errors.New("--data-dir: another memgate already serves this data folder over HTTP; stop it, or serve another --data-dir")

// serveControl serves h on the data folder's control socket until ctx
// ends. The lock is held, so a socket file left there is a dead server's.
func (a *app) serveControl(ctx context.Context, h http.Handler) (func(), error) {
	path := filepath.Join(a.cfg.DataDir, controlSocket)
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
// commands use: the stats tool's answer, and purging the trash.
func (a *app) controlHandler(pool *tenants.Pool, stats *server.Server) http.Handler {
	local := &memgate.Principal{Subject: "local"} // the server's own user (the peer check)
	// The local user's own files: an import through the socket is not bounded.
	o := admin.Options{MaxImportBytes: 1 << 62, Logger: a.log,
		Extra: map[string]http.HandlerFunc{
			"GET /control/v1/stats/{ns}": func(w http.ResponseWriter, r *http.Request) {
				ns, err := memgate.ParseNamespace("namespace", r.PathValue("ns"))
				if err != nil {
					admin.WriteError(w, err)
					return
				}
				ctx := server.WithPrincipal(r.Context(), &memgate.Principal{Subject: "control", Namespace: string(ns)})
				res, err := stats.Call(ctx, server.ToolStats, []byte("{}"))
				if err == nil {
					err = resultError(res)
				}
				if err != nil {
					var te *toolError
					if errors.As(err, &te) {
						err = &memgate.Error{Code: te.Code, Message: te.Message}
					}
					admin.WriteError(w, err)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				b, _ := encodeJSON(res.StructuredContent)
				w.Write(b)
			},
			"POST /control/v1/trash/{ns}/purge": func(w http.ResponseWriter, r *http.Request) {
				ns, err := memgate.ParseNamespace("namespace", r.PathValue("ns"))
				if err == nil {
					var n int
					st, release, ok, lerr := leaseStore(r.Context(), pool, ns)
					if err = lerr; err == nil && ok {
						n, err = st.EmptyTrash(r.Context())
						release()
					}
					if err == nil {
						b, _ := encodeJSON(map[string]any{"purged": n})
						w.Header().Set("Content-Type", "application/json")
						w.Write(b)
						return
					}
				}
				admin.WriteError(w, err)
			},
		}}
	if a.audit != nil {
		o.Audit = a.audit.auditAdmin
	}
	h := admin.Handler(adminOps(pool, a.cfg.DataDir), o)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(server.WithPrincipal(r.Context(), local)))
	})
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
// store and that server's control socket answers, it runs through instead,
// on the namespace the command would have used.
func (a *app) heldStore(direct func() error, through func(r *remote, ns memgate.Namespace) error) error {
	err := direct()
	var te *toolError // the tools' own failure
	if memgate.ErrorCode(err) != memgate.CodeStoreLocked && !(errors.As(err, &te) && te.Code == memgate.CodeStoreLocked) {
		return err
	}
	path := filepath.Join(a.cfg.DataDir, controlSocket)
	if _, serr := os.Stat(path); serr != nil {
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
	r := &remote{hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}}}
	a.log.Info("store held by a running server: through its control socket", "op", "cmd.control", "namespace", string(ns))
	return through(r, ns)
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
