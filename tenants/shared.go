package tenants

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
)

// Shared keeps the namespaces that several processes serve at once (a
// PostgreSQL database): each namespace's writes are a log there, and the
// pool's stores are this process's replicas of those logs, in files that
// are only caches — the pool removes one that cannot be trusted (a crash
// left it, or a write could not be logged) and makes it again from its log.
type Shared interface {
	// Log returns namespace ns's log.
	Log(ns memgate.Namespace) storage.Log
	// Exists reports whether ns has a log.
	Exists(ctx context.Context, ns memgate.Namespace) (bool, error)
	// Namespaces returns, in name order, up to limit namespaces with a log
	// whose names come after after.
	Namespaces(ctx context.Context, after string, limit int) ([]memgate.Namespace, error)
	// Erase deletes ns's log.
	Erase(ctx context.Context, ns memgate.Namespace) error
}

// ReplicasFolder is the folder, inside a data folder, where a process that
// serves shared namespaces keeps its replicas: never the stores folder, so
// that a data folder used with bbolt before loses nothing.
const ReplicasFolder = "replicas"

// openReplica opens ns's replica at path (inside the stores folder),
// from the log's snapshot when there is no file or the file is behind the
// snapshot. A file that cannot be opened is removed, so that the next open
// (after the pool's pause) makes it again.
func (p *Pool) openReplica(path string, ns memgate.Namespace, opts storage.Options) (*storage.Store, error) {
	const op = "tenants.open"
	log := p.opts.Shared.Log(ns)
	opts.Log = log
	// The file is a cache: a crash that loses its last commits loses
	// nothing the log does not hold, and a file a crash left is never
	// trusted (storage.ErrStaleReplica).
	opts.NoSync = true
	ctx, cancel := context.WithTimeout(context.Background(), snapshotTimeout)
	defer cancel()
	remove := func() error {
		if err := p.root.Remove(storeFileIn(ns)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return storage.StoreError(op, memgate.Internal(op, err))
		}
		return nil
	}
	fromSnapshot := func() error {
		if _, err := p.root.Lstat(storeFileIn(ns)); !errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		_, err := storage.WriteSnapshot(ctx, log, path)
		return err
	}
	var s *storage.Store
	err := fromSnapshot()
	if err == nil {
		s, err = openStore(path, opts)
	}
	if err == nil && behindSnapshot(ctx, s, log) {
		s.Close()
		if err = remove(); err == nil {
			if err = fromSnapshot(); err == nil {
				s, err = openStore(path, opts)
			}
		}
	}
	if errors.Is(err, storage.ErrStaleReplica) || errors.Is(err, storage.ErrDamaged) {
		if err = remove(); err == nil {
			if err = fromSnapshot(); err == nil {
				s, err = openStore(path, opts)
			}
		}
	}
	if err == nil {
		return s, nil
	}
	if memgate.ErrorCode(err) == memgate.CodeStoreLocked {
		return nil, err
	}
	if rerr := remove(); rerr != nil {
		p.log.Error("a replica's file that did not open could not be removed", "op", op, "namespace", string(ns), "error", rerr)
	}
	switch {
	case errors.Is(err, storage.ErrWrongPassphrase), errors.Is(err, storage.ErrEncrypted), errors.Is(err, storage.ErrNotEncrypted):
		return nil, err // this process's settings: its message says which
	case errors.Is(err, storage.ErrBadSnapshot), errors.Is(err, storage.ErrOtherNamespace), errors.Is(err, storage.ErrDamaged):
		p.log.Error("a namespace's snapshot in the shared store cannot be used", "op", op, "namespace", string(ns), "error", err)
		return nil, errBadSnapshot
	case errors.As(err, new(*memgate.Error)):
		return nil, err
	}
	return nil, unavailable(op, err) // the log's own errors: the database cannot be reached
}

// behindSnapshot reports whether replica s holds fewer entries than the
// log's snapshot (or another epoch's): the snapshot is the quicker way up.
func behindSnapshot(ctx context.Context, s *storage.Store, log storage.Log) bool {
	st, err := log.Head(ctx)
	if err != nil || st.Snapshot == 0 {
		return false
	}
	epoch, seq := s.ReplicaPlace()
	return seq < st.Snapshot || epoch != 0 && epoch != st.Epoch
}

// errBadSnapshot answers, for a moment, the calls of a namespace whose
// snapshot cannot be used.
var errBadSnapshot = &memgate.Error{Code: memgate.CodeUnavailable, Op: "tenants.open",
	Message: "this namespace's snapshot in the shared store is damaged or altered there; see the server's log"}

// errBadLog answers, for a moment, the calls of a namespace whose log holds
// an entry that cannot be applied: its replica is made again from the log
// at the next lease after that.
var errBadLog = &memgate.Error{Code: memgate.CodeUnavailable, Op: "tenants.open",
	Message: "this namespace's log in the shared store holds an entry that cannot be applied (damaged or altered there); see the server's log"}

// snapshotTimeout bounds the fetch of a namespace's snapshot.
const snapshotTimeout = 2 * time.Minute

// dropReplica removes the file of ns's replica, closed after it was found
// damaged: the next lease makes it again from the log.
func (p *Pool) dropReplica(ns memgate.Namespace) {
	if err := p.root.Remove(storeFileIn(ns)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		p.log.Error("a damaged replica's file could not be removed", "op", "tenants.close",
			"namespace", string(ns), "error", err)
	}
}

// sharedExists is exists for shared namespaces: a log, or a replica open.
// A failure to ask counts as one, so that the lease reaches the error.
func (p *Pool) sharedExists(ctx context.Context, ns memgate.Namespace) bool {
	ok, err := p.opts.Shared.Exists(ctx, ns)
	return ok || err != nil
}

// replicaPath is the path of ns's replica file.
func (p *Pool) replicaPath(ns memgate.Namespace) string {
	return filepath.Join(p.stores, storeFileIn(ns))
}

// sharedNamespaces is Namespaces for shared namespaces.
func (p *Pool) sharedNamespaces(ctx context.Context, cursor string, limit int) ([]NamespaceEntry, string, error) {
	const op = "tenants.Namespaces"
	names, err := p.opts.Shared.Namespaces(ctx, cursor, limit+1)
	if err != nil {
		return nil, "", unavailable(op, err)
	}
	next := ""
	if len(names) > limit {
		names = names[:limit]
		next = string(names[limit-1])
	}
	out := make([]NamespaceEntry, len(names))
	p.mu.Lock()
	for i, n := range names {
		_, open := p.lru.Peek(n)
		out[i] = NamespaceEntry{Namespace: n, Open: open}
	}
	p.mu.Unlock()
	return out, next, nil
}

// unavailable is the error of a shared store that cannot be reached.
func unavailable(op string, err error) error {
	return &memgate.Error{Code: memgate.CodeUnavailable, Op: op, Cause: err,
		Message: "the shared store cannot be reached; retry shortly"}
}
