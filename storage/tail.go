package storage

import (
	"slices"
	"sync"
)

// The tail holds, in memory, the postings of the documents written since the
// last merge — the documents numbered above meta's merged mark. A write adds
// its postings to the tail only, touching a handful of pages on disk (the
// record, its id, its creation key, the counters) instead of one posting
// chunk per distinct term. When the tail has gathered mergeEvery documents,
// the committer merges it into the postings bucket in one transaction, one
// chunk append per term, and starts an empty tail. At open, the tail is
// rebuilt from the records above the merged mark: the most recent documents,
// at the end of the docs bucket, at most mergeEvery of them.
//
// Readers see exactly their snapshot. The tail is changed just before a
// commit, so no reader can miss a committed document; a reader ignores
// postings of documents above its snapshot's sequence, and removals stamped
// with a sequence above it. A failed commit undoes its change. A reader takes
// the tail before its transaction and checks that the tail starts where its
// snapshot's merged mark says; if a merge came in between, it starts again.
type tail struct {
	base uint64 // the merged mark this tail starts above

	mu    sync.RWMutex
	terms map[string][]posting // term key → postings, by document
	dead  map[uint64]uint64    // document → sequence at which it was removed
	size  int                  // documents added, alive or not
}

func newTail(base uint64) *tail {
	return &tail{base: base, terms: map[string][]posting{}, dead: map[uint64]uint64{}}
}

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
}

func (c *tailChange) empty() bool { return len(c.adds) == 0 && len(c.deaths) == 0 }

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
	for _, d := range c.adds {
		for _, e := range d.entries {
			k := string(e.term)
			t.terms[k] = append(t.terms[k], posting{doc: d.doc, tf: e.tf, docLen: uint32(d.length)})
		}
		t.size++
	}
	for _, d := range c.deaths {
		t.dead[d[0]] = d[1]
	}
}

// undo takes back apply(c), the last change applied.
func (t *tail) undo(c *tailChange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(c.adds) - 1; i >= 0; i-- {
		d := c.adds[i]
		for j := len(d.entries) - 1; j >= 0; j-- {
			k := string(d.entries[j].term)
			if ps := t.terms[k]; len(ps) > 0 && ps[len(ps)-1].doc == d.doc {
				if len(ps) == 1 {
					delete(t.terms, k)
				} else {
					t.terms[k] = ps[:len(ps)-1]
				}
			}
		}
		t.size--
	}
	for _, d := range c.deaths {
		delete(t.dead, d[0])
	}
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
