package storetest

import (
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
	entries [][]byte
	served  int
}

// Log returns namespace ns's log.
func (m *MemLogs) Log(ns string) storage.Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.logs[ns]
	if l == nil {
		l = &memLog{m: m}
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
	l.epoch, l.key, l.entries = 0, nil, nil
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
	l.entries = l.entries[:min(n, len(l.entries))]
	m.mu.Unlock()
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
	return storage.LogState{Epoch: l.epoch, Seq: uint64(len(l.entries)), Key: l.key}
}

func (l *memLog) Head(context.Context) (storage.LogState, error) { return l.state(), nil }

func (l *memLog) Read(_ context.Context, after uint64, fn func(uint64, []byte) error) error {
	l.m.mu.Lock()
	entries := l.entries[min(int(after), len(l.entries)):]
	l.served += len(entries)
	l.m.mu.Unlock()
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
	done    bool
}

func (w *memWrite) State() storage.LogState { return w.st }

func (w *memWrite) Read(ctx context.Context, after uint64, fn func(uint64, []byte) error) error {
	return w.l.Read(ctx, after, fn)
}

func (w *memWrite) Append(_ context.Context, _ uint64, entry []byte) error {
	w.l.m.mu.Lock()
	defer w.l.m.mu.Unlock()
	if w.l.m.failAppend {
		w.l.m.failAppend = false
		return errors.New("storetest: the log went away")
	}
	w.pending = append(w.pending, entry)
	return nil
}

func (w *memWrite) Commit(context.Context) error {
	w.l.m.mu.Lock()
	w.l.entries = append(w.l.entries, w.pending...)
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
