package tenants

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
)

// memShared is a Shared in memory: the logs several pools share in a test.
type memShared struct {
	mu   sync.Mutex
	logs map[memgate.Namespace]*memLog
	// failAppend, when set, fails the next append.
	failAppend bool
}

type memLog struct {
	sh      *memShared
	ns      memgate.Namespace
	lock    sync.Mutex // the namespace's write lock
	epoch   int64
	key     []byte
	entries [][]byte
	served  int // entries handed to readers
}

func newMemShared() *memShared { return &memShared{logs: map[memgate.Namespace]*memLog{}} }

func (m *memShared) Log(ns memgate.Namespace) storage.Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.logs[ns]
	if l == nil {
		l = &memLog{sh: m, ns: ns}
		m.logs[ns] = l
	}
	return l
}

func (m *memShared) Exists(_ context.Context, ns memgate.Namespace) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.logs[ns]
	return l != nil && l.epoch != 0, nil
}

func (m *memShared) Namespaces(_ context.Context, after string, limit int) ([]memgate.Namespace, error) {
	return nil, errors.New("not in this test")
}

func (m *memShared) Erase(_ context.Context, ns memgate.Namespace) error {
	l := m.Log(ns).(*memLog)
	l.lock.Lock()
	defer l.lock.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	l.epoch, l.key, l.entries = 0, nil, nil
	return nil
}

func (l *memLog) state() storage.LogState {
	l.sh.mu.Lock()
	defer l.sh.mu.Unlock()
	return storage.LogState{Epoch: l.epoch, Seq: uint64(len(l.entries)), Key: l.key}
}

func (l *memLog) Head(context.Context) (storage.LogState, error) { return l.state(), nil }

func (l *memLog) Read(_ context.Context, after uint64, fn func(uint64, []byte) error) error {
	l.sh.mu.Lock()
	entries := l.entries[min(int(after), len(l.entries)):]
	l.served += len(entries)
	l.sh.mu.Unlock()
	for i, e := range entries {
		if err := fn(after+uint64(i)+1, e); err != nil {
			return err
		}
	}
	return nil
}

func (l *memLog) Begin(_ context.Context, key func() ([]byte, error)) (storage.LogWrite, error) {
	l.lock.Lock()
	if l.state().Epoch == 0 {
		k, err := key()
		if err != nil {
			l.lock.Unlock()
			return nil, err
		}
		l.sh.mu.Lock()
		l.epoch, l.key = int64(len(l.sh.logs))+1000, k
		l.sh.mu.Unlock()
	}
	return &memWrite{l: l, st: l.state()}, nil
}

type memWrite struct {
	l       *memLog
	st      storage.LogState
	pending [][]byte
	done    bool
}

func (w *memWrite) State() storage.LogState { return w.st }
func (w *memWrite) Read(ctx context.Context, after uint64, fn func(uint64, []byte) error) error {
	return w.l.Read(ctx, after, fn)
}

func (w *memWrite) Append(_ context.Context, seq uint64, entry []byte) error {
	w.l.sh.mu.Lock()
	defer w.l.sh.mu.Unlock()
	if w.l.sh.failAppend {
		w.l.sh.failAppend = false
		return errors.New("the database went away")
	}
	w.pending = append(w.pending, entry)
	return nil
}

func (w *memWrite) Commit(context.Context) error {
	w.l.sh.mu.Lock()
	w.l.entries = append(w.l.entries, w.pending...)
	w.l.sh.mu.Unlock()
	w.Rollback()
	return nil
}

func (w *memWrite) Rollback() {
	if !w.done {
		w.done = true
		w.l.lock.Unlock()
	}
}

// A replica whose write could not be logged is closed once its lease
// ends, its file removed, and the next lease makes it again from the log:
// the unlogged write is gone, the logged ones are there.
func TestReplicaThatMissedTheLogIsMadeAgain(t *testing.T) {
	ctx := context.Background()
	sh := newMemShared()
	p := newPool(t, Options{Shared: sh, Store: storage.Options{Staleness: 1}})
	write := func(id string) error {
		s, release, err := p.Lease(ctx, "team")
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		_, err = s.Write(ctx, memgate.Write{ID: id, Text: "memory " + id})
		return err
	}
	if err := write("a"); err != nil {
		t.Fatal(err)
	}
	sh.mu.Lock()
	sh.failAppend = true
	sh.mu.Unlock()
	if err := write("b"); memgate.ErrorCode(err) != memgate.CodeUnavailable {
		t.Fatalf("an unlogged write: %v", err)
	}
	if err := write("c"); err != nil {
		t.Fatalf("the write after: %v", err)
	}
	s, release, err := p.Lease(ctx, "team")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, err := s.Get(ctx, "b"); memgate.ErrorCode(err) != memgate.CodeNotFound {
		t.Fatalf("the unlogged write is there: %v", err)
	}
	for _, id := range []string{"a", "c"} {
		if _, err := s.Get(ctx, id); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
}

// Two pools over one log: what one writes the other reads; a replica's
// file closed cleanly is taken up where it was, one a crash left (no
// record of its place) is made again, and a bbolt data folder's stores are
// never touched.
func TestPoolsShareTheLog(t *testing.T) {
	ctx := context.Background()
	sh := newMemShared()
	dirA := t.TempDir()
	bboltStore := StoreFile(dirA, "team")
	if err := os.MkdirAll(filepath.Dir(bboltStore), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bboltStore, []byte("a bbolt store of before"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := newPool(t, Options{Dir: dirA, Shared: sh, Store: storage.Options{Staleness: 1}})
	b := newPool(t, Options{Shared: sh, Store: storage.Options{Staleness: 1}})
	with := func(p *Pool, fn func(*storage.Store)) {
		t.Helper()
		s, release, err := p.Lease(ctx, "team")
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		fn(s)
	}
	with(a, func(s *storage.Store) {
		if _, err := s.Write(ctx, memgate.Write{ID: "x", Text: "written on a"}); err != nil {
			t.Fatal(err)
		}
	})
	with(b, func(s *storage.Store) {
		if m, err := s.Get(ctx, "x"); err != nil || m.Text != "written on a" {
			t.Fatalf("%v %v", m, err)
		}
	})
	if b, err := os.ReadFile(bboltStore); err != nil || string(b) != "a bbolt store of before" {
		t.Fatalf("the bbolt store was touched: %q %v", b, err)
	}
	if ents, _, err := a.Namespaces(ctx, "", 10); err == nil {
		t.Fatalf("namespaces from the folder, not the log: %v", ents)
	}
	if ok, _ := sh.Exists(ctx, "nobody"); ok || a.exists(ctx, "nobody") {
		t.Fatal("a namespace without a log exists")
	}
	if !a.exists(ctx, "team") {
		t.Fatal("the shared namespace does not exist")
	}

	// Closed cleanly, a replica goes on from its place in the log.
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l := sh.Log("team").(*memLog)
	sh.mu.Lock()
	served := l.served
	sh.mu.Unlock()
	a = newPool(t, Options{Dir: dirA, Shared: sh, Store: storage.Options{Staleness: 1}})
	with(a, func(s *storage.Store) {
		if _, err := s.Get(ctx, "x"); err != nil {
			t.Fatal(err)
		}
	})
	sh.mu.Lock()
	if l.served != served {
		t.Fatalf("the replica closed cleanly read %d entries again", l.served-served)
	}
	sh.mu.Unlock()
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A file that records no place in the log is not trusted: here, a
	// store with a memory the log never had.
	replica := filepath.Join(dirA, ReplicasFolder, "stores", "team", storage.FileName)
	os.Remove(replica)
	st, err := storage.Open(replica, storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write(ctx, memgate.Write{ID: "ghost", Text: "never logged"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	a = newPool(t, Options{Dir: dirA, Shared: sh, Store: storage.Options{Staleness: 1}})
	with(a, func(s *storage.Store) {
		if _, err := s.Get(ctx, "ghost"); memgate.ErrorCode(err) != memgate.CodeNotFound {
			t.Fatalf("a memory of an untrusted file: %v", err)
		}
		if _, err := s.Get(ctx, "x"); err != nil {
			t.Fatal(err)
		}
	})
}

// A log that went back behind a replica (a database restored to an earlier
// time) makes it fail that call and start again from the log.
func TestReplicaAheadOfTheLogIsMadeAgain(t *testing.T) {
	ctx := context.Background()
	sh := newMemShared()
	p := newPool(t, Options{Shared: sh, Store: storage.Options{Staleness: 1}})
	call := func(fn func(*storage.Store) error) error {
		s, release, err := p.Lease(ctx, "team")
		if err != nil {
			return err
		}
		defer release()
		return fn(s)
	}
	for _, id := range []string{"x", "y"} {
		if err := call(func(s *storage.Store) error {
			_, err := s.Write(ctx, memgate.Write{ID: id, Text: "memory " + id})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	l := sh.Log("team").(*memLog)
	sh.mu.Lock()
	l.entries = l.entries[:1]
	sh.mu.Unlock()
	get := func(id string) error {
		return call(func(s *storage.Store) error { _, err := s.Get(ctx, id); return err })
	}
	if err := get("x"); memgate.ErrorCode(err) != memgate.CodeUnavailable {
		t.Fatalf("a read of a replica ahead of its log: %v", err)
	}
	if err := get("x"); err != nil {
		t.Fatal(err)
	}
	if err := get("y"); memgate.ErrorCode(err) != memgate.CodeNotFound {
		t.Fatalf("a write the log lost: %v", err)
	}
}
