package search

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// blobs is n quantised unit vectors of dim numbers around k directions.
func blobs(n, dim, k int) []int8 {
	r := rand.New(rand.NewPCG(3, 4))
	centres := make([][]float32, k)
	for c := range centres {
		centres[c] = make([]float32, dim)
		for j := range dim {
			centres[c][j] = float32(r.NormFloat64())
		}
		Normalise(centres[c])
	}
	var q []int8
	v := make([]float32, dim)
	for i := range n {
		for j := range dim {
			v[j] = centres[i%k][j] + 0.03*float32(r.NormFloat64())
		}
		Normalise(v)
		q, _ = Quantize(q, v)
	}
	return q
}

func TestTrainClustersFindsTheBlobsAlikeEachTime(t *testing.T) {
	const n, dim, k = 2000, 16, 8
	q := blobs(n, dim, k)
	a, err := TrainClusters(context.Background(), q, dim, k, 10)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := TrainClusters(context.Background(), q, dim, k, 10)
	if !slices.Equal(a.cent, b.cent) {
		t.Fatal("the same vectors gave other clusters")
	}
	// Vectors of the same blob share a cluster, and the k blobs take k
	// clusters.
	of := map[int]int{}
	for i := range n {
		c := a.Nearest8(q[i*dim : (i+1)*dim])
		if prev, ok := of[i%k]; ok && prev != c {
			t.Fatalf("blob %d is split between clusters %d and %d", i%k, prev, c)
		}
		of[i%k] = c
	}
	used := map[int]bool{}
	for _, c := range of {
		used[c] = true
	}
	if len(used) != k {
		t.Fatalf("%d blobs in %d clusters", k, len(used))
	}
}

func TestTrainClustersOfFewVectorsAndStopped(t *testing.T) {
	q := blobs(3, 8, 3)
	c, err := TrainClusters(context.Background(), q, 8, 10, 5)
	if err != nil || c.K() != 3 {
		t.Fatalf("3 vectors into 10 clusters: %v, %v; want 3", c, err)
	}
	if c, _ := TrainClusters(context.Background(), nil, 8, 10, 5); c.K() != 0 {
		t.Fatal("no vectors, yet clusters")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := TrainClusters(ctx, blobs(100, 8, 4), 8, 4, 5); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled training: %v", err)
	}
}

func TestRankPutsTheNearestClusterFirstAndTiesInOrder(t *testing.T) {
	c := &Clusters{dim: 2, cent: []float32{1, 0, 0, 1, 0, 1, -1, 0}}
	var p Probe
	order := func() []int32 {
		var o []int32
		for c, ok := p.Next(); ok; c, ok = p.Next() {
			o = append(o, c)
		}
		return o
	}
	c.Rank(&p, []float32{0, 1})
	if o := order(); !slices.Equal(o, []int32{1, 2, 0, 3}) || !slices.Equal(p.Scores, []float32{0, 1, 1, 0}) {
		t.Fatalf("order %v, scores %v; want [1 2 0 3] and [0 1 1 0]", o, p.Scores)
	}
	c.Rank(&p, []float32{-1, -0.5})
	if o := order(); !slices.Equal(o, []int32{3, 1, 2, 0}) {
		t.Fatalf("order %v, want [3 1 2 0] (negative dot products)", o)
	}
}

// The heap gives the same order as sorting every cluster's score, for
// many clusters of random centroids, ties among them.
func TestRankOrdersManyClustersAsASort(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const dim = 4
	c := &Clusters{dim: dim}
	for range 300 * dim {
		c.cent = append(c.cent, float32(r.IntN(3)-1)) // many equal scores
	}
	query := []float32{0.5, -1, 0.25, 1}
	var p Probe
	c.Rank(&p, query)
	want := make([]int32, c.K())
	for i := range want {
		want[i] = int32(i)
	}
	slices.SortStableFunc(want, func(a, b int32) int { return cmp.Compare(p.Scores[b], p.Scores[a]) })
	var got []int32
	for c, ok := p.Next(); ok; c, ok = p.Next() {
		got = append(got, c)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("heap order differs from the sort's:\n%v\n%v", got, want)
	}
}

// As many clusters as vectors: k-means++ takes every vector once as a
// centroid, so each is its own cluster.
func TestTrainClustersTakesEachVectorOnceWhenKIsN(t *testing.T) {
	const n, dim = 40, 8
	q := blobs(n, dim, n)
	c, err := TrainClusters(context.Background(), q, dim, n, 3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for i := range n {
		seen[c.Nearest8(q[i*dim:(i+1)*dim])] = true
	}
	if len(seen) != n {
		t.Fatalf("%d vectors in %d clusters, want each in its own", n, len(seen))
	}
}
