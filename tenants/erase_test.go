package tenants

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate"
)

// Erasing a namespace under load: every call sees the namespace whole,
// before or after; no lease is cut (each writer's store answers for as
// long as it holds it); afterwards the namespace starts empty and the
// others are untouched.
func TestEraseUnderLoad(t *testing.T) {
	dir := t.TempDir()
	p := newPool(t, Options{Dir: dir, MaxStores: 4})
	ctx := context.Background()
	const ns, other = memgate.Namespace("erased"), memgate.Namespace("kept")
	for _, n := range []memgate.Namespace{ns, other} {
		s, release, err := p.Lease(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if _, _, err := s.Put(ctx, memgate.Write{ID: fmt.Sprint("m", i), Text: "a memory of the namespace"}); err != nil {
				t.Fatal(err)
			}
		}
		release()
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	var calls, afterErase atomic.Int64
	errs := make(chan error, 64)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				s, release, err := p.Lease(ctx, ns)
				if err != nil {
					errs <- err
					return
				}
				// Within one lease the store is whole: the memories from
				// before the erasure are all there, or none is.
				_, err0 := s.Get(ctx, "m0")
				_, _, err = s.Put(ctx, memgate.Write{Text: fmt.Sprint("writer ", w, " call ", i)})
				_, err19 := s.Get(ctx, "m19")
				time.Sleep(time.Millisecond) // hold the lease a while
				release()
				if err != nil {
					errs <- fmt.Errorf("a call on a leased store failed: %w", err)
					return
				}
				if (err0 == nil) != (err19 == nil) {
					errs <- fmt.Errorf("half a namespace: m0 %v, m19 %v", err0, err19)
					return
				}
				if err0 != nil {
					afterErase.Add(1)
				}
				calls.Add(1)
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if err := p.Erase(ctx, ns); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if afterErase.Load() == 0 || calls.Load() == afterErase.Load() {
		t.Fatalf("calls %d, after the erasure %d: the load did not span it", calls.Load(), afterErase.Load())
	}
	// The kept namespace is whole; the erased one holds only what came after.
	s, release, err := p.Lease(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Stats(ctx); st.Count != 20 {
		t.Fatalf("the other namespace holds %d", st.Count)
	}
	release()
	s, release, err = p.Lease(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "m0"); memgate.ErrorCode(err) != memgate.CodeNotFound {
		t.Fatalf("a memory from before the erasure: %v", err)
	}
	release()
}

func TestEraseRemovesTheFolderAndListsNamespaces(t *testing.T) {
	dir := t.TempDir()
	p := newPool(t, Options{Dir: dir})
	ctx := context.Background()
	for _, n := range []memgate.Namespace{"a", "b", "c"} {
		s, release, err := p.Lease(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		s.Put(ctx, memgate.Write{Text: "x"})
		release()
	}
	page, next, err := p.Namespaces(context.Background(), "", 2)
	if err != nil || len(page) != 2 || page[0].Namespace != "a" || !page[0].Open || next != "b" {
		t.Fatalf("%v %q %v", page, next, err)
	}
	if page, next, _ = p.Namespaces(context.Background(), next, 2); len(page) != 1 || page[0].Namespace != "c" || next != "" {
		t.Fatalf("%v %q", page, next)
	}
	if err := p.Erase(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(StoreDir(dir, "b")); !os.IsNotExist(err) {
		t.Fatalf("the store folder is still there: %v", err)
	}
	if page, _, _ = p.Namespaces(context.Background(), "", 10); len(page) != 2 {
		t.Fatalf("after erasing b: %v", page)
	}
	// An erasure that cannot wait for a lease gives up and erases nothing.
	_, release, _ := p.Lease(ctx, "a")
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := p.Erase(short, "a"); memgate.ErrorCode(err) != memgate.CodeUnavailable {
		t.Fatalf("erase past its deadline: %v", err)
	}
	release()
	s, release, err := p.Lease(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Stats(ctx); st.Count != 1 {
		t.Fatalf("a was erased after all: %v", st)
	}
	release()
}
