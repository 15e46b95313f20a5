package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

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
		berrors.ErrInvalid, berrors.ErrChecksum, berrors.ErrVersionMismatch, berrors.ErrInvalidMapping,
		berrors.ErrIncompatibleValue} {
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
		db      *bolt.DB
		file    *os.File
		opening atomic.Bool // bbolt opens the file again for each backup
	)
	opening.Store(true)
	err := protect("storage.Open", func() error {
		var err error
		db, err = openFile(path, opts, func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			if err == nil && opening.Load() {
				file = f
			}
			return f, err
		})
		return err
	})
	opening.Store(false)
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

// checkPages walks the page tree of the snapshot tx reads, from bbolt's
// map of the file (faults there are protect's), and
// returns ErrDamaged at the first page bbolt could not safely use: a page
// id past the end of the data, a page reached twice (a cycle, or two owners
// that a write would both rewrite), an element that points outside its
// page, a page of the wrong type, or a free page still in use.
//
// bbolt trusts its pages, and what it does with bad ones is not always a
// panic: an element size of a few gigabytes makes the next write allocate
// and write that much, a cycle of branch pages recurses until the stack
// is exhausted (which no recover survives), a free page still in use is
// handed out again and overwritten. Checked at open, none of that can
// happen later: memgate's own commits keep the tree whole.
func checkPages(f *os.File, tx *bolt.Tx) error {
	ps := tx.DB().Info().PageSize
	c := &pageCheck{ps: ps}
	var meta []byte
	for id := range 2 {
		m := make([]byte, metaSize)
		if _, err := f.ReadAt(m, int64(id*ps+pageHeader)); err != nil {
			return fmt.Errorf("%w: a meta page cannot be read: %w", ErrDamaged, err)
		}
		if binary.NativeEndian.Uint64(m[metaTxid:]) == uint64(tx.ID()) {
			meta = m
		}
	}
	if meta == nil {
		return fmt.Errorf("%w: no meta page of the current transaction", ErrDamaged)
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	c.hwm = binary.NativeEndian.Uint64(meta[metaPgid:])
	if c.hwm < 3 || c.hwm > uint64(fi.Size())/uint64(ps) {
		return fmt.Errorf("%w: the file is shorter than its pages", ErrDamaged)
	}
	c.f, c.data = f, mapped(tx, int(c.hwm)*ps)
	warm(f, c.data, int64(c.hwm)*int64(ps))
	c.seen = make([]uint64, (c.hwm+63)/64)
	c.mark(0)
	c.mark(1)
	if err := c.walk(binary.NativeEndian.Uint64(meta[metaRoot:]), 0); err != nil {
		return err
	}
	if fl := binary.NativeEndian.Uint64(meta[metaFreelist:]); fl != noFreelist {
		return c.freelist(fl)
	}
	return nil
}

// The on-disk layout of bbolt, as its internal/common package defines it.
const (
	pageHeader   = 16 // id u64, flags u16, count u16, overflow u32
	elementSize  = 16 // branch: pos, ksize u32, pgid u64; leaf: flags, pos, ksize, vsize u32
	bucketHeader = 16 // root pgid u64, sequence u64
	metaRoot     = 16 // offsets in the meta, after the page header
	metaFreelist = 32
	metaPgid     = 40
	metaTxid     = 48
	metaSize     = 64
	branchPage   = 0x01
	leafPage     = 0x02
	freelistPage = 0x10
	bucketLeaf   = 0x01
	noFreelist   = 1<<64 - 1
	maxDepth     = 64 // far deeper than a tree of 2^64 pages can be
)

type pageCheck struct {
	f    *os.File
	data []byte // f mapped, or nil: read with pread
	ps   int
	hwm  uint64
	seen []uint64 // a bit per page
	bufs [][]byte // a page buffer per depth
}

func (c *pageCheck) mark(id uint64) bool {
	w, b := id/64, uint64(1)<<(id%64)
	if c.seen[w]&b != 0 {
		return false
	}
	c.seen[w] |= b
	return true
}

// read returns page id and its overflow pages, checking that they lie
// below the high-water mark and are reached once. The bytes are valid
// until the next read at the same depth.
func (c *pageCheck) read(id uint64, depth int) ([]byte, error) {
	if id < 2 || id >= c.hwm || depth > maxDepth {
		return nil, fmt.Errorf("%w: page %d is out of range", ErrDamaged, id)
	}
	off := int64(id) * int64(c.ps)
	var p []byte
	if c.data != nil {
		p = c.data[off : off+int64(c.ps)]
	} else {
		for len(c.bufs) <= depth {
			c.bufs = append(c.bufs, make([]byte, c.ps))
		}
		p = c.bufs[depth][:c.ps]
		if _, err := c.f.ReadAt(p, off); err != nil {
			return nil, fmt.Errorf("%w: page %d cannot be read: %w", ErrDamaged, id, err)
		}
	}
	overflow := uint64(binary.NativeEndian.Uint32(p[12:]))
	if id+overflow >= c.hwm {
		return nil, fmt.Errorf("%w: page %d runs past the end of the data", ErrDamaged, id)
	}
	for i := id; i <= id+overflow; i++ {
		if !c.mark(i) {
			return nil, fmt.Errorf("%w: page %d is reached twice", ErrDamaged, i)
		}
	}
	if overflow == 0 {
		return p, nil
	}
	if c.data != nil {
		return c.data[off : off+int64(overflow+1)*int64(c.ps)], nil
	}
	n := (overflow + 1) * uint64(c.ps)
	if uint64(cap(p)) < n {
		c.bufs[depth] = make([]byte, n)
		copy(c.bufs[depth], p)
	}
	p = c.bufs[depth][:n]
	if _, err := c.f.ReadAt(p[c.ps:], int64(id+1)*int64(c.ps)); err != nil {
		return nil, fmt.Errorf("%w: page %d cannot be read: %w", ErrDamaged, id, err)
	}
	return p, nil
}

// walk checks the branch or leaf page id and every page below it.
func (c *pageCheck) walk(id uint64, depth int) error {
	p, err := c.read(id, depth)
	if err != nil {
		return err
	}
	return c.elements(p, id, depth)
}

// elements checks the elements of page p (a real page id, or an inline
// page of a bucket value) and walks the pages they refer to.
func (c *pageCheck) elements(p []byte, id uint64, depth int) error {
	bad := func(what string) error { return fmt.Errorf("%w: page %d: %s", ErrDamaged, id, what) }
	if len(p) < pageHeader {
		return bad("shorter than its header")
	}
	flags, count := binary.NativeEndian.Uint16(p[8:]), int(binary.NativeEndian.Uint16(p[10:]))
	if flags != branchPage && flags != leafPage {
		return bad("neither a branch nor a leaf")
	}
	if pageHeader+count*elementSize > len(p) {
		return bad("more elements than fit")
	}
	for i := range count {
		off := pageHeader + i*elementSize
		e := p[off : off+elementSize]
		if flags == branchPage {
			pos, ksize := uint64(binary.NativeEndian.Uint32(e)), uint64(binary.NativeEndian.Uint32(e[4:]))
			if uint64(off)+pos+ksize > uint64(len(p)) {
				return bad("a key runs past the page")
			}
			if err := c.walk(binary.NativeEndian.Uint64(e[8:]), depth+1); err != nil {
				return err
			}
			continue
		}
		eflags := binary.NativeEndian.Uint32(e)
		pos, ksize, vsize := uint64(binary.NativeEndian.Uint32(e[4:])), uint64(binary.NativeEndian.Uint32(e[8:])),
			uint64(binary.NativeEndian.Uint32(e[12:]))
		end := uint64(off) + pos + ksize + vsize
		if end > uint64(len(p)) {
			return bad("a value runs past the page")
		}
		if eflags&bucketLeaf == 0 {
			continue
		}
		v := p[end-vsize : end]
		if len(v) < bucketHeader {
			return bad("a bucket's header is cut short")
		}
		if root := binary.NativeEndian.Uint64(v); root != 0 {
			if err := c.walk(root, depth+1); err != nil {
				return err
			}
		} else if err := c.elements(v[bucketHeader:], id, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// freelist checks that the free pages listed on page id are below the
// high-water mark, listed once, and not in use.
func (c *pageCheck) freelist(id uint64) error {
	p, err := c.read(id, 0)
	if err != nil {
		return err
	}
	bad := func(what string) error { return fmt.Errorf("%w: freelist page %d: %s", ErrDamaged, id, what) }
	if binary.NativeEndian.Uint16(p[8:]) != freelistPage {
		return bad("not a freelist page")
	}
	start, count := pageHeader, uint64(binary.NativeEndian.Uint16(p[10:]))
	if count == 0xFFFF {
		if len(p) < pageHeader+8 {
			return bad("its count is cut short")
		}
		count, start = binary.NativeEndian.Uint64(p[pageHeader:]), pageHeader+8
	}
	if count > uint64(len(p)-start)/8 {
		return bad("more ids than fit")
	}
	for i := range count {
		free := binary.NativeEndian.Uint64(p[uint64(start)+8*i:])
		if free < 2 || free >= c.hwm {
			return bad("a free page is out of range")
		}
		if !c.mark(free) {
			return bad("a free page is in use, or listed twice")
		}
	}
	return nil
}

// checkFile runs checkPages on the store's file as it is now.
func (s *Store) checkFile() error {
	if s.file == nil {
		return nil
	}
	return s.readTx("storage.Open", func(tx *bolt.Tx) error { return checkPages(s.file, tx) })
}

// mapped returns the first size bytes of bbolt's map of the file, which
// holds still while tx is open (bbolt maps it again only with no
// transaction open), or nil where the map cannot be reached; checkPages
// then reads the file with pread.
func mapped(tx *bolt.Tx, size int) []byte {
	base := tx.DB().Info().Data
	if base == 0 || size <= 0 {
		return nil
	}
	// The map is outside the Go heap: a pointer into it is only memory.
	return unsafe.Slice((*byte)(unsafe.Add(nil, base)), size)
}
