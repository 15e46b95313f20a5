package tenants

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
)

// withOpen replaces how the pool opens a store file for the test's length.
func withOpen(t *testing.T, open func(path string, opts storage.Options) (*storage.Store, error)) {
	t.Helper()
	old := openStore
	openStore = open
	t.Cleanup(func() { openStore = old })
}

// panicsFor opens stores as usual except those of namespace ns, whose open
// panics as bbolt does on a damaged file. It counts the opens of ns.
func panicsFor(ns string, opens *atomic.Int64) func(string, storage.Options) (*storage.Store, error) {
	return func(path string, opts storage.Options) (*storage.Store, error) {
		if filepath.Base(filepath.Dir(path)) == ns {
			opens.Add(1)
			panic("invalid freelist page: 0, page type is unknown<00>")
		}
		return storage.Open(path, opts)
	}
}

// closeSoon closes p, failing the test if Close does not return.
func closeSoon(t *testing.T, p *Pool) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.Close(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Pool.Close blocked")
	}
}

// damage zeroes every page of a closed store file after its two meta pages:
// the file keeps its size and valid meta pages, and bbolt panics when it
// reads the freelist.
func damage(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	const metaPages = 2 * 4096
	if fi.Size() <= metaPages {
		t.Fatalf("store file of %d bytes", fi.Size())
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, fi.Size()-metaPages), metaPages); err != nil {
		t.Fatal(err)
	}
}

func TestOpenThatPanicsFailsOnlyItsNamespace(t *testing.T) {
	var opens atomic.Int64
	withOpen(t, panicsFor("broken", &opens))
	p, err := NewPool(Options{Dir: t.TempDir(), MaxStores: 2, Store: storage.Options{NoSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 3 {
		_, _, err := p.Lease(ctx, "broken")
		if memgate.ErrorCode(err) != memgate.CodeUnavailable {
			t.Fatalf("lease %d of the damaged namespace: %v, want unavailable", i, err)
		}
		if msg := err.(*memgate.Error).Message; !strings.Contains(msg, "backup") {
			t.Fatalf("message %q does not say to restore from a backup", msg)
		}
	}
	if n := opens.Load(); n != 1 {
		t.Fatalf("the damaged store was opened %d times, want 1", n)
	}
	// Both slots are free: two other namespaces are leased at once.
	var releases []func()
	for _, ns := range []memgate.Namespace{"a", "b"} {
		_, release, err := p.Lease(ctx, ns)
		if err != nil {
			t.Fatalf("lease of %s beside the damaged store: %v", ns, err)
		}
		releases = append(releases, release)
	}
	if _, _, err := p.Lease(ctx, "c"); memgate.ErrorCode(err) != memgate.CodeTooManyStores {
		t.Fatalf("a third lease with two slots: %v, want too_many_stores", err)
	}
	for _, r := range releases {
		r()
	}
	closeSoon(t, p)
}

func TestWaitersOfAnOpenThatPanicsHearTheError(t *testing.T) {
	const waiters = 8
	gate := make(chan struct{})
	var started sync.WaitGroup
	started.Add(1)
	var once sync.Once
	withOpen(t, func(path string, opts storage.Options) (*storage.Store, error) {
		once.Do(started.Done)
		<-gate
		panic("assertion failed: Page expected to be: 8")
	})
	p, err := NewPool(Options{Dir: t.TempDir(), MaxStores: 1, Store: storage.Options{NoSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, waiters)
	go func() {
		_, _, err := p.Lease(context.Background(), "broken")
		errs <- err
	}()
	started.Wait()
	for range waiters - 1 {
		go func() {
			_, _, err := p.Lease(context.Background(), "broken")
			errs <- err
		}()
	}
	close(gate)
	for range waiters {
		select {
		case err := <-errs:
			if memgate.ErrorCode(err) != memgate.CodeUnavailable {
				t.Fatalf("a lease of the damaged namespace: %v, want unavailable", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a lease waiting for the open never returned")
		}
	}
	if n := p.openCount(); n != 0 {
		t.Fatalf("%d slots in use after the failed open, want 0", n)
	}
	closeSoon(t, p)
}

func TestLeaseWaitingForAnOpenEndsWithItsContext(t *testing.T) {
	gate := make(chan struct{})
	entered := make(chan struct{})
	withOpen(t, func(path string, opts storage.Options) (*storage.Store, error) {
		close(entered)
		<-gate
		return storage.Open(path, opts)
	})
	p := newPool(t, Options{MaxStores: 2})
	first := make(chan error, 1)
	go func() {
		_, release, err := p.Lease(context.Background(), "slow")
		if err == nil {
			release()
		}
		first <- err
	}()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := p.Lease(ctx, "slow"); memgate.ErrorCode(err) != memgate.CodeUnavailable || !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled lease waiting for the open: %v", err)
	}
	close(gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

func TestRealDamagedStoreFailsFastAndThePoolCloses(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	p := newPool(t, Options{Dir: dir})
	for _, ns := range []memgate.Namespace{"victim", "bystander"} {
		s, release, err := p.Lease(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if _, _, err := s.Put(ctx, memgate.Write{Text: fmt.Sprint(i, " a memory worth a page or two of postings")}); err != nil {
				t.Fatal(err)
			}
		}
		release()
	}
	closeSoon(t, p)
	damage(t, filepath.Join(dir, "stores", "victim", storage.FileName))

	p2, err := NewPool(Options{Dir: dir, Store: storage.Options{NoSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, _, err := p2.Lease(ctx, "victim"); memgate.ErrorCode(err) != memgate.CodeUnavailable {
			t.Fatalf("lease %d of the damaged store: %v, want unavailable", i, err)
		}
	}
	s, release, err := p2.Lease(ctx, "bystander")
	if err != nil {
		t.Fatalf("the other store: %v", err)
	}
	if st, err := s.Stats(ctx); err != nil || st.Count != 20 {
		t.Fatalf("the other store's stats: %+v %v", st, err)
	}
	release()
	closeSoon(t, p2)
}

func TestFailedOpenIsRememberedBriefly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var opens atomic.Int64
		broken := true
		withOpen(t, func(path string, opts storage.Options) (*storage.Store, error) {
			opens.Add(1)
			if broken {
				return nil, &memgate.Error{Code: memgate.CodeUnavailable, Message: "the store is damaged"}
			}
			return storage.Open(path, opts)
		})
		p, err := NewPool(Options{Dir: t.TempDir(), RetryOpenAfter: 10 * time.Second, Store: storage.Options{NoSync: true}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(context.Background())
		ctx := context.Background()
		for range 5 {
			if _, _, err := p.Lease(ctx, "ns"); memgate.ErrorCode(err) != memgate.CodeUnavailable {
				t.Fatalf("lease: %v, want unavailable", err)
			}
		}
		if n := opens.Load(); n != 1 {
			t.Fatalf("%d opens within the retry interval, want 1", n)
		}
		broken = false
		time.Sleep(9 * time.Second)
		if _, _, err := p.Lease(ctx, "ns"); err == nil || opens.Load() != 1 {
			t.Fatalf("before the interval ends: %v after %d opens", err, opens.Load())
		}
		time.Sleep(time.Second)
		_, release, err := p.Lease(ctx, "ns")
		if err != nil {
			t.Fatalf("once the interval has passed: %v", err)
		}
		release()
		if n := opens.Load(); n != 2 {
			t.Fatalf("%d opens, want 2", n)
		}
	})
}

func TestDamagedFileIsOpenedAgainOnlyOnceChanged(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "stores", "ns", storage.FileName)
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("not a store"), 0o600); err != nil {
		t.Fatal(err)
	}
	var opens atomic.Int64
	withOpen(t, func(path string, opts storage.Options) (*storage.Store, error) {
		opens.Add(1)
		if b, err := os.ReadFile(path); err == nil && string(b) == "not a store" || err == nil && string(b) == "still not one" {
			return nil, &memgate.Error{Code: memgate.CodeUnavailable, Message: "damaged", Cause: storage.ErrDamaged}
		}
		return storage.Open(path, opts)
	})
	// Every lease comes after the retry interval.
	p := newPool(t, Options{Dir: dir, RetryOpenAfter: time.Nanosecond})
	ctx := context.Background()
	for range 5 {
		if _, _, err := p.Lease(ctx, "ns"); !errors.Is(err, storage.ErrDamaged) {
			t.Fatalf("lease: %v", err)
		}
	}
	if n := opens.Load(); n != 1 {
		t.Fatalf("an unchanged damaged file was opened %d times, want 1", n)
	}
	// A read lease of it fails too: the file is there.
	if _, _, err := p.LeaseRead(ctx, "ns"); !errors.Is(err, storage.ErrDamaged) {
		t.Fatalf("read lease: %v", err)
	}
	// Changed in place: opened again (and still damaged).
	if err := os.WriteFile(file, []byte("still not one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Lease(ctx, "ns"); !errors.Is(err, storage.ErrDamaged) || opens.Load() != 2 {
		t.Fatalf("after a change: %v, %d opens", err, opens.Load())
	}
	// Replaced by a good store (a restored backup): served.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	good, err := storage.Open(file, storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	good.Close()
	s, release, err := p.Lease(ctx, "ns")
	if err != nil {
		t.Fatalf("after the restore: %v", err)
	}
	if _, err := s.Stats(ctx); err != nil {
		t.Fatal(err)
	}
	release()
}

func TestCloseDoesNotWaitForAHungOpenPastItsContext(t *testing.T) {
	gate := make(chan struct{})
	entered := make(chan struct{})
	withOpen(t, func(path string, opts storage.Options) (*storage.Store, error) {
		close(entered)
		<-gate
		return nil, &memgate.Error{Code: memgate.CodeUnavailable, Message: "never mind"}
	})
	p, err := NewPool(Options{Dir: t.TempDir(), Store: storage.Options{NoSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	leased := make(chan error, 1)
	go func() {
		_, _, err := p.Lease(context.Background(), "hung")
		leased <- err
	}()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the grace is over
	done := make(chan error, 1)
	go func() { done <- p.Close(ctx) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "still opening") {
			t.Fatalf("close: %v, want the open still running named", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Pool.Close waited for an open that does not end")
	}
	close(gate)
	if err := <-leased; memgate.ErrorCode(err) != memgate.CodeUnavailable {
		t.Fatalf("the hung lease: %v", err)
	}
}

// A store found damaged while open is closed when its last lease ends, so
// that a file restored from a backup is served without a restart.
func TestStoreFoundDamagedIsClosedAndItsRestoredFileServed(t *testing.T) {
	dir := t.TempDir()
	p, err := NewPool(Options{Dir: dir, RetryOpenAfter: time.Millisecond, Store: storage.Options{NoSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeSoon(t, p)
	ctx := t.Context()
	st, release, err := p.Lease(ctx, "victim")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Put(ctx, memgate.Write{ID: "kept", Text: "a memory worth a backup"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "stores", "victim", storage.FileName)
	backup, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	release()

	damage(t, path) // under the open store's map
	st, release, err = p.Lease(ctx, "victim")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, "kept"); memgate.ErrorCode(err) != memgate.CodeUnavailable || !st.Damaged() {
		t.Fatalf("get from a damaged store: %v (damaged %v)", err, st.Damaged())
	}
	release()
	for i := 0; p.openCount() != 0; i++ {
		if i == 3000 {
			t.Fatal("the damaged store was never closed")
		}
		time.Sleep(time.Millisecond)
	}

	// Until its file changes, the namespace stays damaged.
	if _, _, err := p.Lease(ctx, "victim"); memgate.ErrorCode(err) != memgate.CodeUnavailable {
		t.Fatalf("lease of the damaged store's unchanged file: %v", err)
	}
	time.Sleep(2 * time.Millisecond) // past RetryOpenAfter: only the file's change reopens it
	if _, _, err := p.Lease(ctx, "victim"); memgate.ErrorCode(err) != memgate.CodeUnavailable {
		t.Fatalf("lease of the damaged store's unchanged file, later: %v", err)
	}
	// Restored as the docs say: a copy moved into place.
	if err := os.WriteFile(path+".restore", backup, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".restore", path); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // past the last failed lease's RetryOpenAfter
	st, release, err = p.Lease(ctx, "victim")
	if err != nil {
		t.Fatalf("lease of the restored store: %v", err)
	}
	defer release()
	if m, err := st.Get(ctx, "kept"); err != nil || m.Text != "a memory worth a backup" {
		t.Fatalf("get from the restored store: %v %q", err, m.Text)
	}
}

// A shutdown whose deadline has passed still closes every store that is
// open, so each lets go of its file, and says nothing of stores "still
// opening" that were not.
func TestCloseAfterItsDeadlineStillClosesOpenStores(t *testing.T) {
	dir := t.TempDir()
	p, err := NewPool(Options{Dir: dir, Store: storage.Options{NoSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	names := []memgate.Namespace{"a", "b", "c", "d", "e", "f"}
	for _, ns := range names {
		st, release, err := p.Lease(t.Context(), ns)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.Put(t.Context(), memgate.Write{ID: "x", Text: "kept"}); err != nil {
			t.Fatal(err)
		}
		release()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("close after its deadline: %v", err)
	}
	for _, ns := range names {
		s, err := storage.Open(filepath.Join(dir, "stores", string(ns), storage.FileName), storage.Options{NoSync: true})
		if err != nil {
			t.Fatalf("store %s after the pool closed: %v", ns, err)
		}
		s.Close()
	}
}
