package tenants

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate"
)

// A sweep deletes the expired memories of every open store, and the trash
// past its retention.
func TestSweeperDeletesExpiredMemoriesOfOpenStores(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	var opts Options
	opts.Store.Now = clock
	opts.TrashRetention = time.Hour
	p := newPool(t, opts)
	ctx := context.Background()
	for _, ns := range []memgate.Namespace{"one", "two"} {
		s, release, err := p.Lease(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []memgate.Write{
			{Text: "short " + string(ns), TTL: time.Minute},
			{Text: "long " + string(ns), TTL: time.Hour},
			{ID: "gone", Text: "forgotten " + string(ns)},
		} {
			if _, _, err := s.Put(ctx, w); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Delete(ctx, "gone", nil); err != nil {
			t.Fatal(err)
		}
		release()
	}
	if e, tr := p.SweepOpen(ctx); e != 0 || tr != 0 {
		t.Fatalf("swept %d expired, %d trash before any expiry", e, tr)
	}
	now.Add(int64(time.Minute))
	if e, tr := p.SweepOpen(ctx); e != 2 || tr != 0 {
		t.Fatalf("swept %d expired, %d trash; want 2 and 0", e, tr)
	}
	now.Add(int64(time.Hour))
	if e, tr := p.SweepOpen(ctx); e != 2 || tr != 2 {
		t.Fatalf("swept %d expired, %d trash; want 2 and 2", e, tr)
	}
}

// The sweeper runs on its own, every interval.
func TestSweeperRunsEveryInterval(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC).UnixNano())
	var opts Options
	opts.Store.Now = func() time.Time { return time.Unix(0, now.Load()) }
	opts.SweepInterval = 10 * time.Millisecond
	opts.IdleTimeout = time.Hour
	p := newPool(t, opts)
	ctx := context.Background()
	s, release, err := p.Lease(ctx, "ns")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Put(ctx, memgate.Write{Text: "brief", TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	release()
	now.Add(int64(time.Second))
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, _, err := s.Sweep(ctx, 0) // nothing left once the sweeper has run
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sweeper never ran")
		}
		// That sweep did the sweeper's work; write another to wait for.
		if _, _, err := s.Put(ctx, memgate.Write{Text: "brief again", TTL: time.Second}); err != nil {
			t.Fatal(err)
		}
		now.Add(int64(time.Second))
		time.Sleep(50 * time.Millisecond)
	}
}

// A store the pool closed (evicted for another) with memories still to
// expire and trash still to purge is reopened and swept once they are due.
func TestSweeperReopensClosedStoresWhenDue(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC).UnixNano())
	var opts Options
	opts.Store.Now = func() time.Time { return time.Unix(0, now.Load()) }
	opts.MaxStores = 1
	opts.TrashRetention = time.Hour
	p := newPool(t, opts)
	ctx := context.Background()
	s, release, err := p.Lease(ctx, "early")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []memgate.Write{{Text: "brief", TTL: time.Minute}, {ID: "gone", Text: "forgotten"}} {
		if _, _, err := s.Put(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "gone", nil); err != nil {
		t.Fatal(err)
	}
	release()
	// Another namespace takes the one slot: "early" is closed.
	_, release, err = p.Lease(ctx, "late")
	if err != nil {
		t.Fatal(err)
	}
	release()
	if p.Holds("early") {
		t.Fatal("early is still open")
	}
	if e, tr := p.SweepDue(ctx); e != 0 || tr != 0 {
		t.Fatalf("swept %d, %d before anything was due", e, tr)
	}
	now.Add(int64(time.Minute))
	if e, tr := p.SweepDue(ctx); e != 1 || tr != 0 {
		t.Fatalf("swept %d expired, %d trash; want 1 and 0", e, tr)
	}
	// Reopened for the sweep, it was closed again (for "late", say) with
	// its trash still to purge.
	_, release, err = p.Lease(ctx, "late")
	if err != nil {
		t.Fatal(err)
	}
	release()
	now.Add(int64(time.Hour))
	if e, tr := p.SweepDue(ctx); e != 0 || tr != 1 {
		t.Fatalf("swept %d expired, %d trash; want 0 and 1", e, tr)
	}
	_, release, err = p.Lease(ctx, "late")
	if err != nil {
		t.Fatal(err)
	}
	release()
	if e, tr := p.SweepDue(ctx); e != 0 || tr != 0 {
		t.Fatalf("swept %d, %d with nothing left", e, tr)
	}
}
