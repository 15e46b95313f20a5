package tenants

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
)

const lockChildEnv = "MEMGATE_LOCK_CHILD" // a store path the child holds open

func TestMain(m *testing.M) {
	if path := os.Getenv(lockChildEnv); path != "" {
		s, err := storage.Open(path, storage.Options{})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("ready")
		bufio.NewReader(os.Stdin).ReadString('\n') // hold until the parent lets go
		s.Close()
		os.Exit(0)
	}
	// No test may leave a goroutine behind: a pool that closed must have
	// stopped its reaper, its opens and its stores' committers.
	goleak.VerifyTestMain(m)
}

func newPool(t testing.TB, opts Options) *Pool {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	opts.Store.NoSync = true
	p, err := NewPool(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(context.Background()); err != nil {
			t.Errorf("pool close: %v", err)
		}
	})
	return p
}

// openStoreFiles counts the store files this process holds open, from
// /proc/self/fd: the real count, not the pool's own bookkeeping.
func openStoreFiles(t testing.TB) int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && strings.HasSuffix(target, "/"+storage.FileName) {
			n++
		}
	}
	return n
}

func TestPoolUnderChurn(t *testing.T) {
	const (
		maxStores = 16
		workers   = 64
		spaces    = 1000
	)
	p := newPool(t, Options{MaxStores: maxStores})
	ctx := context.Background()
	duration := 3 * time.Second
	if testing.Short() {
		duration = 500 * time.Millisecond
	}
	var (
		stop      atomic.Bool
		peak      atomic.Int64
		ops, busy atomic.Int64
		written   sync.Map // namespace → the id last acknowledged there
		wg        sync.WaitGroup
	)
	// Store files another test left closing (a damaged store's handle
	// is let go in the background) are not this pool's.
	before := int64(openStoreFiles(t))
	sampler := make(chan struct{})
	go func() {
		defer close(sampler)
		for !stop.Load() {
			if n := int64(openStoreFiles(t)) - before; n > peak.Load() {
				peak.Store(n)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for i := 0; !stop.Load(); i++ {
				ns := memgate.Namespace(fmt.Sprintf("ns%03d", rng.IntN(spaces)))
				s, release, err := p.Lease(ctx, ns)
				if err != nil {
					if memgate.ErrorCode(err) != memgate.CodeTooManyStores {
						t.Errorf("lease: %v", err)
						return
					}
					busy.Add(1)
					continue
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				_, _, err = s.Put(ctx, memgate.Write{ID: id, Text: "churn " + id})
				release()
				if err != nil {
					t.Errorf("put: %v", err)
					return
				}
				written.Store(ns, id)
				ops.Add(1)
			}
		})
	}
	time.Sleep(duration)
	stop.Store(true)
	wg.Wait()
	<-sampler
	if peak.Load() > maxStores {
		t.Fatalf("%d store files open at once, more than --max-stores %d", peak.Load(), maxStores)
	}
	if ops.Load() == 0 {
		t.Fatal("no operation succeeded")
	}
	checked := 0
	written.Range(func(k, v any) bool {
		s, release, err := p.Lease(ctx, k.(memgate.Namespace))
		if err != nil {
			t.Errorf("lease for check: %v", err)
			return false
		}
		defer release()
		if _, err := s.Get(ctx, v.(string)); err != nil {
			t.Errorf("write acknowledged before an eviction is gone: %v", err)
			return false
		}
		checked++
		return true
	})
	t.Logf("%d ops, %d too_many_stores, peak %d open files, %d namespaces checked after reopen", ops.Load(), busy.Load(), peak.Load(), checked)
}

func TestLeasedStoreIsNeverEvicted(t *testing.T) {
	p := newPool(t, Options{MaxStores: 4})
	ctx := context.Background()
	held, release, err := p.Lease(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for i := range 50 {
		s, rel, err := p.Lease(ctx, memgate.Namespace(fmt.Sprint("other", i)))
		if err != nil {
			t.Fatalf("lease %d: %v", i, err)
		}
		if _, _, err := s.Put(ctx, memgate.Write{Text: "x"}); err != nil {
			t.Fatal(err)
		}
		rel()
	}
	if _, _, err := held.Put(ctx, memgate.Write{ID: "still", Text: "open"}); err != nil {
		t.Fatalf("the leased store was closed under its lease: %v", err)
	}
}

func TestFullPoolRefusesAtOnce(t *testing.T) {
	p := newPool(t, Options{MaxStores: 2})
	ctx := context.Background()
	_, r1, err1 := p.Lease(ctx, "a")
	_, r2, err2 := p.Lease(ctx, "b")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	start := time.Now()
	_, _, err := p.Lease(ctx, "c")
	if memgate.ErrorCode(err) != memgate.CodeTooManyStores {
		t.Fatalf("third lease: %v, want too_many_stores", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("a full pool must refuse, not wait")
	}
	s, r3, err := p.Lease(ctx, "a") // an open store can still be leased again
	if err != nil {
		t.Fatal(err)
	}
	r3()
	r1()
	if _, r, err := p.Lease(ctx, "c"); err != nil {
		t.Fatalf("after a release: %v", err)
	} else {
		r()
	}
	r2()
	_ = s
}

func TestConcurrentLeasesOpenOnce(t *testing.T) {
	p := newPool(t, Options{MaxStores: 4})
	ctx := context.Background()
	var wg sync.WaitGroup
	stores := make([]*storage.Store, 32)
	for i := range stores {
		wg.Go(func() {
			s, release, err := p.Lease(ctx, "same")
			if err != nil {
				t.Error(err)
				return
			}
			stores[i] = s
			release()
		})
	}
	wg.Wait()
	for _, s := range stores {
		if s != stores[0] {
			t.Fatal("concurrent leases of one namespace opened it more than once")
		}
	}
	if n := openStoreFiles(t); n != 1 {
		t.Fatalf("%d files open, want 1", n)
	}
}

func TestStoreLockedByAnotherProcessFailsOnlyThatNamespace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "stores", "locked", storage.FileName)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+path)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("child: %q", line)
	}
	p := newPool(t, Options{Dir: dir, MaxStores: 4})
	ctx := context.Background()
	_, _, err := p.Lease(ctx, "locked")
	if memgate.ErrorCode(err) != memgate.CodeStoreLocked {
		t.Fatalf("lease of the held namespace: %v, want store_locked", err)
	}
	s, release, err := p.Lease(ctx, "free")
	if err != nil {
		t.Fatalf("another namespace must keep working: %v", err)
	}
	if _, _, err := s.Put(ctx, memgate.Write{Text: "fine"}); err != nil {
		t.Fatal(err)
	}
	release()
	stdin.Close()
	cmd.Wait()
	if _, r, err := p.Lease(ctx, "locked"); err != nil {
		t.Fatalf("once the other process let go: %v", err)
	} else {
		r()
	}
}

func TestIdleStoresClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		p, err := NewPool(Options{Dir: dir, IdleTimeout: time.Minute, Store: storage.Options{NoSync: true}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(context.Background())
		ctx := context.Background()
		_, release, err := p.Lease(ctx, "idle")
		if err != nil {
			t.Fatal(err)
		}
		_, busyRelease, err := p.Lease(ctx, "busy")
		if err != nil {
			t.Fatal(err)
		}
		release()
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if p.openCount() != 2 {
			t.Fatalf("%d open before the timeout, want 2", p.openCount())
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if p.openCount() != 1 {
			t.Fatalf("%d open after the timeout, want 1 (the leased one stays)", p.openCount())
		}
		busyRelease()
	})
}

func TestCloseFlushesAndRefuses(t *testing.T) {
	dir := t.TempDir()
	p, err := NewPool(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, release, err := p.Lease(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Put(ctx, memgate.Write{ID: "kept", Text: "before shutdown"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- p.Close(ctx) }()
	select {
	case <-done:
		t.Fatal("Close returned while a lease was held")
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Lease(ctx, "x"); memgate.ErrorCode(err) != memgate.CodeUnavailable {
		t.Fatalf("lease after close: %v", err)
	}
	again, err := storage.Open(filepath.Join(dir, "stores", "x", storage.FileName), storage.Options{})
	if err != nil {
		t.Fatalf("the store must be closed and reopenable: %v", err)
	}
	defer again.Close()
	if _, err := again.Get(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
}

// A store folder or file that is a link, or a file where the folder
// should be, is refused as unavailable, saying so; nothing is written
// outside the stores folder, and the other namespaces work.
func TestStoreFolderLinkIsRefused(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	stores := filepath.Join(dir, "stores")
	if err := os.MkdirAll(filepath.Join(stores, "filelink"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(stores, "evil")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "x.db"), filepath.Join(stores, "filelink", "memgate.db")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stores, "isfile"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := newPool(t, Options{Dir: dir})
	for ns, want := range map[memgate.Namespace]string{"evil": "folder", "isfile": "folder", "filelink": "file"} {
		_, _, err := p.Lease(context.Background(), ns)
		if err == nil {
			t.Fatalf("%s: a store %s that is not what it seems was opened", ns, want)
		}
		if memgate.ErrorCode(err) != memgate.CodeUnavailable || !strings.Contains(err.Error(), "store "+want+" is not") {
			t.Errorf("%s: %v (%s), want unavailable naming the store %s", ns, err, memgate.ErrorCode(err), want)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("the pool wrote outside the stores folder: %v", entries)
	}
	if _, r, err := p.Lease(context.Background(), "fine"); err != nil {
		t.Fatalf("another namespace: %v", err)
	} else {
		r()
	}
}

func TestPoolMetrics(t *testing.T) {
	reader := metric.NewManualReader()
	provider := metric.NewMeterProvider(metric.WithReader(reader))
	p := newPool(t, Options{MaxStores: 1, Meter: provider.Meter("test")})
	ctx := context.Background()
	_, r, _ := p.Lease(ctx, "a")
	p.Lease(ctx, "b") // refused: a is leased
	r()
	_, r, _ = p.Lease(ctx, "b") // evicts a
	r()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				got[m.Name] = d.DataPoints[0].Value
			case metricdata.Gauge[int64]:
				got[m.Name] = d.DataPoints[0].Value
			case metricdata.Histogram[float64]:
				got[m.Name] = int64(d.DataPoints[0].Count)
			}
		}
	}
	want := map[string]int64{"memgate.pool.opens": 2, "memgate.pool.evictions": 1, "memgate.pool.refusals": 1,
		"memgate.pool.open.duration": 2, "memgate.pool.open_stores": 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
}

func TestUnusableDataFolderIsUnavailable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := NewPool(Options{Dir: file})
	if memgate.ErrorCode(err) != memgate.CodeUnavailable {
		t.Fatalf("NewPool over a file: %v, want unavailable", err)
	}
	if e := err.(*memgate.Error); strings.Contains(e.Message, file) {
		t.Fatal("the message must not hold the path")
	}
}
