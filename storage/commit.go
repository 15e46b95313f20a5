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

// A committer groups the writes of a store into shared commits, and that is
// all it does: the index decides whether writes may run, takes each
// transaction's change to its tail, and merges (see index). When no
// commit is running, a write commits at once, on its own goroutine (the
// leader). Writes that arrive meanwhile queue; when the leader's commit
// returns, it hands the lead to the first of them, which commits the whole
// queue as one group. A write is acknowledged only after the commit that
// holds it has returned. A lone writer thus never waits for another
// goroutine, and a busy store commits in groups as large as its load.
//
// A write function must make every check that can refuse it (a
// memgate.Error: a version conflict, say) before it changes anything, so a
// refused write leaves the shared transaction as it found it. Any other
// error aborts the whole group, which is then run again one write per
// transaction, so one failing write never fails its neighbours.
type committer struct {
	s   *Store
	db  *bolt.DB
	log *slog.Logger

	mu      sync.Mutex
	idle    *sync.Cond // signalled when leading stops
	queue   []*writeOp
	leading bool // a leader is committing or about to
	closed  bool
}

type writeOp struct {
	fn  func(*txn) error // nil: no write, an ask to merge (index.ask)
	err chan error       // the write's result, or errLead
}

// errLead tells a queued write that it now leads.
var errLead = errors.New("storage: lead the next commit")

func newCommitter(s *Store, log *slog.Logger) *committer {
	c := &committer{s: s, db: s.db, log: log}
	c.idle = sync.NewCond(&c.mu)
	return c
}

// do runs fn in a write transaction and returns once it has committed.
func (c *committer) do(fn func(*txn) error) error {
	op := &writeOp{fn: fn, err: make(chan error, 1)}
	if c.s.damaged.Load() {
		return damagedError("storage.commit", nil)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errClosed
	}
	c.queue = append(c.queue, op)
	if c.leading {
		c.mu.Unlock()
		err := <-op.err
		if err != errLead {
			return err
		}
	} else {
		c.leading = true
		c.mu.Unlock()
	}
	c.lead()
	return <-op.err
}

// lead commits the queue (which holds the leader's own write) and passes
// the lead on. Whatever the commit does, every write of the group hears
// back and the lead moves on: a panic becomes the group's error (see
// protect), and the writes of a store found damaged fail at once.
func (c *committer) lead() {
	c.mu.Lock()
	n := min(len(c.queue), maxGroup)
	group := c.queue[:n:n]
	c.queue = append([]*writeOp(nil), c.queue[n:]...)
	c.mu.Unlock()

	errs := c.commitSafe(group)

	// Pass the lead on before acknowledging, so the next commit starts
	// while this group's writers wake up.
	c.mu.Lock()
	if len(c.queue) == 0 {
		c.leading = false
		c.idle.Broadcast()
		c.mu.Unlock()
	} else {
		next := c.queue[0]
		c.mu.Unlock()
		next.err <- errLead
	}
	for i, op := range group {
		op.err <- errs[i]
	}
}

// commitSafe is commit that never panics: a panic outside the write
// transactions (which guard themselves) fails the whole group, and the
// writes of a store found damaged fail at once.
func (c *committer) commitSafe(group []*writeOp) []error {
	var errs []error
	err := c.s.guard("storage.commit", func() error {
		errs = c.commit(group, make([]error, 0, len(group)))
		return nil
	})
	if err != nil {
		errs = make([]error, len(group))
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// close stops taking writes and waits until every accepted one is done.
func (c *committer) close() {
	c.mu.Lock()
	c.closed = true
	for c.leading {
		c.idle.Wait()
	}
	c.mu.Unlock()
}

// commit runs group in one transaction and returns each write's error.
func (c *committer) commit(group []*writeOp, errs []error) []error {
	errs = errs[:len(group)]
	if err := c.s.index.refused(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	if asksOnly(group) {
		c.s.index.mergeIfDue()
		return errs
	}
	err := c.update(func(t *txn) error {
		for i, op := range group {
			if op.fn == nil {
				continue
			}
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
			if op.fn != nil {
				errs[i] = c.update(op.fn)
			}
		}
	}
	c.s.index.mergeIfDue()
	for i := range errs {
		if errs[i] == nil && group[i].fn != nil {
			c.s.commits.Add(1)
		}
		errs[i] = StoreError("storage.commit", errs[i])
	}
	return errs
}

// asksOnly reports whether group holds no write, only asks to merge (a
// writeOp without fn: see index.ask).
func asksOnly(group []*writeOp) bool {
	for _, op := range group {
		if op.fn != nil {
			return false
		}
	}
	return true
}

// update runs fn in one write transaction. The transaction's change to the
// tail is applied just before the commit, and undone if the commit fails.
func (c *committer) update(fn func(*txn) error) error {
	undo := func() {}
	var t *txn
	err := c.s.writeTx("storage.commit", func(tx *bolt.Tx) error {
		t = c.s.txn(tx)
		if err := fn(t); err != nil {
			return err
		}
		if err := t.flushCounts(); err != nil {
			return err
		}
		undo = c.s.index.stage(&t.change)
		return nil
	})
	if err != nil {
		undo()
	} else if t != nil {
		c.s.vecs.apply(t.vecAdds, t.vecDrops)
	}
	return err
}

// isRefusal reports whether err is a write refusing itself before it changed
// anything, as opposed to a failure of the transaction.
func isRefusal(err error) bool {
	var e *memgate.Error
	return errors.As(err, &e) && e.Code != memgate.CodeInternal
}
