package storetest

import (
	"bytes"
	"context"
	"errors"
	"sync"

	"github.com/memgate/memgate/storage"
)

// MemLogs are the logs of namespaces in memory (storage.Log), for tests of
// replicas without a database: several stores given one name's log are
// replicas of one namespace.
type MemLogs struct {
	mu         sync.Mutex
	logs       map[string]*memLog
	epochs     int64
	failAppend bool
}

// NewMemLogs returns logs with no namespace.
func NewMemLogs() *MemLogs { return &MemLogs{logs: map[string]*memLog{}} }

type memLog struct {
	m       *MemLogs
	lock    sync.Mutex // the namespace's write lock
	epoch   int64
	key     []byte
	entries map[uint64][]byte // by sequence: a snapshot drops the first
	chains  map[uint64][]byte // the chain at each sequence
	head    uint64
	snap    uint64
	file    []byte
	served  int
}

// Log returns namespace ns's log.
func (m *MemLogs) Log(ns string) storage.Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.logs[ns]
	if l == nil {
		l = &memLog{m: m, entries: map[uint64][]byte{}, chains: map[uint64][]byte{}}
		m.logs[ns] = l
	}
	return l
}

// Exists reports whether ns has a log.
func (m *MemLogs) Exists(ns string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.logs[ns]
	return l != nil && l.epoch != 0
}

// Erase deletes ns's log, once the write that holds it has ended.
func (m *MemLogs) Erase(ns string) {
	l := m.Log(ns).(*memLog)
	l.lock.Lock()
	defer l.lock.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	l.epoch, l.key, l.entries, l.chains, l.head, l.snap, l.file = 0, nil, map[uint64][]byte{}, map[uint64][]byte{}, 0, 0, nil
}

// FailNextAppend makes the next append of any log fail.
func (m *MemLogs) FailNextAppend() {
	m.mu.Lock()
	m.failAppend = true
	m.mu.Unlock()
}

// Truncate keeps the first n entries of ns's log: a database restored to
// an earlier time.
func (m *MemLogs) Truncate(ns string, n int) {
	l := m.Log(ns).(*memLog)
	m.mu.Lock()
	for seq := range l.entries {
		if seq > uint64(n) {
			delete(l.entries, seq)
		}
	}
	l.head = min(l.head, uint64(n))
	m.mu.Unlock()
}

// Entries is how many entries ns's log holds (a snapshot drops some).
func (m *MemLogs) Entries(ns string) int {
	l := m.Log(ns).(*memLog)
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(l.entries)
}

// Served is how many entries of ns's log readers have been handed.
func (m *MemLogs) Served(ns string) int {
	l := m.Log(ns).(*memLog)
	m.mu.Lock()
	defer m.mu.Unlock()
	return l.served
}

func (l *memLog) state() storage.LogState {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	return storage.LogState{Epoch: l.epoch, Seq: l.head, Key: l.key, Snapshot: l.snap, Chain: l.chains[l.head]}
}

func (l *memLog) Snapshot(context.Context) (uint64, []byte, error) {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	return l.snap, l.file, nil
}

func (l *memLog) Compact(_ context.Context, epoch int64, seq uint64, file []byte) error {
	l.lock.Lock()
	defer l.lock.Unlock()
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if epoch != l.epoch || seq <= l.snap || seq > l.head {
		return nil
	}
	for s := range l.entries {
		if s <= l.snap {
			delete(l.entries, s)
		}
	}
	l.snap, l.file = seq, file
	return nil
}

func (l *memLog) Head(context.Context) (storage.LogState, error) { return l.state(), nil }

func (l *memLog) Read(_ context.Context, after uint64, fn func(uint64, []byte) error) error {
	type entry struct {
		seq uint64
		b   []byte
	}
	var entries []entry
	l.m.mu.Lock()
	for seq := after + 1; seq <= l.head; seq++ {
		if b, ok := l.entries[seq]; ok {
			entries = append(entries, entry{seq, b})
		}
	}
	l.served += len(entries)
	l.m.mu.Unlock()
	for _, e := range entries {
		if err := fn(e.seq, e.b); err != nil {
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
		l.m.mu.Lock()
		l.m.epochs++
		l.epoch, l.key = l.m.epochs, k
		l.m.mu.Unlock()
	}
	return &memWrite{l: l, st: l.state()}, nil
}

type memWrite struct {
	l       *memLog
	st      storage.LogState
	pending [][]byte
	chains  [][]byte
	done    bool
}

func (w *memWrite) State() storage.LogState { return w.st }

func (w *memWrite) Read(ctx context.Context, after uint64, fn func(uint64, []byte) error) error {
	return w.l.Read(ctx, after, fn)
}

func (w *memWrite) Append(_ context.Context, seq uint64, entry, chain []byte) error {
	w.l.m.mu.Lock()
	defer w.l.m.mu.Unlock()
	if w.l.m.failAppend {
		w.l.m.failAppend = false
		return errors.New("storetest: the log went away")
	}
	if seq != w.st.Seq+uint64(len(w.pending))+1 {
		return errors.New("storetest: an append out of order")
	}
	w.pending, w.chains = append(w.pending, entry), append(w.chains, chain)
	return nil
}

func (w *memWrite) Commit(context.Context) error {
	w.l.m.mu.Lock()
	for i, e := range w.pending {
		w.l.head++
		w.l.entries[w.l.head], w.l.chains[w.l.head] = e, w.chains[i]
	}
	w.l.m.mu.Unlock()
	w.Rollback()
	return nil
}

func (w *memWrite) Rollback() {
	if !w.done {
		w.done = true
		w.l.lock.Unlock()
	}
}

// TamperSnapshot replaces ns's snapshot by what fn makes of it: damage in
// the database.
func (m *MemLogs) TamperSnapshot(ns string, fn func([]byte) []byte) {
	l := m.Log(ns).(*memLog)
	m.mu.Lock()
	l.file = fn(bytes.Clone(l.file))
	m.mu.Unlock()
}
