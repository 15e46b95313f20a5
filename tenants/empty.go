package tenants

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
)

// Store is what a lease yields: a namespace's store, or, from LeaseRead,
// the empty answers of a namespace that has none on disk.
type Store interface {
	Get(ctx context.Context, id string) (memgate.Memory, error)
	List(ctx context.Context, q memgate.ListQuery) (memgate.Page, error)
	Search(ctx context.Context, q memgate.Query) (memgate.Result, error)
	Stats(ctx context.Context) (memgate.StoreStats, error)
	Put(ctx context.Context, w memgate.Write) (memgate.Memory, bool, error)
	Write(ctx context.Context, w memgate.Write) (memgate.Written, error)
	Delete(ctx context.Context, id string, ifVersion *int64) error
	Export(ctx context.Context, w io.Writer, cursor string, limit int) (int, string, error)
	ExportLines(ctx context.Context, cursor string, limit int, take func(line []byte) bool) (int, string, error)
}

// LeaseRead is Lease for a call that only reads (or deletes, which changes
// nothing where nothing is stored): when ns has no store on disk it creates
// none, holds no slot, and returns a store that answers as an empty one
// does (get and forget not_found, search no hits, list and export no
// memories, stats zeros) and refuses writes. A namespace nobody has written
// to costs no file, no folder and no slot however many read it.
func (p *Pool) LeaseRead(ctx context.Context, ns memgate.Namespace) (Store, func(), error) {
	if !p.exists(ctx, ns) {
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return nil, nil, errPoolClosed
		}
		p.observeEmpty(ctx)
		return noStore{}, func() {}, nil
	}
	s, release, err := p.Lease(ctx, ns)
	if err != nil {
		return nil, nil, err
	}
	return s, release, nil
}

// exists reports whether ns has a store: open, opening, closing, or a file
// on disk. Anything but a file that is plainly not there counts as one, so
// that its errors reach the caller.
func (p *Pool) exists(ctx context.Context, ns memgate.Namespace) bool {
	p.mu.Lock()
	_, open := p.lru.Peek(ns)
	_, closing := p.closing[ns]
	p.mu.Unlock()
	if open || closing {
		return true
	}
	if p.opts.Shared != nil {
		return p.sharedExists(ctx, ns)
	}
	_, err := p.root.Lstat(p.storeFile(ns))
	return !errors.Is(err, fs.ErrNotExist)
}

// noStore answers for a namespace that has no store on disk.
type noStore struct{}

var (
	errNoMemory = &memgate.Error{Code: memgate.CodeNotFound, Message: "no memory has this id"}
	errNoWrite  = errors.New("a write reached a namespace leased for reading")
)

func (noStore) Get(context.Context, string) (memgate.Memory, error) {
	return memgate.Memory{}, errNoMemory
}

func (noStore) List(context.Context, memgate.ListQuery) (memgate.Page, error) {
	return memgate.Page{Memories: []memgate.Memory{}}, nil
}

func (noStore) Search(context.Context, memgate.Query) (memgate.Result, error) {
	return memgate.Result{Hits: []memgate.Hit{}, Receipt: memgate.Receipt{RetrievalMode: memgate.RetrievalLexical}}, nil
}

func (noStore) Stats(context.Context) (memgate.StoreStats, error) { return memgate.StoreStats{}, nil }

func (noStore) Put(context.Context, memgate.Write) (memgate.Memory, bool, error) {
	return memgate.Memory{}, false, memgate.Internal("tenants.noStore", errNoWrite)
}

func (noStore) Write(context.Context, memgate.Write) (memgate.Written, error) {
	return memgate.Written{}, memgate.Internal("tenants.noStore", errNoWrite)
}

func (noStore) Delete(context.Context, string, *int64) error { return errNoMemory }

// Export writes what an empty store's export holds: the header line on the
// first page, and no memories.
func (n noStore) Export(ctx context.Context, w io.Writer, cursor string, limit int) (int, string, error) {
	var werr error
	n.ExportLines(ctx, cursor, limit, func(line []byte) bool {
		_, werr = w.Write(line)
		return werr == nil
	})
	if werr != nil {
		return 0, "", memgate.Internal("tenants.noStore", werr)
	}
	return 0, "", nil
}

// ExportLines hands take the header line on the first page, and no memories.
func (noStore) ExportLines(_ context.Context, cursor string, _ int, take func(line []byte) bool) (int, string, error) {
	if cursor == "" {
		b, _ := json.Marshal(map[string]int{"memgate_export": storage.ExportFormat})
		take(append(b, '\n'))
	}
	return 0, "", nil
}
