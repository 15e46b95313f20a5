package postgres_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/storage/postgres"
	"github.com/memgate/memgate/storage/storetest"
)

// testDB returns a migrated database for the test.
func testDB(t *testing.T) *postgres.DB {
	t.Helper()
	dsn := os.Getenv("MEMGATE_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("no PostgreSQL: set MEMGATE_TEST_POSTGRES_DSN")
	}
	ctx := context.Background()
	if _, err := postgres.Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	db, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

var nsSeq atomic.Int64

// newNamespace is a namespace no other test uses.
func newNamespace() memgate.Namespace {
	return memgate.Namespace(fmt.Sprintf("t%d-%d", time.Now().UnixNano(), nsSeq.Add(1)))
}

// replicaOf opens a replica of ns's log in a file of its own.
func replicaOf(t *testing.T, db *postgres.DB, ns memgate.Namespace, o storage.Options) *storage.Store {
	t.Helper()
	o.NoSync = true
	o.Log = db.Log(ns)
	o.Binding = string(ns)
	if o.Staleness == 0 {
		o.Staleness = time.Nanosecond // every read looks at the log
	}
	s, err := storage.Open(filepath.Join(t.TempDir(), "memgate.db"), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestContract runs the store's contract on two replicas of one
// namespace, each call going to the other replica than the call before.
func TestContract(t *testing.T) {
	db := testDB(t)
	storetest.Run(t, func(t *testing.T, o storage.Options) storetest.Store {
		ns := newNamespace()
		return &alternate{rs: [2]*storage.Store{replicaOf(t, db, ns, o), replicaOf(t, db, ns, o)}}
	})
}

// alternate sends each call to its replicas in turn.
type alternate struct {
	rs   [2]*storage.Store
	next atomic.Int64
}

func (a *alternate) r() *storage.Store { return a.rs[a.next.Add(1)%2] }

func (a *alternate) Write(ctx context.Context, w memgate.Write) (memgate.Written, error) {
	return a.r().Write(ctx, w)
}
func (a *alternate) Delete(ctx context.Context, id string, v *int64) error {
	return a.r().Delete(ctx, id, v)
}
func (a *alternate) Get(ctx context.Context, id string) (memgate.Memory, error) {
	return a.r().Get(ctx, id)
}
func (a *alternate) List(ctx context.Context, q memgate.ListQuery) (memgate.Page, error) {
	return a.r().List(ctx, q)
}
func (a *alternate) Search(ctx context.Context, q memgate.Query) (memgate.Result, error) {
	return a.r().Search(ctx, q)
}
func (a *alternate) Stats(ctx context.Context) (memgate.StoreStats, error) { return a.r().Stats(ctx) }
func (a *alternate) Propose(ctx context.Context, w memgate.Write) (memgate.Memory, error) {
	return a.r().Propose(ctx, w)
}
func (a *alternate) Candidates(ctx context.Context, c string, n int) (memgate.Page, error) {
	return a.r().Candidates(ctx, c, n)
}
func (a *alternate) Approve(ctx context.Context, id string) (memgate.Memory, error) {
	return a.r().Approve(ctx, id)
}
func (a *alternate) Reject(ctx context.Context, id string) error { return a.r().Reject(ctx, id) }
func (a *alternate) Trash(ctx context.Context, c string, n int) (storage.TrashPage, error) {
	return a.r().Trash(ctx, c, n)
}
func (a *alternate) Restore(ctx context.Context, id string) (memgate.Memory, error) {
	return a.r().Restore(ctx, id)
}
func (a *alternate) EmptyTrash(ctx context.Context) (int, error) { return a.r().EmptyTrash(ctx) }
func (a *alternate) Export(ctx context.Context, w io.Writer, c string, n int) (int, string, error) {
	return a.r().Export(ctx, w, c, n)
}
func (a *alternate) Import(ctx context.Context, r io.Reader, c string) (storage.ImportReport, error) {
	return a.r().Import(ctx, r, c)
}
func (a *alternate) Sweep(ctx context.Context, d time.Duration) (int, int, error) {
	return a.r().Sweep(ctx, d)
}

var _ sync.Locker // keeps sync for the tests below
