package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/memgate/memgate"
)

// A damaged file must fail its own store's calls, never the process. bbolt
// reads its file through a memory map and trusts what it reads: a page id
// past the end of the file faults (SIGSEGV, or SIGBUS past the end of a
// truncated file), and garbage where a page should be makes it panic
// ("invalid freelist page", an index out of range). Every call into bbolt
// that touches the map therefore runs through protect, which turns such a
// fault into a panic (debug.SetPanicOnFault, on the calling goroutine: bbolt
// starts none of its own for the calls memgate makes) and recovers it.
//
// A panic is the file's fault when it is a memory fault, or when bbolt
// raised it; a panic raised in memgate's own code is a bug, and becomes an
// internal error that leaves the store usable. A record that does not
// decode, or a sealed value that fails authentication, is damage too. A
// store found damaged is marked, and from then on every call fails at once.

// ErrDamaged is in the chain of every error of a damaged store.
var ErrDamaged = errors.New("storage: the store's file is damaged")

const damagedMessage = "the store's file is damaged and cannot be used; restore it from a backup (see memgate backup)"

// damagedError is the error a call of a damaged store returns.
func damagedError(op string, cause error) *memgate.Error {
	if cause == nil {
		cause = ErrDamaged
	} else if !errors.Is(cause, ErrDamaged) {
		cause = fmt.Errorf("%w: %w", ErrDamaged, cause)
	}
	return &memgate.Error{Code: memgate.CodeUnavailable, Op: op, Message: damagedMessage, Cause: cause}
}

// isDamage reports whether err says that the file is damaged.
func isDamage(err error) bool {
	for _, target := range []error{ErrDamaged, errBadRecord, ErrTampered,
		berrors.ErrInvalid, berrors.ErrChecksum, berrors.ErrVersionMismatch, berrors.ErrInvalidMapping} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// protect runs fn, which reads or writes a mapped store file, and returns
// a panic of it as an error: the error of a damaged store when the file is
// to blame, an internal error when the code is.
func protect(op string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = recovered(op, r)
		}
	}()
	return fn()
}

// recovered turns the value of a recovered panic into an error. It must be
// called from the deferred function that recovered it, while the frames
// that panicked are still on the stack.
func recovered(op string, r any) error {
	if f, ok := r.(interface{ Addr() uintptr }); ok {
		return damagedError(op, fmt.Errorf("a fault in the mapped file: %v", f))
	}
	if raisedInBolt() {
		return damagedError(op, fmt.Errorf("bbolt panicked: %v", r))
	}
	cause := fmt.Errorf("panic: %T", r)
	if e, ok := r.(runtime.Error); ok {
		cause = fmt.Errorf("panic: %w", e)
	}
	return memgate.Internal(op, fmt.Errorf("%w\n%s", cause, debug.Stack()))
}

// raisedInBolt reports whether the panic being recovered was raised in
// bbolt: whether the first frame below runtime.gopanic that is not the
// runtime's own (panicIndex, sigpanic) is bbolt's.
func raisedInBolt() bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	panicking := false
	for {
		f, more := frames.Next()
		switch {
		case !panicking:
			panicking = f.Function == "runtime.gopanic"
		case !strings.HasPrefix(f.Function, "runtime."):
			return strings.HasPrefix(f.Function, "go.etcd.io/bbolt")
		}
		if !more {
			return false
		}
	}
}

// guard runs fn, a call into the store's bbolt file, through protect. A
// store found damaged is marked so; the calls of a marked store fail at
// once.
func (s *Store) guard(op string, fn func() error) error {
	if s.damaged.Load() {
		return damagedError(op, nil)
	}
	err := protect(op, fn)
	if err == nil || !isDamage(err) {
		return err
	}
	if s.damaged.CompareAndSwap(false, true) {
		s.log.Error("the store's file is damaged; its calls fail until it is restored from a backup",
			"op", op, "error", err)
	}
	var e *memgate.Error
	if errors.As(err, &e) && e.Message == damagedMessage {
		return e
	}
	return damagedError(op, err)
}

// readTx runs fn in a read transaction, guarded.
func (s *Store) readTx(op string, fn func(*bolt.Tx) error) error {
	return s.guard(op, func() error { return s.db.View(fn) })
}

// writeTx runs fn in a write transaction, guarded.
func (s *Store) writeTx(op string, fn func(*bolt.Tx) error) error {
	return s.guard(op, func() error { return s.db.Update(fn) })
}

// Damaged reports whether the store was found damaged. Its calls then fail
// with unavailable; a restored file needs the store opened again.
func (s *Store) Damaged() bool { return s.damaged.Load() }

// openBolt opens the bbolt file at path through protect: bbolt reads its
// meta and freelist pages while it opens, and a damaged one panics there
// with the file open and locked. The file is then closed, which releases
// the lock; the map bbolt made of it cannot be reached, and stays.
func openBolt(path string, opts Options) (*bolt.DB, *os.File, error) {
	var (
		db   *bolt.DB
		file *os.File
	)
	err := protect("storage.Open", func() error {
		var err error
		db, err = openFile(path, opts, func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			if err == nil {
				file = f
			}
			return f, err
		})
		return err
	})
	if err != nil {
		if isDamage(err) || unreadable(err) {
			if file != nil {
				file.Close() // bbolt closed it unless it panicked; twice is harmless
			}
			return nil, nil, damagedError("storage.Open", err)
		}
		return nil, nil, err
	}
	return db, file, nil
}

// unreadable reports whether err, an error of bolt.Open, is bbolt refusing
// what it read ("file size too small", a page size it cannot use) rather
// than the system failing it (a lock held, permission, no memory).
func unreadable(err error) bool {
	var (
		errno syscall.Errno
		path  *fs.PathError
	)
	return !errors.Is(err, berrors.ErrTimeout) && !errors.As(err, &errno) && !errors.As(err, &path)
}

// closeWait bounds how long closing a damaged store waits for bbolt: a
// write transaction that panicked part way may have kept bbolt's writer
// lock, and its Close would wait for it forever.
const closeWait = 2 * time.Second

// closeBolt closes the store's bbolt file. A damaged store's close that
// does not return within closeWait is left to itself, and the file is
// closed under it, which releases the lock.
func (s *Store) closeBolt() error {
	if !s.damaged.Load() {
		return protect("storage.Close", s.db.Close)
	}
	done := make(chan error, 1)
	go func() { done <- protect("storage.Close", s.db.Close) }()
	select {
	case err := <-done:
		return err
	case <-time.After(closeWait):
		s.log.Error("closing a damaged store timed out; its file is closed under it", "op", "storage.Close")
		if s.file != nil {
			s.file.Close()
		}
		return damagedError("storage.Close", nil)
	}
}
