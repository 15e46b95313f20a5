package search

import (
	"math"
	"math/bits"
)

// Residual codes. In a cluster, every vector points much the way its
// centroid does, so the signs of its own numbers tell its members apart
// poorly; the signs of its residual, r = x − c, tell them apart well. A
// member's code is those signs and one number, alpha = |r|² / Σ|r_i|, and
// its cosine with a query q is estimated as
//
//	q·x = q·c + q·r ≈ q·c + alpha · Σ q_i·sign(r_i)
//
// (the estimator of RaBitQ, Gao and Long, 2024: the sign vector's angle
// with r stands in for q's). q·c is the cluster's, computed once; the sum
// is computed from the query's numbers quantised to residualBits bits, bit
// plane by bit plane, with population counts: ten of them a member for
// 100 dimensions.

// residualBits is the bits of each of the query's numbers.
const residualBits = 4

// A ResidualQuery is a query as a scan of residual codes compares it.
type ResidualQuery struct {
	planes [residualBits][]uint64
	lo     float32 // the query's numbers are lo + step·u, u of residualBits bits
	step   float32
	sum    float32 // Σ of the quantised numbers
	words  int
}

// Set makes q the query vec. It allocates only the first time, or when the
// dimensions grow.
func (q *ResidualQuery) Set(vec []float32) {
	q.words = SignWords(len(vec))
	for k := range q.planes {
		q.planes[k] = grow(q.planes[k], q.words)
	}
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for _, x := range vec {
		lo, hi = min(lo, x), max(hi, x)
	}
	q.lo, q.step, q.sum = lo, (hi-lo)/(1<<residualBits-1), 0
	for i, x := range vec {
		u := 0
		if q.step > 0 {
			u = int(math.Round(float64((x - lo) / q.step)))
		}
		for k := range q.planes {
			if u>>k&1 == 1 {
				q.planes[k][i/64] |= 1 << (i % 64)
			}
		}
		q.sum += lo + q.step*float32(u)
	}
}

// AppendResidual appends to dst the signs of the residual of the quantised
// vector x (numbers times scale) from the unit centroid cent, and returns
// them with the member's alpha (0 for a vector equal to its centroid).
func AppendResidual(dst []uint64, x []int8, scale float32, cent []float32) ([]uint64, float32) {
	var sq, l1 float64
	for w := 0; w < len(cent); w += 64 {
		var word uint64
		for j := w; j < min(w+64, len(cent)); j++ {
			r := float64(x[j])*float64(scale) - float64(cent[j])
			sq += r * r
			l1 += math.Abs(r)
			if r > 0 {
				word |= 1 << (j - w)
			}
		}
		dst = append(dst, word)
	}
	if l1 == 0 {
		return dst, 0
	}
	return dst, float32(sq / l1)
}

// Estimate is the estimated cosine of q with a member whose code is signs
// and alpha, in a cluster whose centroid's dot product with q is base.
func (q *ResidualQuery) Estimate(signs []uint64, alpha, base float32) float32 {
	ones, weighted := 0, 0
	for w, b := range signs[:q.words] {
		ones += bits.OnesCount64(b)
		for k := range q.planes {
			weighted += bits.OnesCount64(b&q.planes[k][w]) << k
		}
	}
	plus := q.lo*float32(ones) + q.step*float32(weighted) // Σ q_i over the positive signs
	return base + alpha*(2*plus-q.sum)
}

// A ResidualPart is a cluster's members as ScanResiduals offers them: their
// codes (SignWords words each, and alpha), their slots, and the dot product
// of the query with the cluster's centroid.
type ResidualPart struct {
	Signs []uint64
	Alpha []float32
	Slots []int32
	Base  float32
}

// distanceOf maps an estimated cosine to the distance a Shortlist keeps:
// 0 for 1, maxDistance for −1.
func distanceOf(cos float32) int {
	d := int((1 - cos) * (maxDistance / 2))
	return min(max(d, 0), maxDistance)
}

// ScanResiduals offers the members of parts to s by their estimated
// cosines with q, once after Reset; like Scan, when they are many, a sample
// of them (one in sampleEvery of each part) first sets the distance beyond
// which none is taken.
func (s *Shortlist) ScanResiduals(parts []ResidualPart, q *ResidualQuery) {
	n := 0
	for _, p := range parts {
		n += len(p.Slots)
	}
	if n >= sampleEvery*s.want {
		var h [maxDistance + 1]int32
		for _, p := range parts {
			if q.words == 2 && residualBits == 4 {
				sampleResiduals2(&h, p, q)
				continue
			}
			for i := 0; i < len(p.Slots); i += sampleEvery {
				h[distanceOf(q.Estimate(p.Signs[i*q.words:], p.Alpha[i], p.Base))]++
			}
		}
		s.limit = s.sampleCut(&h)
	}
	s.scanResiduals(parts, q)
	if len(s.slots) < s.want && s.limit < maxDistance {
		s.Reset(s.want)
		s.scanResiduals(parts, q)
	}
}

func (s *Shortlist) scanResiduals(parts []ResidualPart, q *ResidualQuery) {
	for _, p := range parts {
		s.of = p.Slots
		if q.words == 2 && residualBits == 4 {
			s.scanResiduals2(p, q)
			continue
		}
		for i := range p.Slots {
			if d := distanceOf(q.Estimate(p.Signs[i*q.words:], p.Alpha[i], p.Base)); d <= s.limit {
				s.take(i, d)
			}
		}
	}
	s.of = nil
}

// sampleResiduals2 counts in h the distances of one member of p in
// sampleEvery, as scanResiduals2 estimates them. The estimate is written
// out in both rather than in a function of its own: the compiler does not
// inline one of ten population counts, and the call cost a third of the
// scan (BenchmarkSemanticScanClustered).
func sampleResiduals2(h *[maxDistance + 1]int32, p ResidualPart, q *ResidualQuery) {
	a0, a1 := q.planes[0][0], q.planes[0][1]
	b0, b1 := q.planes[1][0], q.planes[1][1]
	c0, c1 := q.planes[2][0], q.planes[2][1]
	d0, d1 := q.planes[3][0], q.planes[3][1]
	signs, alpha := p.Signs[:2*len(p.Slots)], p.Alpha[:len(p.Slots)]
	for i := 0; i < len(alpha); i += sampleEvery {
		x0, x1 := signs[2*i], signs[2*i+1]
		ones := bits.OnesCount64(x0) + bits.OnesCount64(x1)
		w := bits.OnesCount64(x0&a0) + bits.OnesCount64(x1&a1) +
			(bits.OnesCount64(x0&b0)+bits.OnesCount64(x1&b1))<<1 +
			(bits.OnesCount64(x0&c0)+bits.OnesCount64(x1&c1))<<2 +
			(bits.OnesCount64(x0&d0)+bits.OnesCount64(x1&d1))<<3
		h[distanceOf(p.Base+alpha[i]*(2*(q.lo*float32(ones)+q.step*float32(w))-q.sum))]++
	}
}

// scanResiduals2 is scanResiduals for vectors of 65 to 128 numbers
// (GloVe's 100), the loop a clustered search spends its time in: Estimate
// unrolled, and the distance compared as a cosine.
func (s *Shortlist) scanResiduals2(p ResidualPart, q *ResidualQuery) {
	a0, a1 := q.planes[0][0], q.planes[0][1]
	b0, b1 := q.planes[1][0], q.planes[1][1]
	c0, c1 := q.planes[2][0], q.planes[2][1]
	d0, d1 := q.planes[3][0], q.planes[3][1]
	lo, step, sum := q.lo, q.step, q.sum
	signs, alpha := p.Signs[:2*len(p.Slots)], p.Alpha[:len(p.Slots)]
	// A member is taken when its distance is at most the limit, that is
	// when its estimate is at least floor.
	floor := 1 - float32(s.limit+1)/(maxDistance/2)
	limit := s.limit
	for i, al := range alpha {
		x0, x1 := signs[2*i], signs[2*i+1]
		ones := bits.OnesCount64(x0) + bits.OnesCount64(x1)
		w := bits.OnesCount64(x0&a0) + bits.OnesCount64(x1&a1) +
			(bits.OnesCount64(x0&b0)+bits.OnesCount64(x1&b1))<<1 +
			(bits.OnesCount64(x0&c0)+bits.OnesCount64(x1&c1))<<2 +
			(bits.OnesCount64(x0&d0)+bits.OnesCount64(x1&d1))<<3
		est := p.Base + al*(2*(lo*float32(ones)+step*float32(w))-sum)
		if est < floor {
			continue
		}
		if d := distanceOf(est); d <= s.limit {
			s.take(i, d)
			if s.limit != limit {
				limit = s.limit
				floor = 1 - float32(limit+1)/(maxDistance/2)
			}
		}
	}
}
