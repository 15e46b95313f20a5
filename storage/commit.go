package storage

import (
	"errors"
	"log/slog"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
)

// maxGroup bounds how many writes share one commit.
const maxGroup = 1000

// A committer runs every write of a store through one goroutine that groups
// them: when it is idle a write commits at once; writes that arrive while a
// commit is running share the next one. A write is acknowledged only after
// the commit that holds it has returned.
//
// A write function must make every check that can refuse it (a
// memgate.Error: a version conflict, say) before it changes anything, so a
// refused write leaves the shared transaction as it found it. Any other
// error aborts the whole group, which is then run again one write per
// transaction, so one failing write never fails its neighbours.
type committer struct {
	s    *Store
	db   *bolt.DB
	log  *slog.Logger
	ops  chan *writeOp
	mu   sync.RWMutex // guards closed against sends on ops
	done chan struct{}

	closed bool
	// unmerged is set while a merge has failed part way: until one
	// succeeds, no write may run (see mergeOrRefuse).
	unmerged bool
}

type writeOp struct {
	fn  func(*txn) error
	err chan error
}

func newCommitter(s *Store, log *slog.Logger) *committer {
	c := &committer{s: s, db: s.db, log: log, ops: make(chan *writeOp, maxGroup), done: make(chan struct{})}
	go c.loop()
	return c
}

// do runs fn in a write transaction and returns once it has committed.
func (c *committer) do(fn func(*txn) error) error {
	op := &writeOp{fn: fn, err: make(chan error, 1)}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return errClosed
	}
	c.ops <- op
	c.mu.RUnlock()
	return <-op.err
}

// close stops taking writes and waits until every accepted one is done.
func (c *committer) close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.ops)
	}
	c.mu.Unlock()
	<-c.done
}

func (c *committer) loop() {
	defer close(c.done)
	group := make([]*writeOp, 0, maxGroup)
	errs := make([]error, 0, maxGroup)
	for op := range c.ops {
		group = append(group[:0], op)
	drain:
		for len(group) < maxGroup {
			select {
			case next, ok := <-c.ops:
				if !ok {
					break drain
				}
				group = append(group, next)
			default:
				break drain
			}
		}
		errs = c.commit(group, errs[:0])
		for i, op := range group {
			op.err <- errs[i]
		}
		clear(group)
	}
}

// errUnmerged refuses writes while the index cannot be merged.
var errUnmerged = &memgate.Error{Code: memgate.CodeUnavailable,
	Message: "the store's index cannot be updated right now; writes are refused until it can"}

// commit runs group in one transaction and returns each write's error.
func (c *committer) commit(group []*writeOp, errs []error) []error {
	errs = errs[:len(group)]
	if c.unmerged && !c.merge() {
		for i := range errs {
			errs[i] = errUnmerged
		}
		return errs
	}
	err := c.update(func(t *txn) error {
		for i, op := range group {
			errs[i] = op.fn(t)
			if errs[i] != nil && !isRefusal(errs[i]) {
				return errs[i]
			}
		}
		return nil
	})
	switch {
	case err == nil:
	case len(group) == 1:
		errs[0] = err
	default:
		c.log.Warn("group commit failed; retrying its writes one by one", "writes", len(group), "error", err)
		for i, op := range group {
			errs[i] = c.update(op.fn)
		}
	}
	if c.s.tail.Load().len() >= c.s.opts.MergeEvery {
		c.merge()
	}
	return errs
}

// merge merges the tail and reports whether it succeeded. A merge that
// failed part way leaves some of the tail's postings on disk; readers cope
// (view.list), but a write could remove a tail document whose postings are
// on disk and leave them behind, so writes wait until a merge succeeds.
func (c *committer) merge() bool {
	if err := c.s.merge(); err != nil {
		c.log.Error("index merge failed", "op", "storage.merge", "error", err)
		c.unmerged = true
		return false
	}
	c.unmerged = false
	return true
}

// update runs fn in one write transaction. The transaction's change to the
// tail is applied just before the commit, and undone if the commit fails.
func (c *committer) update(fn func(*txn) error) error {
	tl := c.s.tail.Load()
	var applied *tailChange
	err := c.db.Update(func(tx *bolt.Tx) error {
		t := c.s.txn(tx)
		if err := fn(t); err != nil {
			return err
		}
		if err := t.flushCounts(); err != nil {
			return err
		}
		if !t.change.empty() {
			tl.apply(&t.change)
			applied = &t.change
		}
		return nil
	})
	if err != nil && applied != nil {
		tl.undo(applied)
	}
	return err
}

// isRefusal reports whether err is a write refusing itself before it changed
// anything, as opposed to a failure of the transaction.
func isRefusal(err error) bool {
	var e *memgate.Error
	return errors.As(err, &e) && e.Code != memgate.CodeInternal
}
