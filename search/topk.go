package search

import (
	"math"
	"slices"
)

// Scored is a document number with its score.
type Scored struct {
	Doc   uint64
	Score float64
}

// TopK keeps the k best of the documents pushed to it, in O(log k) per push
// and O(k) memory, however many are pushed. Of two equal scores the larger
// Doc wins: document numbers grow with every write, so newer memories win
// ties. A TopK is not safe for concurrent use.
type TopK struct {
	k    int
	heap []Scored // a min-heap: the worst kept document is heap[0]
}

// NewTopK returns a TopK that keeps k documents; k <= 0 keeps none.
func NewTopK(k int) *TopK {
	t := &TopK{}
	t.Reset(k)
	return t
}

// Reset empties t and makes it keep k documents, reusing its memory.
func (t *TopK) Reset(k int) {
	t.k = max(k, 0)
	t.heap = t.heap[:0]
	if cap(t.heap) < t.k && t.k <= 1<<16 {
		t.heap = make([]Scored, 0, t.k)
	}
}

// better reports whether a ranks above b.
func better(a, b Scored) bool {
	return a.Score > b.Score || a.Score == b.Score && a.Doc > b.Doc
}

// Push offers a document. A NaN score is ignored: it has no place in an order.
func (t *TopK) Push(doc uint64, score float64) {
	if math.IsNaN(score) || t.k == 0 {
		return
	}
	s := Scored{Doc: doc, Score: score}
	h := t.heap
	if len(h) < t.k {
		h = append(h, s)
		for i := len(h) - 1; i > 0; {
			parent := (i - 1) / 2
			if !better(h[parent], h[i]) {
				break
			}
			h[parent], h[i] = h[i], h[parent]
			i = parent
		}
		t.heap = h
		return
	}
	if !better(s, h[0]) {
		return
	}
	h[0] = s
	for i := 0; ; {
		worst, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && better(h[worst], h[l]) {
			worst = l
		}
		if r < len(h) && better(h[worst], h[r]) {
			worst = r
		}
		if worst == i {
			break
		}
		h[i], h[worst] = h[worst], h[i]
		i = worst
	}
}

// Min returns the score a document must beat to be kept, and true, once t
// holds k documents; until then any document is kept, and it returns false.
// Callers can skip scoring documents that cannot reach it.
func (t *TopK) Min() (float64, bool) {
	if t.k == 0 || len(t.heap) < t.k {
		return 0, false
	}
	return t.heap[0].Score, true
}

// Sorted returns the kept documents best first, in a new slice; t is
// unchanged and can take more pushes.
func (t *TopK) Sorted() []Scored {
	out := slices.Clone(t.heap)
	SortScored(out)
	return out
}

// SortScored sorts xs best first, as TopK.Sorted orders what it keeps: the
// higher score, then the larger document.
func SortScored(xs []Scored) {
	slices.SortFunc(xs, func(a, b Scored) int {
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return 0
	})
}
