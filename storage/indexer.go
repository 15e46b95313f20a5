package storage

import (
	"encoding/binary"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
)

// index is the write side of a store's inverted index, behind one seam: the
// in-memory tail of the documents written since the last merge (tail.go) and
// the merge that moves it into the posting chunks (merge.go). The committer
// asks it three things around each commit — may writes run (refused), put
// this transaction's change in the tail (stage), merge now if due
// (mergeIfDue) — and knows nothing else of it; readers take its tail (see
// view).
type index struct {
	s     *Store
	tail  atomic.Pointer[tail]
	asked atomic.Bool // a merge asked by the tail budget is on its way

	// unmerged is set while a merge has failed part way: until one
	// succeeds, no write may run (see tryMerge). refusal is the error those
	// writes get, retryAt the earliest time of the next attempt. Only the
	// committer's leader touches them, and Open and Close when no write runs.
	unmerged bool
	refusal  error
	retryAt  time.Time
}

// mergeRetry is how long after a failed merge the index tries again; the
// writes in between are refused without an attempt, so that a store whose
// disk is full does not redo a failing merge for every refused write.
var mergeRetry = time.Second

// errUnmerged refuses writes while the index cannot be merged.
var errUnmerged = &memgate.Error{Code: memgate.CodeUnavailable,
	Message: "the store's index cannot be updated right now; writes are refused until it can"}

// current is the tail writes go to and readers start from.
func (x *index) current() *tail { return x.tail.Load() }

// open rebuilds the tail from the records above the merged mark (the newest
// documents, at most MergeEvery of them unless the store was closed while a
// merge was due) and finishes a merge the last process left unfinished. A
// merge that cannot finish (a full disk, a read-only filesystem, any
// failure) leaves the store readable: the tail holds every document above
// the merged mark and view.list reads postings already merged once. Writes
// wait, refused, until a later merge succeeds.
func (x *index) open() error {
	const op = "storage.Open"
	s := x.s
	var unfinished bool
	err := s.readTx(op, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		merged, err := s.counter(meta, metaMerged)
		if err != nil {
			return err
		}
		unfinished = meta.Get(metaMerging) != nil
		tl := newTail(merged, s.opts.TailBudget)
		var change tailChange
		c := tx.Bucket(bucketDocs).Cursor()
		for k, v := c.Seek(u64(merged + 1)); k != nil; k, v = c.Next() {
			r, err := s.decodeRecord(k, v)
			if err != nil {
				return err
			}
			entries, length := s.entries(&r)
			change.adds = append(change.adds, tailDoc{doc: binary.BigEndian.Uint64(k), entries: entries, length: length})
		}
		if err := s.loadGone(tx, merged, &change); err != nil {
			return err
		}
		tl.apply(&change)
		x.tail.Store(tl)
		return nil
	})
	if err != nil {
		return memgate.Wrap(op, err)
	}
	if unfinished {
		s.log.Warn("finishing an index merge the last process left unfinished", "op", op)
		if err := x.merge(); err != nil {
			s.log.Error("index merge left unfinished could not be finished; writes are refused until it is",
				"op", op, "error", memgate.Wrap(op, err))
			x.mergeFailed(err)
		}
	}
	return nil
}

// refused returns the error that refuses writes while a merge has failed
// (after trying again once mergeRetry has passed); nil when writes may run.
func (x *index) refused() error {
	if x.unmerged && (time.Now().Before(x.retryAt) || !x.tryMerge()) {
		return x.refusal
	}
	return nil
}

// stage puts a transaction's change in the tail, just before its commit:
// readers of the new snapshot must find it there. The returned undo takes
// it back if the commit fails.
func (x *index) stage(c *tailChange) (undo func()) {
	if c.empty() {
		return func() {}
	}
	tl := x.current()
	tl.apply(c)
	return func() { tl.undo(c) }
}

// mergeIfDue merges the tail when it is due (see due).
func (x *index) mergeIfDue() {
	if x.due() {
		x.tryMerge()
	}
}

// due reports whether the tail is to be merged now: it holds MergeEvery
// documents or MergeBytes, or the tails sharing its budget hold more than
// the budget and this one more than its share. When they do and this tail
// is within its share, the largest tail's store is asked to merge.
func (x *index) due() bool {
	s := x.s
	tl := x.current()
	n := tl.bytes.Load()
	if tl.len() >= s.opts.MergeEvery || n >= s.opts.MergeBytes || tl.goneWork() >= mergeGone {
		return true
	}
	share, largest, over := s.opts.TailBudget.over()
	switch {
	case !over:
		return false
	case n > share || largest == s:
		return n > 0
	}
	largest.index.ask()
	return false
}

// ask has the committer merge the tail if it is due, without a write: the
// tail budget asks it of a store whose tail holds more than its share.
func (x *index) ask() {
	if !x.asked.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer x.asked.Store(false)
		x.s.write.do(nil)
	}()
}

// tryMerge merges the tail and reports whether it succeeded. A merge that
// failed part way leaves some of the tail's postings on disk; readers cope
// (view.list), but a write could remove a tail document whose postings are
// on disk and leave them behind, so writes wait until a merge succeeds.
func (x *index) tryMerge() bool {
	if err := x.merge(); err != nil {
		x.s.log.Error("index merge failed", "op", "storage.merge", "error", err)
		x.mergeFailed(err)
		return false
	}
	x.unmerged, x.refusal = false, nil
	return true
}

// mergeFailed refuses writes until a merge succeeds, with the condition of
// the disk when err names one (StoreError), else errUnmerged.
func (x *index) mergeFailed(err error) {
	x.unmerged = true
	x.retryAt = time.Now().Add(mergeRetry)
	x.refusal = errUnmerged
	if e := StoreError("storage.merge", err); memgate.ErrorCode(e) == memgate.CodeUnavailable {
		x.refusal = e
	}
}

// closeMerge is the tail size from which Close merges it. Rebuilding a
// tail at open costs about 12 µs a document; a merge costs a commit (two
// fsyncs) once, and a store is opened again far more often than written.
// closeMergeTerms bounds the merge at close to two slices: a tail of many
// distinct terms would make a shutdown take seconds per store, so it stays
// unmerged and the next open rebuilds it from the records instead.
const (
	closeMerge      = 16
	closeMergeTerms = 2 * 2048
)

// close merges a large tail so the next open has little to rebuild, and
// gives the tail's bytes back to its budget. The committer has stopped.
func (x *index) close() {
	s := x.s
	tl := x.current()
	if tl.len() >= closeMerge && tl.termCount() <= closeMergeTerms &&
		!x.unmerged && !s.damaged.Load() && !s.db.IsReadOnly() {
		if err := x.merge(); err != nil {
			// Not lost: the next open rebuilds the tail from the records.
			s.log.Error("index merge at close failed", "op", "storage.Close", "error", err)
		}
	}
	s.opts.TailBudget.leave(s)
	x.current().release()
}
