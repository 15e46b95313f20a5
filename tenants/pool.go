package tenants

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/telemetry"
)

// DefaultMaxStores is the default of --max-stores.
const DefaultMaxStores = 16

// Options configure a Pool.
type Options struct {
	// Dir is the data folder; stores live in Dir/stores/<namespace>/
	// (StoreDir).
	Dir string
	// MaxStores bounds the stores open or opening at once; 0 means
	// DefaultMaxStores.
	MaxStores int
	// IdleTimeout closes a store nobody has leased for that long; 0 never.
	IdleTimeout time.Duration
	// Store configures every store the pool opens.
	Store storage.Options
	// Logger receives open and close failures; nil discards them.
	Logger *slog.Logger
	// Meter records the pool's metrics; nil means the global provider's.
	Meter metric.Meter
	// Tracer makes a span per lease (lease.go); nil makes none.
	Tracer trace.TracerProvider
	// SweepInterval is how often the expired memories and the trash of the
	// open stores are swept (sweep.go); 0 never.
	SweepInterval time.Duration
	// TrashRetention is how long a forgotten memory stays in the trash;
	// Store.TrashRetention is set from it.
	TrashRetention time.Duration
	// KeepTrash makes the sweep leave the trash's retention alone (what
	// expired in it still goes): for a store command, which does not know
	// the retention of the server that keeps the trash.
	KeepTrash bool
	// RetryOpenAfter is how long a failed open is remembered: until then,
	// leases of that namespace fail at once with the same error instead of
	// opening the file again. 0 means DefaultRetryOpenAfter. A lock held by
	// another process is never remembered (its wait is bounded already). A
	// damaged file (an open that panicked, or storage.ErrDamaged) is
	// remembered for as long as the file stays as it was: once the interval
	// has passed, the file is opened again only if it has been replaced or
	// changed (restored from a backup).
	RetryOpenAfter time.Duration
	// Project, when set, binds the store of its namespace to its folder:
	// the store records the folder's path hash in ProjectFile when it is
	// first opened, and a store that records another folder's is refused,
	// by NewPool and by every open, with errProjectTaken.
	Project *ProjectBinding
	// Shared, when set, keeps the namespaces, which other processes may
	// serve at once: the pool's stores are replicas of their logs
	// (shared.go), in Dir/replicas.
	Shared Shared
}

// ProjectFile is the file, in a project namespace's store folder, that
// holds the hex SHA-256 of the absolute path of the folder it belongs to.
const ProjectFile = "project"

var errProjectTaken = &memgate.Error{Code: memgate.CodeInvalidArgument, Op: "tenants.project",
	Details: map[string]any{"field": "project-dir"},
	Message: "this project's namespace already holds the store of another folder (their names look alike " +
		"and their paths share the namespace's hash); rename one of the folders, or give this one " +
		"a namespace of its own with --namespace-strategy fixed --namespace NAME"}

// DefaultRetryOpenAfter is the default of Options.RetryOpenAfter.
const DefaultRetryOpenAfter = time.Second

// maxFailed bounds the failed opens a pool remembers.
const maxFailed = 4096

// openStore opens one store file; tests replace it.
var openStore = storage.Open

// Pool is an LRU of open stores with leases. It is safe for concurrent use.
type Pool struct {
	opts   Options
	root   *os.Root // the stores folder: no namespace reaches outside it
	stores string
	log    *slog.Logger
	m      *poolMetrics
	tracer trace.Tracer // nil: no spans

	mu      sync.Mutex
	idle    *sync.Cond                                // signalled when a lease ends
	lru     *simplelru.LRU[memgate.Namespace, *entry] // opening and open stores
	closing map[memgate.Namespace]chan struct{}       // stores being closed
	failed  map[memgate.Namespace]failure             // opens that failed, remembered
	due     map[memgate.Namespace]time.Time           // closed stores the sweeper has work in, from when
	closed  bool
	stop    chan struct{}
	reaper  sync.WaitGroup
}

// entry is one store, opening or open.
type entry struct {
	ns       memgate.Namespace
	ready    chan struct{} // closed once the open has finished
	store    *storage.Store
	err      error
	leases   int
	lastUsed time.Time
}

// failure is a failed open: its error, until when it is remembered, and,
// for a damaged file, the file as it was then.
type failure struct {
	err   error
	until time.Time
	file  fs.FileInfo
}

var (
	errTooMany = &memgate.Error{Code: memgate.CodeTooManyStores,
		Message: "every store slot is in use by a running request; retry shortly"}
	errPoolClosed = &memgate.Error{Code: memgate.CodeUnavailable,
		Message: "the server is shutting down"}
)

// NewPool creates the stores folder if needed and returns an empty pool.
func NewPool(opts Options) (*Pool, error) {
	const op = "tenants.NewPool"
	if opts.MaxStores <= 0 {
		opts.MaxStores = DefaultMaxStores
	}
	if opts.RetryOpenAfter <= 0 {
		opts.RetryOpenAfter = DefaultRetryOpenAfter
	}
	if opts.TrashRetention > 0 {
		opts.Store.TrashRetention = opts.TrashRetention
	}
	opts.TrashRetention = opts.Store.TrashRetention
	if opts.Store.TailBudget == nil {
		// One budget for the index tails of every store the pool opens.
		opts.Store.TailBudget = storage.NewTailBudget(storage.DefaultTailBudget)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stores := StoresDir(opts.Dir)
	if opts.Shared != nil {
		stores = StoresDir(filepath.Join(opts.Dir, ReplicasFolder))
	}
	err := os.MkdirAll(stores, 0o700)
	var root *os.Root
	if err == nil {
		root, err = os.OpenRoot(stores)
	}
	if err != nil {
		return nil, &memgate.Error{Code: memgate.CodeUnavailable, Op: op, Cause: err,
			Message: "the data folder cannot be created or opened; check --data-dir and its permissions"}
	}
	// The LRU's own bound is never reached: the pool evicts by itself, and
	// only idle stores.
	l, _ := simplelru.NewLRU[memgate.Namespace, *entry](1<<30, nil)
	p := &Pool{opts: opts, root: root, stores: stores, log: log, lru: l,
		closing: map[memgate.Namespace]chan struct{}{}, failed: map[memgate.Namespace]failure{},
		due:  map[memgate.Namespace]time.Time{},
		stop: make(chan struct{})}
	p.idle = sync.NewCond(&p.mu)
	meter := opts.Meter
	if meter == nil {
		meter = otel.Meter(telemetry.ScopeTenants)
	}
	if opts.Tracer != nil {
		p.tracer = opts.Tracer.Tracer(telemetry.ScopeTenants)
	}
	if p.m, err = newPoolMetrics(meter, p.openCount); err == nil {
		err = p.observeEmbedded(meter)
	}
	if err != nil {
		root.Close()
		return nil, memgate.Internal(op, err)
	}
	if opts.Project != nil {
		if err := p.checkProject(opts.Project.Namespace, false); err != nil {
			root.Close()
			return nil, err
		}
	}
	if opts.IdleTimeout > 0 {
		p.reaper.Go(p.reap)
	}
	if opts.SweepInterval > 0 {
		p.reaper.Go(p.sweep)
	}
	return p, nil
}

// Lease returns the store of namespace ns, opening it if needed, and a
// release function the caller must call exactly once when its request ends.
// While leased, the store is never closed by the pool.
func (p *Pool) Lease(ctx context.Context, ns memgate.Namespace) (*storage.Store, func(), error) {
	s, release, _, err := p.LeaseOpened(ctx, ns)
	return s, release, err
}

// Holds reports whether ns's store is open (or opening) in the pool: this
// process holds its file.
func (p *Pool) Holds(ns memgate.Namespace) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.lru.Peek(ns)
	return ok
}

// LeaseOpened is Lease that also reports whether this lease opened the
// store (a miss), for tracing and benchmarks.
func (p *Pool) LeaseOpened(ctx context.Context, ns memgate.Namespace) (*storage.Store, func(), bool, error) {
	if p.tracer == nil && !p.m.lease.Enabled(ctx) {
		return p.leaseOpened(ctx, ns)
	}
	return p.observeLease(ctx, ns)
}

// leaseOpened is LeaseOpened, unobserved.
func (p *Pool) leaseOpened(ctx context.Context, ns memgate.Namespace) (*storage.Store, func(), bool, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, nil, false, errPoolClosed
		}
		if f, ok := p.failed[ns]; ok {
			if time.Now().Before(f.until) {
				p.mu.Unlock()
				return nil, nil, false, f.err
			}
			if f.file == nil {
				delete(p.failed, ns)
			} else {
				// A damaged file is opened again only once it has changed.
				p.mu.Unlock()
				same := p.unchanged(ns, f.file)
				p.mu.Lock()
				if cur, ok := p.failed[ns]; ok && cur.err == f.err {
					if same {
						cur.until = time.Now().Add(p.opts.RetryOpenAfter)
						p.failed[ns] = cur
						p.mu.Unlock()
						return nil, nil, false, f.err
					}
					delete(p.failed, ns)
				}
				p.mu.Unlock()
				continue
			}
		}
		if done, ok := p.closing[ns]; ok {
			// Its file is still open: wait for the close, then open it again.
			p.mu.Unlock()
			select {
			case <-done:
				continue
			case <-ctx.Done():
				return nil, nil, false, cancelled(ctx)
			}
		}
		if e, ok := p.lru.Get(ns); ok {
			e.leases++
			p.mu.Unlock()
			select {
			case <-e.ready:
			case <-ctx.Done():
				p.release(e, true)
				return nil, nil, false, cancelled(ctx)
			}
			if e.err != nil {
				p.release(e, true)
				return nil, nil, false, e.err
			}
			return e.store, p.releaser(e), false, nil
		}
		var victim *entry
		if p.lru.Len() >= p.opts.MaxStores {
			if victim = p.oldestIdle(); victim == nil {
				p.mu.Unlock()
				p.m.refusals.Add(ctx, 1)
				return nil, nil, false, errTooMany
			}
			p.lru.Remove(victim.ns)
			p.closing[victim.ns] = make(chan struct{})
		}
		e := &entry{ns: ns, ready: make(chan struct{}), leases: 1}
		p.lru.Add(ns, e)
		p.mu.Unlock()

		if victim != nil {
			p.closeEntry(victim)
			p.m.evictions.Add(ctx, 1)
		}
		start := time.Now()
		var panicked bool
		e.store, panicked, e.err = p.openRecovered(ns)
		p.m.openLatency.Record(ctx, time.Since(start).Seconds())
		if e.err != nil {
			var file fs.FileInfo
			if panicked || errors.Is(e.err, storage.ErrDamaged) {
				file, _ = p.root.Lstat(p.storeFile(ns))
			}
			p.mu.Lock()
			if cur, ok := p.lru.Peek(ns); ok && cur == e {
				p.lru.Remove(ns)
			}
			e.leases--
			p.remember(ns, e.err, file)
			p.mu.Unlock()
			close(e.ready)
			return nil, nil, false, e.err
		}
		p.m.opens.Add(ctx, 1)
		close(e.ready)
		return e.store, p.releaser(e), true, nil
	}
}

func cancelled(ctx context.Context) error {
	return &memgate.Error{Code: memgate.CodeUnavailable, Message: "the request was cancelled", Cause: ctx.Err()}
}

// openRecovered is open that turns a panic into an error: a file damaged
// in a way the store's own checks miss can make bbolt panic while it
// opens it, and that must fail this namespace's calls, not the process.
// It reports whether the open panicked.
func (p *Pool) openRecovered(ns memgate.Namespace) (s *storage.Store, panicked bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			// What was half opened (a file handle, its lock, a mapping) is
			// out of reach now: the namespace is not opened again.
			p.log.Error("store open panicked", "op", "tenants.open", "namespace", string(ns),
				"error", fmt.Sprintf("%.200v", r))
			s, panicked, err = nil, true, errDamaged(fmt.Errorf("panic: %.200v", r))
		}
	}()
	s, err = p.open(ns)
	return s, false, err
}

// errDamaged is the error of a store whose file cannot be read.
func errDamaged(cause error) error {
	return &memgate.Error{Code: memgate.CodeUnavailable, Op: "tenants.open", Cause: cause,
		Message: "this namespace's store is damaged and cannot be opened; move a backup of it into " +
			"its file's place, which the next call opens"}
}

// errNotPlain is the error of a store whose folder or file is not what it
// seems: it is not opened, and its own calls are unavailable until an
// operator puts it right.
func errNotPlain(condition string) error {
	return &memgate.Error{Code: memgate.CodeUnavailable, Op: "tenants.open",
		Message: condition + "; it is not opened until that is put right"}
}

// remember keeps a failed open of ns, so that the leases that follow fail
// at once: for RetryOpenAfter, and for a damaged file (file, as it is now:
// nil for other failures) as long as it stays unchanged; never for a lock
// held by another process. Called with p.mu held.
func (p *Pool) remember(ns memgate.Namespace, err error, file fs.FileInfo) {
	if file == nil && memgate.ErrorCode(err) == memgate.CodeStoreLocked {
		return
	}
	now := time.Now()
	if len(p.failed) >= maxFailed {
		for k, old := range p.failed {
			if old.file == nil && !now.Before(old.until) {
				delete(p.failed, k)
			}
		}
		if len(p.failed) >= maxFailed {
			return
		}
	}
	p.failed[ns] = failure{err: err, until: now.Add(p.opts.RetryOpenAfter), file: file}
}

// storeFile is the path of ns's store file inside the stores folder.
func (p *Pool) storeFile(ns memgate.Namespace) string { return storeFileIn(ns) }

// unchanged reports whether ns's store file is still the file it was: the
// same file, of the same size and modification time.
func (p *Pool) unchanged(ns memgate.Namespace, was fs.FileInfo) bool {
	fi, err := p.root.Lstat(p.storeFile(ns))
	return err == nil && os.SameFile(fi, was) && fi.Size() == was.Size() && fi.ModTime().Equal(was.ModTime())
}

// oldestIdle returns the least recently used store nobody leases; nil when
// every store is leased. Called with p.mu held.
func (p *Pool) oldestIdle() *entry {
	for _, ns := range p.lru.Keys() { // oldest first
		e, _ := p.lru.Peek(ns)
		if e.leases == 0 {
			return e
		}
	}
	return nil
}

func (p *Pool) releaser(e *entry) func() {
	var once sync.Once
	return func() { once.Do(func() { p.release(e, true) }) }
}

// release ends a lease of e; used says whether it counts as a use of the
// store (a sweep's does not, so that sweeping never keeps an idle store
// open).
func (p *Pool) release(e *entry, used bool) {
	// A store found damaged is closed once its last lease ends, so that a
	// file restored from a backup (moved into place) is served without a
	// restart. Until its file changes, the namespace is remembered as
	// damaged, as a failed open is: its old handle may keep the file's
	// lock in this process, and an open of the same file would read as
	// another process holding it.
	damaged := e.store != nil && e.store.Damaged()
	badLog := damaged && e.store.LogDamaged()
	var file fs.FileInfo
	if damaged {
		file, _ = p.root.Lstat(p.storeFile(e.ns))
	}
	p.mu.Lock()
	e.leases--
	if used {
		e.lastUsed = time.Now()
	}
	if e.leases == 0 {
		p.idle.Broadcast()
	}
	retire := false
	if e.leases == 0 && damaged && !p.closed {
		if cur, ok := p.lru.Peek(e.ns); ok && cur == e {
			p.lru.Remove(e.ns)
			p.closing[e.ns] = make(chan struct{})
			switch {
			case p.opts.Shared == nil:
				p.remember(e.ns, errDamaged(storage.ErrDamaged), file)
			case badLog:
				// Made again from the log after a pause, so that a log that
				// cannot be applied is not read whole at every call.
				p.remember(e.ns, errBadLog, nil)
			}
			retire = true
		}
	}
	p.mu.Unlock()
	if retire {
		go p.closeEntry(e)
	}
}

// open opens ns's store inside the stores folder.
func (p *Pool) open(ns memgate.Namespace) (*storage.Store, error) {
	const op = "tenants.open"
	name := string(ns)
	if err := p.root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, storage.StoreError(op, err) // a full disk or a read-only filesystem is unavailable
	}
	// The folder and the file must be what they seem, not links that lead
	// out of the stores folder.
	if fi, err := p.root.Lstat(name); err != nil || !fi.IsDir() {
		return nil, errNotPlain("this namespace's store folder is not a plain folder (a link or a file stands in its place)")
	}
	file := storeFileIn(ns)
	if fi, err := p.root.Lstat(file); err == nil && !fi.Mode().IsRegular() {
		return nil, errNotPlain("this namespace's store file is not a regular file (a link or a folder stands in its place)")
	}
	// A failure goes back to the caller, which logs it once. An encrypted
	// store is bound to its namespace: a file copied from another's folder
	// does not open.
	opts := p.opts.Store
	opts.Binding = name
	if p.opts.Shared != nil {
		return p.openReplica(filepath.Join(p.stores, file), ns, opts)
	}
	s, err := openStore(filepath.Join(p.stores, file), opts)
	if err != nil {
		return nil, err
	}
	// Checked once the store is open, and so locked: two processes whose
	// folders share a namespace cannot both find the record missing.
	if err := p.checkProject(ns, true); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// checkProject refuses the store of ns when it is the project's namespace
// and its folder records another folder's path hash. When the record is
// missing and write is set, it writes the project's.
func (p *Pool) checkProject(ns memgate.Namespace, write bool) error {
	const op = "tenants.project"
	b := p.opts.Project
	if b == nil || ns != b.Namespace {
		return nil
	}
	name := filepath.Join(string(ns), ProjectFile)
	data, err := p.root.ReadFile(name)
	switch {
	case err == nil:
		if strings.TrimSpace(string(data)) != b.PathHash {
			return errProjectTaken
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return memgate.Internal(op, err)
	case !write:
		return nil
	}
	if err := p.root.WriteFile(name, []byte(b.PathHash+"\n"), 0o600); err != nil {
		return memgate.Internal(op, err)
	}
	return nil
}

// closeEntry closes a store that has left the LRU, then lets waiters for its
// namespace go on.
func (p *Pool) closeEntry(e *entry) {
	due, ok := e.store.NextDue(p.sweepRetention())
	if ok {
		p.mu.Lock()
		p.due[e.ns] = due
		p.mu.Unlock()
	}
	if err := e.store.Close(); err != nil {
		p.log.Error("store close failed", "op", "tenants.close", "namespace", string(e.ns), "error", err)
	}
	if p.opts.Shared != nil && e.store.Damaged() {
		p.dropReplica(e.ns)
	}
	p.mu.Lock()
	done := p.closing[e.ns]
	delete(p.closing, e.ns)
	p.mu.Unlock()
	if done != nil {
		close(done)
	}
}

// openCount is the number of stores open or opening.
func (p *Pool) openCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lru.Len() + len(p.closing)
}

// reap closes stores idle for longer than IdleTimeout.
func (p *Pool) reap() {
	every := max(p.opts.IdleTimeout/4, time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		var victims []*entry
		p.mu.Lock()
		for _, ns := range p.lru.Keys() {
			e, _ := p.lru.Peek(ns)
			if e.leases == 0 && time.Since(e.lastUsed) >= p.opts.IdleTimeout {
				p.lru.Remove(ns)
				p.closing[ns] = make(chan struct{})
				victims = append(victims, e)
			}
		}
		p.mu.Unlock()
		for _, e := range victims {
			p.closeEntry(e)
			p.m.evictions.Add(context.Background(), 1)
		}
	}
}

// Close stops new leases, waits until running requests release theirs (or
// ctx ends), then flushes and closes every store.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.stop)
	stopWaiting := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.idle.Broadcast()
		p.mu.Unlock()
	})
	defer stopWaiting()
	for p.leased() && ctx.Err() == nil {
		p.idle.Wait()
	}
	var all []*entry
	for _, ns := range p.lru.Keys() {
		e, _ := p.lru.Peek(ns)
		all = append(all, e)
		p.closing[ns] = make(chan struct{})
	}
	p.lru.Purge()
	p.mu.Unlock()
	p.reaper.Wait()

	// Stores close side by side, a few at a time: each waits for its
	// writes and may merge its index, and one slow store must not spend
	// the others' shutdown grace.
	var (
		errs  []error
		errMu sync.Mutex
		wg    sync.WaitGroup
		slots = make(chan struct{}, closeParallel)
	)
	for _, e := range all {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			if err := p.closeAtShutdown(ctx, e); err != nil {
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
			}
		}()
	}
	wg.Wait()
	// Wait for evictions still closing their stores.
	for {
		p.mu.Lock()
		var done chan struct{}
		for _, d := range p.closing {
			done = d
			break
		}
		p.mu.Unlock()
		if done == nil {
			break
		}
		<-done
	}
	errs = append(errs, p.root.Close())
	return errors.Join(errs...)
}

// closeParallel is how many stores a shutdown closes at once.
const closeParallel = 4

// closeAtShutdown closes e's store once its open has ended. An open that
// ended is closed even when ctx has too, so that a late deadline never
// leaves an opened store unflushed; one still running past the deadline is
// left to the process's exit.
func (p *Pool) closeAtShutdown(ctx context.Context, e *entry) error {
	var err error
	select {
	case <-e.ready:
	default:
		select {
		case <-e.ready:
		case <-ctx.Done():
			err = errors.New("a store was still opening when the pool closed")
		}
	}
	if err == nil && e.err == nil {
		err = e.store.Close()
	}
	p.mu.Lock()
	if done := p.closing[e.ns]; done != nil {
		delete(p.closing, e.ns)
		close(done)
	}
	p.mu.Unlock()
	return err
}

// leased reports whether any store is leased. Called with p.mu held.
func (p *Pool) leased() bool {
	for _, ns := range p.lru.Keys() {
		if e, _ := p.lru.Peek(ns); e.leases > 0 {
			return true
		}
	}
	return false
}
