package search

import "math/bits"

// The sign prefilter. Scanning every stored vector with a dot product costs
// a hundred multiplications a memory; the signs of a vector's numbers, one
// bit each, packed in 64-bit words, cost one XOR and one population count a
// word. The number of signs two vectors disagree on (their Hamming
// distance) grows with the angle between them, roughly: a Shortlist keeps
// the few hundred vectors nearest the query by it, and only those are
// scored exactly. On the memories of bench/hybrid at 100k, the 1,024
// nearest by sign held 89% of the five nearest by cosine.

// SignWords is the number of 64-bit words the signs of dim numbers take.
func SignWords(dim int) int { return (dim + 63) / 64 }

// AppendSigns appends to dst the signs of q, one bit a number (set for a
// positive one), packed in SignWords(len(q)) words.
func AppendSigns(dst []uint64, q []int8) []uint64 {
	for w := 0; w < len(q); w += 64 {
		var word uint64
		for j, x := range q[w:min(w+64, len(q))] {
			if x > 0 {
				word |= 1 << j
			}
		}
		dst = append(dst, word)
	}
	return dst
}

// SignsOf writes the signs of vec to dst (SignWords(len(vec)) words).
func SignsOf(dst []uint64, vec []float32) {
	clear(dst)
	for j, x := range vec {
		if x > 0 {
			dst[j/64] |= 1 << (j % 64)
		}
	}
}

// maxDistance bounds a Hamming distance the histogram counts; farther ones
// count as maxDistance (they are never among the nearest).
const maxDistance = 255

// A Shortlist collects the slots of the vectors nearest a query by sign:
// want of them (fewer only when there are fewer), the nearest, and of those
// at the farthest distance taken, the ones of the largest documents, so that
// what it keeps does not depend on the order of the scan. Scan in parts with
// several Shortlists and Merge them. A Shortlist is reused with Reset and is
// not safe for concurrent use.
type Shortlist struct {
	want  int
	limit int // the farthest distance still taken
	next  int // the length at which the buffer shrinks
	slots []int32
	dist  []uint8
}

// Reset empties s to collect want slots, keeping its memory.
func (s *Shortlist) Reset(want int) {
	s.want = max(want, 1)
	s.limit = maxDistance
	s.next = 2 * s.want
	s.slots, s.dist = s.slots[:0], s.dist[:0]
}

// Scan offers the slots lo to hi of signs (words words a slot) to s.
func (s *Shortlist) Scan(signs []uint64, words int, query []uint64, lo, hi int) {
	if words == 2 {
		s.scan2(signs, query[0], query[1], lo, hi)
		return
	}
	for i := lo; i < hi; i++ {
		d := 0
		for w, q := range query[:words] {
			d += bits.OnesCount64(signs[i*words+w] ^ q)
		}
		if d <= s.limit {
			s.take(i, d)
		}
	}
}

// scan2 is Scan for vectors of 65 to 128 numbers (GloVe's 100), the loop
// a search spends its time in.
func (s *Shortlist) scan2(signs []uint64, q0, q1 uint64, lo, hi int) {
	signs = signs[2*lo : 2*hi]
	limit := s.limit
	for i := 0; i+1 < len(signs); i += 2 {
		d := bits.OnesCount64(signs[i]^q0) + bits.OnesCount64(signs[i+1]^q1)
		if d <= limit {
			s.take(lo+i/2, d)
			limit = s.limit
		}
	}
}

// take keeps slot i at distance d; when the buffer is full, it drops those
// beyond the distance at which the count reaches want. Many slots can share
// that distance: the buffer then takes want more before it shrinks again,
// so that a slot costs O(1) however the distances fall.
func (s *Shortlist) take(i, d int) {
	s.slots = append(s.slots, int32(i))
	s.dist = append(s.dist, uint8(min(d, maxDistance)))
	if len(s.slots) >= s.next {
		s.shrink(s.cut(s.counts()))
		s.next = max(2*s.want, len(s.slots)+s.want)
	}
}

// counts is the histogram of the kept distances.
func (s *Shortlist) counts() *[maxDistance + 1]int32 {
	var h [maxDistance + 1]int32
	for _, d := range s.dist {
		h[d]++
	}
	return &h
}

// cut is the least distance at which the count of h reaches want.
func (s *Shortlist) cut(h *[maxDistance + 1]int32) int {
	n := 0
	for d, c := range h {
		n += int(c)
		if n >= s.want {
			return d
		}
	}
	return maxDistance
}

// shrink drops the slots beyond limit, keeping the others in their order.
func (s *Shortlist) shrink(limit int) {
	s.limit = limit
	k := 0
	for j, d := range s.dist {
		if int(d) <= limit {
			s.slots[k], s.dist[k] = s.slots[j], d
			k++
		}
	}
	s.slots, s.dist = s.slots[:k], s.dist[:k]
}

// Merge moves into s what the others collected (after s's own) and
// finishes (see Finish). Each part holds every slot up to its own limit, so
// the count is exact up to the least of them, where it has reached want if
// any part has.
func (s *Shortlist) Merge(docs []uint64, others ...*Shortlist) {
	for _, o := range others {
		s.slots = append(s.slots, o.slots...)
		s.dist = append(s.dist, o.dist...)
		s.limit = min(s.limit, o.limit)
	}
	s.Finish(docs)
}

// Finish keeps the want nearest slots: all those nearer than the distance
// at which the count reaches want, and of those at it, the ones whose
// documents (docs[slot]) are the largest. The same slots whatever the
// order of the scan.
func (s *Shortlist) Finish(docs []uint64) {
	cut := min(s.limit, s.cut(s.counts()))
	s.shrink(cut)
	if len(s.slots) <= s.want {
		return
	}
	k := 0 // the nearer slots first, then those at the cut
	for j, d := range s.dist {
		if int(d) < cut {
			s.slots[k], s.slots[j] = s.slots[j], s.slots[k]
			s.dist[k], s.dist[j] = s.dist[j], s.dist[k]
			k++
		}
	}
	largest(s.slots[k:], s.want-k, docs)
	s.slots, s.dist = s.slots[:s.want], s.dist[:s.want]
}

// largest moves to the front of a the m slots of the largest documents
// (quickselect: O(len(a))). Documents are distinct, so which m it picks does
// not depend on a's order.
func largest(a []int32, m int, docs []uint64) {
	if m <= 0 || m >= len(a) {
		return
	}
	k := m - 1 // the index the m-th largest must reach
	lo, hi := 0, len(a)-1
	for lo < hi {
		p := docs[a[lo+(hi-lo)/2]]
		i, j := lo, hi
		for i <= j {
			for docs[a[i]] > p {
				i++
			}
			for docs[a[j]] < p {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i, j = i+1, j-1
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return
		}
	}
}

// Slots is what s kept, after Finish or Merge (shared: valid until Reset).
func (s *Shortlist) Slots() []int32 { return s.slots }
