package storage

import (
	"slices"
	"sync"
	"sync/atomic"
)

// The tail holds, in memory, the postings of the documents written since the
// last merge — the documents numbered above meta's merged mark. A write adds
// its postings to the tail only, touching a handful of pages on disk (the
// record, its id, its creation key, the counters) instead of one posting
// chunk per distinct term. When the tail has gathered MergeEvery documents
// or MergeBytes of memory (or its share of a TailBudget), the index
// merges it into the postings bucket (see merge), one chunk append per
// term, and starts an empty tail. At open, the tail is rebuilt from the
// records above the merged mark: the most recent documents, at the end of
// the docs bucket, at most MergeEvery of them unless a merge was due or
// could not finish.
//
// Readers see exactly their snapshot. The tail is changed just before a
// commit, so no reader can miss a committed document; a reader ignores
// postings of documents above its snapshot's sequence, and removals stamped
// with a sequence above it. A failed commit undoes its change. A reader takes
// the tail before its transaction and checks that the tail starts where its
// snapshot's merged mark says; if a merge came in between, it starts again.
//
// A tail is bounded by documents (MergeEvery) and by the memory it holds
// (MergeBytes, and the TailBudget shared by the stores of a process): bytes
// estimates it as the term keys, the postings' arrays as allocated and a
// fixed cost per map entry.
type tail struct {
	base   uint64      // the merged mark this tail starts above
	budget *TailBudget // nil: none

	mu    sync.RWMutex
	terms map[string][]posting // term key → postings, by document
	dead  map[uint64]uint64    // document → sequence at which it was removed
	size  int                  // documents added, alive or not
	bytes atomic.Int64         // estimated memory held

	// The merged documents forgotten since the merge (see gone.go): by
	// document, replaced and never changed so that views read it without
	// the lock; and by term, in stamp order.
	gone      atomic.Pointer[[]goneDoc]
	goneTerms map[string][]goneDoc
	gonePairs int // postings of gone documents: the work of purging them
}

// Estimated costs of a tail's entries, beyond the term key's own bytes: a
// map slot with its share of control bytes and empty slots, and the size
// class rounding of the key's and the array's allocations.
const (
	tailTermBytes    = 64
	tailPostingBytes = 16 // sizeof(posting)
	tailDeadBytes    = 24
)

func newTail(base uint64, budget *TailBudget) *tail {
	return &tail{base: base, budget: budget, terms: map[string][]posting{}, dead: map[uint64]uint64{},
		goneTerms: map[string][]goneDoc{}}
}

// grow counts delta more bytes held, in the tail and in its budget.
func (t *tail) grow(delta int64) {
	if delta != 0 {
		t.bytes.Add(delta)
		t.budget.add(delta)
	}
}

// release gives the tail's bytes back to its budget: the tail was replaced
// (by a merge) or its store closed. Readers still holding it are not hurt.
func (t *tail) release() { t.budget.add(-t.bytes.Load()) }

// tailDoc is one document's postings on their way into the tail.
type tailDoc struct {
	doc     uint64
	entries []indexEntry
	length  int
}

// tailChange is what one transaction does to the tail.
type tailChange struct {
	adds   []tailDoc
	deaths [][2]uint64 // document, stamp
	gones  []goneChange
}

func (c *tailChange) empty() bool { return len(c.adds) == 0 && len(c.deaths) == 0 && len(c.gones) == 0 }

// dropAdd forgets a document added earlier in the same transaction; it
// reports whether there was one.
func (c *tailChange) dropAdd(doc uint64) bool {
	i := slices.IndexFunc(c.adds, func(d tailDoc) bool { return d.doc == doc })
	if i < 0 {
		return false
	}
	c.adds = slices.Delete(c.adds, i, i+1)
	return true
}

func (t *tail) apply(c *tailChange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var delta int64
	for _, d := range c.adds {
		for _, e := range d.entries {
			ps, ok := t.terms[string(e.term)]
			if !ok {
				delta += int64(len(e.term)) + tailTermBytes
			}
			before := cap(ps)
			ps = append(ps, posting{doc: d.doc, tf: e.tf, docLen: uint32(d.length)})
			delta += int64(cap(ps)-before) * tailPostingBytes
			t.terms[string(e.term)] = ps
		}
		t.size++
	}
	for _, d := range c.deaths {
		if _, ok := t.dead[d[0]]; !ok {
			delta += tailDeadBytes
		}
		t.dead[d[0]] = d[1]
	}
	if len(c.gones) > 0 {
		list := slices.Clone(t.goneDocs())
		for _, g := range c.gones {
			i, _ := slices.BinarySearchFunc(list, g.doc, cmpGone)
			list = slices.Insert(list, i, goneDoc{g.doc, g.stamp})
			for _, term := range g.terms {
				ds, ok := t.goneTerms[string(term)]
				if !ok {
					delta += int64(len(term)) + tailTermBytes
				}
				before := cap(ds)
				ds = append(ds, goneDoc{g.doc, g.stamp})
				delta += int64(cap(ds)-before) * goneBytes
				t.goneTerms[string(term)] = ds
			}
			t.gonePairs += len(g.terms)
			delta += tailDeadBytes
		}
		t.gone.Store(&list)
	}
	t.grow(delta)
}

// undo takes back apply(c), the last change applied.
func (t *tail) undo(c *tailChange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var delta int64
	for i := len(c.adds) - 1; i >= 0; i-- {
		d := c.adds[i]
		for j := len(d.entries) - 1; j >= 0; j-- {
			k := string(d.entries[j].term)
			if ps := t.terms[k]; len(ps) > 0 && ps[len(ps)-1].doc == d.doc {
				if len(ps) == 1 {
					delete(t.terms, k)
					delta -= int64(len(k)) + tailTermBytes + int64(cap(ps))*tailPostingBytes
				} else {
					t.terms[k] = ps[:len(ps)-1]
				}
			}
		}
		t.size--
	}
	for _, d := range c.deaths {
		if _, ok := t.dead[d[0]]; ok {
			delete(t.dead, d[0])
			delta -= tailDeadBytes
		}
	}
	if len(c.gones) > 0 {
		list := slices.Clone(t.goneDocs())
		for i := len(c.gones) - 1; i >= 0; i-- {
			g := c.gones[i]
			if j, ok := slices.BinarySearchFunc(list, g.doc, cmpGone); ok {
				list = slices.Delete(list, j, j+1)
			}
			for _, term := range g.terms {
				k := string(term)
				if ds := t.goneTerms[k]; len(ds) > 0 && ds[len(ds)-1].doc == g.doc {
					if len(ds) == 1 {
						delete(t.goneTerms, k)
						delta -= int64(len(k)) + tailTermBytes + int64(cap(ds))*goneBytes
					} else {
						t.goneTerms[k] = ds[:len(ds)-1]
					}
				}
			}
			t.gonePairs -= len(g.terms)
			delta -= tailDeadBytes
		}
		t.gone.Store(&list)
	}
	t.grow(delta)
}

// goneDocs is the merged documents forgotten since the merge, by document;
// the caller must not change it.
func (t *tail) goneDocs() []goneDoc {
	if l := t.gone.Load(); l != nil {
		return *l
	}
	return nil
}

// goneDF is how many of the documents forgotten at or before seq hold term.
func (t *tail) goneDF(term []byte, seq uint64) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := 0
	for _, g := range t.goneTerms[string(term)] {
		if g.stamp <= seq {
			n++
		}
	}
	return n
}

// goneByTerm returns, for a merge's purge, each term of the gone documents
// with those that hold it, in order. Only the committer calls it.
func (t *tail) goneByTerm() map[string][]uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string][]uint64, len(t.goneTerms))
	for k, ds := range t.goneTerms {
		docs := make([]uint64, len(ds))
		for i, g := range ds {
			docs[i] = g.doc
		}
		slices.Sort(docs)
		out[k] = docs
	}
	return out
}

// goneWork is the postings of gone documents a merge would purge.
func (t *tail) goneWork() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.gonePairs
}

// postings appends to dst the postings of term visible at snapshot seq,
// of documents above after.
func (t *tail) postings(term []byte, seq, after uint64, dst []posting) []posting {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, p := range t.terms[string(term)] {
		if p.doc <= after {
			continue
		}
		if p.doc > seq {
			break
		}
		if stamp, ok := t.dead[p.doc]; ok && stamp <= seq {
			continue
		}
		dst = append(dst, p)
	}
	return dst
}

// snapshot returns every live posting, term by term, for a merge. Only the
// committer calls it, so no change runs meanwhile.
func (t *tail) snapshot() map[string][]posting {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string][]posting, len(t.terms))
	for k, ps := range t.terms {
		live := make([]posting, 0, len(ps))
		for _, p := range ps {
			if _, gone := t.dead[p.doc]; !gone {
				live = append(live, p)
			}
		}
		if len(live) > 0 {
			out[k] = live
		}
	}
	return out
}

func (t *tail) len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.size
}

// termCount is the number of distinct terms in the tail, of its documents
// and of the gone ones: what a merge of it costs, one chunk append or
// rewrite each.
func (t *tail) termCount() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.terms) + len(t.goneTerms)
}

// DefaultMergeBytes is the bound of one store's tail when
// Options.MergeBytes is 0.
const DefaultMergeBytes = 32 << 20

// DefaultTailBudget is the budget tenants.Pool shares among its stores.
const DefaultTailBudget = 256 << 20

// A TailBudget bounds the memory that the index tails of several stores
// hold together: give the same one to every store of a process (through
// Options.TailBudget). When their total passes the budget, a store whose
// tail holds more than its share (the budget over the number of stores that
// share it) merges it at its next commit; a store that commits while under
// its share asks the store with the largest tail to merge, so that an idle
// store's tail does not hold the budget. It is safe for concurrent use.
type TailBudget struct {
	limit int64
	used  atomic.Int64

	mu     sync.Mutex
	stores map[*Store]struct{}
}

// NewTailBudget returns a budget of limit bytes; limit <= 0 means
// DefaultTailBudget.
func NewTailBudget(limit int64) *TailBudget {
	if limit <= 0 {
		limit = DefaultTailBudget
	}
	return &TailBudget{limit: limit, stores: map[*Store]struct{}{}}
}

// Used is the estimated memory that the tails sharing the budget hold.
func (b *TailBudget) Used() int64 { return b.used.Load() }

// Limit is the budget, in bytes.
func (b *TailBudget) Limit() int64 { return b.limit }

func (b *TailBudget) add(delta int64) {
	if b != nil {
		b.used.Add(delta)
	}
}

func (b *TailBudget) join(s *Store) {
	if b != nil {
		b.mu.Lock()
		b.stores[s] = struct{}{}
		b.mu.Unlock()
	}
}

func (b *TailBudget) leave(s *Store) {
	if b != nil {
		b.mu.Lock()
		delete(b.stores, s)
		b.mu.Unlock()
	}
}

// over reports whether the tails hold more than the budget. If they do, it
// returns the share of one store, and the store with the largest tail.
func (b *TailBudget) over() (share int64, largest *Store, ok bool) {
	if b == nil || b.used.Load() <= b.limit {
		return 0, nil, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var most int64 = -1
	for s := range b.stores {
		if n := s.index.current().bytes.Load(); n > most {
			most, largest = n, s
		}
	}
	return b.limit / int64(max(len(b.stores), 1)), largest, true
}
