package storage

import (
	"math/rand/v2"
	"testing"

	"github.com/memgate/memgate/search"
)

// randomIndex is a vector index of n random unit vectors of dim numbers,
// as the store holds them, without a file.
func randomIndex(n, dim int) (*Store, [][]float32) {
	s := &Store{}
	ix := &s.vecs
	ix.dim, ix.slot, ix.blank = dim, map[uint64]int{}, map[uint64]bool{}
	r := rand.New(rand.NewPCG(1, 2))
	vec := make([]float32, dim)
	var queries [][]float32
	for doc := range n {
		for j := range vec {
			vec[j] = float32(r.NormFloat64())
		}
		search.Normalise(vec)
		if doc%(n/16) == 0 {
			queries = append(queries, append([]float32(nil), vec...))
		}
		ix.add(uint64(doc+1), vectorOf(vec, "m"))
	}
	return s, queries
}

// BenchmarkSemanticScan is the vector half of a hybrid search at 100k
// memories of 100 numbers (GloVe's): the shortlist by sign, the exact
// scores of 512, the best 216. It allocates the answer's slice alone.
func BenchmarkSemanticScan(b *testing.B) {
	s, queries := randomIndex(100000, 100)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.semanticScan(queries[i%len(queries)], 216, 1<<62, probeDivisor)
		i++
	}
}

// The scan finds a stored vector as its own nearest, whatever part of the
// index it is in.
func TestSemanticScanFindsAVectorItself(t *testing.T) {
	s, queries := randomIndex(20000, 100)
	for i, q := range queries {
		near := s.semanticScan(q, 10, 1<<62, probeDivisor)
		if len(near) == 0 || near[0].Doc != uint64(i*(20000/16)+1) || near[0].Score < 0.99 {
			t.Fatalf("query %d: nearest %v, want document %d at about 1", i, near[:min(len(near), 1)], i*(20000/16)+1)
		}
		if older := s.semanticScan(q, 10, uint64(i*(20000/16)), probeDivisor); len(older) > 0 && older[0].Doc > uint64(i*(20000/16)) {
			t.Fatalf("query %d: a snapshot before the document found it", i)
		}
	}
}
