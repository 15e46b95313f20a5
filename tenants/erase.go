package tenants

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"

	"github.com/memgate/memgate"
)

// Erase deletes namespace ns's store and everything memgate keeps in its
// folder (the store file, backups a rekey left beside it, the project
// record). New leases of ns wait from the moment Erase starts; leases in
// progress end first, on the store as it was, so no call sees half a
// namespace and none is cut. Then the store is closed and its folder
// removed; the next lease starts an empty store. When ctx ends while leases
// are still running, nothing is erased and the store serves on.
func (p *Pool) Erase(ctx context.Context, ns memgate.Namespace) error {
	const op = "tenants.Erase"
	p.mu.Lock()
	for {
		if p.closed {
			p.mu.Unlock()
			return errPoolClosed
		}
		done, ok := p.closing[ns]
		if !ok {
			break
		}
		p.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return cancelled(ctx)
		}
		p.mu.Lock()
	}
	done := make(chan struct{})
	p.closing[ns] = done // leases of ns wait for it (leaseOpened)
	delete(p.failed, ns)
	e, open := p.lru.Peek(ns)
	if open {
		p.lru.Remove(ns)
		stop := context.AfterFunc(ctx, func() {
			p.mu.Lock()
			p.idle.Broadcast()
			p.mu.Unlock()
		})
		for e.leases > 0 && ctx.Err() == nil {
			p.idle.Wait()
		}
		stop()
		if e.leases > 0 {
			// Given up: the store stays as it was, and serves on.
			p.lru.Add(ns, e)
			delete(p.closing, ns)
			p.mu.Unlock()
			close(done)
			return cancelled(ctx)
		}
	}
	p.mu.Unlock()

	var err error
	if open {
		<-e.ready
		if e.err == nil {
			if cerr := e.store.Close(); cerr != nil {
				p.log.Error("store close failed", "op", op, "namespace", string(ns), "error", cerr)
			}
		}
	}
	if rerr := p.root.RemoveAll(string(ns)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = memgate.Internal(op, rerr)
	}
	if p.opts.Shared != nil && err == nil {
		// Other processes' replicas find the log gone at their next look,
		// and make theirs again.
		if serr := p.opts.Shared.Erase(ctx, ns); serr != nil {
			err = unavailable(op, serr)
		}
	}
	p.mu.Lock()
	delete(p.closing, ns)
	delete(p.failed, ns)
	p.mu.Unlock()
	close(done)
	return err
}

// NamespaceEntry is a namespace with a store on disk, and whether the pool
// holds it open.
type NamespaceEntry struct {
	Namespace memgate.Namespace
	Open      bool
}

// Namespaces returns, in name order, up to limit namespaces whose names
// come after cursor and that have a store folder, and the cursor of the
// next page ("" when there is none). It opens no store.
func (p *Pool) Namespaces(ctx context.Context, cursor string, limit int) ([]NamespaceEntry, string, error) {
	const op = "tenants.Namespaces"
	if p.opts.Shared != nil {
		return p.sharedNamespaces(ctx, cursor, limit)
	}
	dir, err := p.root.Open(".")
	if err != nil {
		return nil, "", memgate.Internal(op, err)
	}
	ents, err := dir.ReadDir(-1)
	dir.Close()
	if err != nil {
		return nil, "", memgate.Internal(op, err)
	}
	var names []string
	for _, d := range ents {
		if !d.IsDir() || strings.HasPrefix(d.Name(), ".") || d.Name() <= cursor {
			continue
		}
		if _, err := memgate.ParseNamespace("namespace", d.Name()); err != nil {
			continue
		}
		names = append(names, d.Name())
	}
	slices.Sort(names)
	next := ""
	if len(names) > limit {
		names = names[:limit]
		next = names[limit-1]
	}
	out := make([]NamespaceEntry, len(names))
	p.mu.Lock()
	for i, n := range names {
		_, open := p.lru.Peek(memgate.Namespace(n))
		out[i] = NamespaceEntry{Namespace: memgate.Namespace(n), Open: open}
	}
	p.mu.Unlock()
	return out, next, nil
}
