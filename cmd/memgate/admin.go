package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/admin"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

// The admin API's operations on the pool of a running server. They answer
// with the shapes the store commands print (store.go, trash.go), so that a
// command that goes through the control socket prints what it prints when
// it works on the store directly.

var errNoStore = &memgate.Error{Code: memgate.CodeNotFound, Message: "this namespace has no store"}

// leaseStore leases ns's store when it has one on disk; ok is false (and
// nothing is created) when it has none.
func leaseStore(ctx context.Context, pool *tenants.Pool, ns memgate.Namespace) (*storage.Store, func(), bool, error) {
	s, release, err := pool.LeaseRead(ctx, ns)
	if err != nil {
		return nil, nil, false, err
	}
	st, ok := s.(*storage.Store)
	if !ok {
		release()
		return nil, nil, false, nil
	}
	return st, release, true, nil
}

// adminMayUse says whether the admin principal of r may act on ns: a
// credential that names namespaces (a tokens file's line, a token's claim)
// only on those; one that names its own namespace alone only on that one;
// any other (MEMGATE_ADMIN_TOKEN, the control socket's user) on every one.
func adminMayUse(r *http.Request, ns memgate.Namespace) bool {
	p := server.PrincipalFrom(r.Context())
	switch {
	case p == nil:
		return true
	case len(p.Namespaces) > 0:
		return p.MayUse(string(ns))
	}
	return p.Namespace == "" || p.Namespace == string(ns)
}

// storeStats is the stats of GET namespaces/{ns}: zeros for a namespace
// without a store.
type storeStats struct {
	Namespace memgate.Namespace `json:"namespace"`
	memgate.StoreStats
}

func adminOps(pool *tenants.Pool, dataDir string, tools *server.Server, log *slog.Logger) admin.Ops {
	sweepBackupDirs(tenants.StoresDir(dataDir))
	stats := func(ctx context.Context, ns memgate.Namespace) (storeStats, error) {
		st, release, ok, err := leaseStore(ctx, pool, ns)
		if err != nil || !ok {
			return storeStats{Namespace: ns}, err
		}
		defer release()
		s, err := st.Stats(ctx)
		return storeStats{ns, s}, err
	}
	// withStore runs fn on ns's store; a namespace without one is
	// not_found, and none is created.
	withStore := func(ctx context.Context, ns memgate.Namespace, fn func(*storage.Store) (any, error)) (any, error) {
		st, release, ok, err := leaseStore(ctx, pool, ns)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errNoStore
		}
		defer release()
		return fn(st)
	}
	return admin.Ops{
		Namespaces: func(ctx context.Context, cursor string, limit int) (admin.NamespacePage, error) {
			ents, next, err := pool.Namespaces(ctx, cursor, limit)
			if err != nil {
				return admin.NamespacePage{}, err
			}
			page := admin.NamespacePage{NextCursor: next, Namespaces: make([]admin.NamespaceInfo, 0, len(ents))}
			for _, e := range ents {
				info := admin.NamespaceInfo{Namespace: string(e.Namespace), Open: e.Open}
				s, err := stats(ctx, e.Namespace)
				switch {
				case ctx.Err() != nil:
					return admin.NamespacePage{}, ctx.Err()
				case err != nil:
					// One store that cannot be read (damaged, held
					// elsewhere) is that namespace's problem, not the list's.
					info.Error = memgate.ErrorCode(err)
					log.Warn("a namespace's store cannot be read", "op", "admin.namespaces",
						"namespace", string(e.Namespace), "code", string(info.Error))
				default:
					info.Count, info.Bytes, info.StoreBytes = s.Count, s.Bytes, s.StoreBytes
				}
				page.Namespaces = append(page.Namespaces, info)
			}
			return page, nil
		},
		Stats: func(ctx context.Context, ns memgate.Namespace) (any, error) { return stats(ctx, ns) },
		Export: func(ctx context.Context, ns memgate.Namespace, w io.Writer) error {
			s, release, err := pool.LeaseRead(ctx, ns)
			if err != nil {
				return err
			}
			defer release()
			cursor := ""
			for {
				_, next, err := s.Export(ctx, w, cursor, memgate.MaxListLimit)
				if err != nil || next == "" {
					return err
				}
				cursor = next
			}
		},
		Import: func(ctx context.Context, ns memgate.Namespace, r io.Reader, onConflict string) (any, error) {
			st, release, err := pool.Lease(ctx, ns)
			if err != nil {
				return nil, err
			}
			defer release()
			rep, err := st.Import(ctx, r, onConflict)
			return struct {
				Namespace memgate.Namespace `json:"namespace"`
				storage.ImportReport
			}{ns, rep}, err
		},
		Backup: func(ctx context.Context, ns memgate.Namespace, w io.Writer) (int64, error) {
			st, release, ok, err := leaseStore(ctx, pool, ns)
			if err != nil {
				return 0, err
			}
			if !ok {
				return 0, errNoStore
			}
			// The copy goes to a file beside the stores first: the store's
			// read transaction (which keeps writers from growing the file's
			// mapping) lasts as long as a local copy, not as long as a slow
			// client, and the lease ends before the transfer.
			dir, err := makeBackupDir(tenants.StoresDir(dataDir), backupDirPrefix+strconv.Itoa(os.Getpid())+"-*")
			if err == nil {
				defer os.RemoveAll(dir)
				_, err = st.BackupFile(ctx, filepath.Join(dir, storage.FileName))
			}
			if diskFull(err) {
				// No room for the copy on the data's disk, which is when a
				// backup is needed most: it goes to the client straight from
				// the read transaction, held as long as the client takes.
				os.RemoveAll(dir)
				defer release()
				return st.Backup(ctx, w)
			}
			release()
			if err != nil {
				return 0, storage.StoreError("cmd.backup", err)
			}
			f, err := os.Open(filepath.Join(dir, storage.FileName))
			if err != nil {
				return 0, memgate.Internal("cmd.backup", err)
			}
			defer f.Close()
			return io.Copy(w, f)
		},
		Candidates: func(ctx context.Context, ns memgate.Namespace, cursor string, limit int) (any, error) {
			st, release, ok, err := leaseStore(ctx, pool, ns)
			if err != nil {
				return nil, err
			}
			page := memgate.Page{}
			if ok {
				defer release()
				if page, err = st.Candidates(ctx, cursor, limit); err != nil {
					return nil, err
				}
			}
			if page.Memories == nil {
				page.Memories = []memgate.Memory{}
			}
			return page, nil
		},
		Approve: func(ctx context.Context, ns memgate.Namespace, id string) (any, error) {
			return withStore(ctx, ns, func(st *storage.Store) (any, error) {
				m, err := st.Approve(ctx, id)
				return map[string]any{"memory": m}, err
			})
		},
		Reject: func(ctx context.Context, ns memgate.Namespace, id string) (any, error) {
			return withStore(ctx, ns, func(st *storage.Store) (any, error) {
				return map[string]any{"id": id, "rejected": true}, st.Reject(ctx, id)
			})
		},
		Trash: func(ctx context.Context, ns memgate.Namespace, cursor string, limit int) (any, error) {
			st, release, ok, err := leaseStore(ctx, pool, ns)
			if err != nil {
				return nil, err
			}
			page := storage.TrashPage{}
			if ok {
				defer release()
				if page, err = st.Trash(ctx, cursor, limit); err != nil {
					return nil, err
				}
			}
			if page.Memories == nil {
				page.Memories = []storage.Trashed{}
			}
			return page, nil
		},
		Restore: func(ctx context.Context, ns memgate.Namespace, id string) (any, error) {
			return withStore(ctx, ns, func(st *storage.Store) (any, error) {
				m, err := st.Restore(ctx, id)
				return map[string]any{"memory": m, "restored": true}, err
			})
		},
		Erase: pool.Erase,
		Tool: func(ctx context.Context, ns memgate.Namespace, tool string, args json.RawMessage) (json.RawMessage, error) {
			p := memgate.Principal{Namespace: string(ns)}
			if caller := server.PrincipalFrom(ctx); caller != nil {
				p.Subject = caller.Subject
			}
			return tools.Invoke(server.WithPrincipal(ctx, &p), tool, args)
		},
	}
}

// makeBackupDir is os.MkdirTemp; a variable for tests.
var makeBackupDir = os.MkdirTemp

// diskFull reports whether err is a full disk or an exhausted quota.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// backupDirPrefix names the folders beside the stores where backups are
// copied before they are sent: .backup-PID-random, PID the process's.
const backupDirPrefix = ".backup-"

// sweepBackupDirs removes the backup folders of processes that no longer
// run (a server stopped during a backup leaves its folder); those of a
// running process, this one's or another server's on the same data
// folder, stay.
func sweepBackupDirs(stores string) {
	entries, _ := os.ReadDir(stores)
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), backupDirPrefix)
		pid, _, dash := strings.Cut(rest, "-")
		n, err := strconv.Atoi(pid)
		if !ok || !dash || err != nil || n <= 0 || !e.IsDir() || processAlive(n) {
			continue
		}
		os.RemoveAll(filepath.Join(stores, e.Name()))
	}
}
