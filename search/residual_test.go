package search

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The estimate of a member's cosine is close to the exact one, whichever
// way the query points, and exact for a member equal to its centroid.
func TestEstimateIsCloseToTheCosine(t *testing.T) {
	const dim = 100
	r := rand.New(rand.NewPCG(5, 6))
	unit := func() []float32 {
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		Normalise(v)
		return v
	}
	cent := unit()
	var q ResidualQuery
	var worst, sum float64
	n := 0
	for range 50 {
		query := unit()
		q.Set(query)
		base := dotf(cent, query)
		for range 50 {
			// A member near the centroid, as a cluster's are.
			x := make([]float32, dim)
			noise := unit()
			for j := range x {
				x[j] = cent[j] + 0.6*noise[j]
			}
			Normalise(x)
			x8, scale := Quantize(nil, x)
			code, alpha := AppendResidual(nil, x8, scale, cent)
			exact := float64(Dot8(query, x8) * scale)
			err := math.Abs(float64(q.Estimate(code, alpha, base)) - exact)
			worst, sum, n = max(worst, err), sum+err, n+1
		}
	}
	if mean := sum / float64(n); mean > 0.06 || worst > 0.25 {
		t.Fatalf("estimates off by %.3f on average, %.3f at worst", mean, worst)
	}
	// A member at its centroid: alpha 0, the estimate is the centroid's.
	c8, scale := Quantize(nil, cent)
	exactCent := make([]float32, dim)
	for j, x := range c8 {
		exactCent[j] = float32(x) * scale
	}
	Normalise(exactCent)
	if _, alpha := AppendResidual(nil, c8, scale, exactCent); alpha > 1e-3 {
		t.Fatalf("alpha %v for a member at its centroid", alpha)
	}
}

// The unrolled scan of 100-dimension codes keeps what the general one
// keeps.
func TestScanResidualsUnrolledKeepsWhatEstimateKeeps(t *testing.T) {
	const n, dim = 5000, 100
	q8 := blobs(n, dim, 20)
	c, err := TrainClusters(t.Context(), q8, dim, 20, 5)
	if err != nil {
		t.Fatal(err)
	}
	parts := make([]ResidualPart, c.K())
	for i := range n {
		x := q8[i*dim : (i+1)*dim]
		k := c.Nearest8(x)
		var alpha float32
		parts[k].Slots = append(parts[k].Slots, int32(i))
		parts[k].Signs, alpha = AppendResidual(parts[k].Signs, x, 1.0/127, c.Centroid(k))
		parts[k].Alpha = append(parts[k].Alpha, alpha)
	}
	query := make([]float32, dim)
	for j := range query {
		query[j] = float32(q8[7*dim+j])
	}
	Normalise(query)
	var probe Probe
	c.Rank(&probe, query)
	for k := range parts {
		parts[k].Base = probe.Scores[k]
	}
	var q ResidualQuery
	q.Set(query)
	var fast Shortlist
	fast.Reset(64)
	fast.ScanResiduals(parts, &q)
	// The same by Estimate, one member at a time.
	var slow Shortlist
	slow.Reset(64)
	for _, p := range parts {
		slow.of = p.Slots
		for i := range p.Slots {
			slow.take(i, distanceOf(q.Estimate(p.Signs[2*i:], p.Alpha[i], p.Base)))
		}
	}
	slow.of = nil
	docs := make([]uint64, n)
	for i := range docs {
		docs[i] = uint64(i + 1)
	}
	fast.Finish(docs)
	slow.Finish(docs)
	a, b := slices.Clone(fast.Slots()), slices.Clone(slow.Slots())
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(a, b) || len(a) != 64 {
		t.Fatalf("the unrolled scan kept %v, Estimate %v", a, b)
	}
}
