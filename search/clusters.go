package search

import (
	"context"
	"math"
	"math/rand/v2"
)

// Clusters partition unit vectors by the nearest of k centroids (spherical
// k-means: a vector's cluster is the centroid of the largest dot product,
// and each centroid is the normalised sum of its vectors), so that a search
// can look at the vectors of the few clusters nearest its query instead of
// at all of them (an inverted file, IVF). Clusters are only read once
// trained, so they are safe for concurrent use.
type Clusters struct {
	dim  int
	cent []float32 // centroid c is cent[c*dim : (c+1)*dim]
}

// K is the number of clusters.
func (c *Clusters) K() int { return len(c.cent) / c.dim }

// Dim is the number of dimensions of the vectors clustered.
func (c *Clusters) Dim() int { return c.dim }

func (c *Clusters) centroid(i int) []float32 { return c.cent[i*c.dim : (i+1)*c.dim] }

// Nearest8 is the cluster of the quantised vector q (Quantize's numbers;
// its scale does not change which centroid is nearest).
func (c *Clusters) Nearest8(q []int8) int {
	best, at := float32(math.Inf(-1)), 0
	for i := range c.K() {
		if d := Dot8(c.centroid(i), q); d > best {
			best, at = d, i
		}
	}
	return at
}

// A Probe is the clusters in the order a query probes them, with the
// scratch that ordering needs; it is reused by Rank, which then allocates
// nothing. A search probes a few of the clusters nearest its query, so
// they are not sorted: Next takes them off a heap, nearest first.
type Probe struct {
	Scores []float32 // the query's dot product with each cluster's centroid, by cluster
	keys   []uint64  // a heap of the clusters not yet taken, the smallest key on top
}

// Rank makes p the clusters in order for query: the nearest first, and of
// equal dot products the lower cluster first.
func (c *Clusters) Rank(p *Probe, query []float32) {
	p.Scores, p.keys = p.Scores[:0], p.keys[:0]
	for i := range c.K() {
		d := dotf(c.centroid(i), query)
		p.Scores = append(p.Scores, d)
		// The smallest key is the largest score, then the lower cluster:
		// no comparison function to call.
		p.keys = append(p.keys, uint64(^orderedBits(d))<<32|uint64(i))
	}
	for i := len(p.keys)/2 - 1; i >= 0; i-- {
		p.down(i)
	}
}

// Next is the nearest cluster not yet taken; false when all are.
func (p *Probe) Next() (int32, bool) {
	n := len(p.keys)
	if n == 0 {
		return 0, false
	}
	top := p.keys[0]
	p.keys[0] = p.keys[n-1]
	p.keys = p.keys[:n-1]
	p.down(0)
	return int32(uint32(top)), true
}

// down moves the key at i down the heap to its place.
func (p *Probe) down(i int) {
	h := p.keys
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		if r := l + 1; r < len(h) && h[r] < h[l] {
			l = r
		}
		if h[i] <= h[l] {
			return
		}
		h[i], h[l] = h[l], h[i]
		i = l
	}
}

// orderedBits maps a float32 to a uint32 of the same order.
func orderedBits(f float32) uint32 {
	b := math.Float32bits(f)
	if b&(1<<31) != 0 {
		return ^b
	}
	return b | 1<<31
}

func dotf(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// TrainClusters runs rounds of spherical k-means over the n = len(q)/dim
// quantised vectors of q (vector i is q[i*dim:(i+1)*dim]) into k clusters
// (fewer when there are fewer vectors). The first centroids are chosen as
// k-means++ does, each vector drawn in proportion to its squared distance
// from the centroids chosen before it, from a generator of a fixed seed:
// the same vectors in the same order give the same clusters. A centroid
// left without vectors keeps its place. It stops early, returning the
// context's error, when ctx ends.
func TrainClusters(ctx context.Context, q []int8, dim, k, rounds int) (*Clusters, error) {
	n := len(q) / dim
	k = min(k, n)
	c := &Clusters{dim: dim, cent: make([]float32, k*dim)}
	if k == 0 {
		return c, nil
	}
	// k-means++: dist[i] is vector i's squared distance from the nearest
	// centroid so far (2 - 2cos for unit vectors).
	r := rand.New(rand.NewPCG(1, 2))
	dist := make([]float64, n)
	for i := range dist {
		dist[i] = math.Inf(1)
	}
	pick := 0
	for ci := range k {
		if ci%16 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		cent := c.centroid(ci)
		for j, x := range q[pick*dim : (pick+1)*dim] {
			cent[j] = float32(x)
		}
		normalize(cent)
		total := 0.0
		for i := range n {
			v := q[i*dim : (i+1)*dim]
			d := 2 - 2*float64(Dot8(cent, v))/norm8(v)
			dist[i] = min(dist[i], max(d, 0))
			total += dist[i]
		}
		if total == 0 {
			continue
		}
		// Drawn in proportion to dist; should rounding leave at above 0
		// after the last vector, that vector (the last of any distance) is
		// drawn, never the centroid just taken again.
		at := r.Float64() * total
		for i, d := range dist {
			if d == 0 {
				continue
			}
			pick = i
			if at -= d; at <= 0 {
				break
			}
		}
	}
	sums := make([]float32, k*dim)
	assign := make([]int32, n)
	for range rounds {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		clear(sums)
		moved := 0
		for i := range n {
			v := q[i*dim : (i+1)*dim]
			a := int32(c.Nearest8(v))
			if a != assign[i] {
				moved++
			}
			assign[i] = a
			s := sums[int(a)*dim : (int(a)+1)*dim]
			for j, x := range v {
				s[j] += float32(x)
			}
		}
		for i := range k {
			s := sums[i*dim : (i+1)*dim]
			if normalize(s) {
				copy(c.centroid(i), s)
			}
		}
		if moved == 0 {
			break
		}
	}
	return c, nil
}

// norm8 is the length of q, or 1 for a vector of zeros.
func norm8(q []int8) float64 {
	ss := 0
	for _, x := range q {
		ss += int(x) * int(x)
	}
	if ss == 0 {
		return 1
	}
	return math.Sqrt(float64(ss))
}

// normalize makes v of unit length, unless it is all zeros (false).
func normalize(v []float32) bool {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	if ss == 0 {
		return false
	}
	inv := float32(1 / math.Sqrt(ss))
	for j := range v {
		v[j] *= inv
	}
	return true
}

// ClustersOf is the clusters whose centroids are cent, each of dim numbers
// one after the other (as Centroids gives them), as they were trained: false
// when cent is not a whole number of centroids, or holds a number that is
// not finite.
func ClustersOf(dim int, cent []float32) (*Clusters, bool) {
	if dim <= 0 || len(cent) == 0 || len(cent)%dim != 0 {
		return nil, false
	}
	for _, x := range cent {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, false
		}
	}
	return &Clusters{dim: dim, cent: cent}, true
}

// Centroids is every centroid's numbers, one centroid after the other; they
// are not to be changed.
func (c *Clusters) Centroids() []float32 { return c.cent }

// Centroid is cluster i's centroid, a unit vector; it is not to be changed.
func (c *Clusters) Centroid(i int) []float32 { return c.centroid(i) }
