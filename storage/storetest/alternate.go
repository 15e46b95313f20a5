package storetest

import (
	"context"
	"io"
	"sync/atomic"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
)

// Alternate returns a store that sends each call to the next of rs in
// turn: replicas of one namespace, say, which must answer as one store.
func Alternate[S Store](rs ...S) Store {
	a := &alternate{}
	for _, r := range rs {
		a.rs = append(a.rs, r)
	}
	return a
}

type alternate struct {
	rs   []Store
	next atomic.Int64
}

func (a *alternate) r() Store { return a.rs[int(a.next.Add(1))%len(a.rs)] }

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
