package search

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// randomSigns returns n vectors of dim numbers and their signs.
func randomSigns(n, dim int, seed uint64) ([]int8, []uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	q := make([]int8, n*dim)
	for i := range q {
		q[i] = int8(r.IntN(255) - 127)
	}
	var signs []uint64
	for i := range n {
		signs = AppendSigns(signs, q[i*dim:(i+1)*dim])
	}
	return q, signs
}

// queryOf is the SignQuery of the quantised vector q.
func queryOf(q []int8) *SignQuery {
	f := make([]float32, len(q))
	for i, x := range q {
		f[i] = float32(x) / 127
	}
	var sq SignQuery
	sq.Set(f)
	return &sq
}

// The shortlist holds the wanted number of slots, the nearest by sign, and
// of equal distances the largest documents, whatever the order they came in.
func TestShortlistKeepsTheNearestBySign(t *testing.T) {
	for _, dim := range []int{100, 300} {
		const n = 5000
		q, signs := randomSigns(n, dim, uint64(dim))
		words := SignWords(dim)
		query := queryOf(q[17*dim : 18*dim])
		docs := make([]uint64, n)
		order := make([]int32, n)
		for i := range n {
			docs[i] = uint64(i*7919%n + 1)
			order[i] = int32(i)
		}
		slices.SortFunc(order, func(a, b int32) int {
			da := query.distance(signs[int(a)*words : int(a+1)*words])
			db := query.distance(signs[int(b)*words : int(b+1)*words])
			if da != db {
				return da - db
			}
			if docs[a] > docs[b] {
				return -1
			}
			return 1
		})
		want := slices.Sorted(slices.Values(order[:100]))

		var one Shortlist
		one.Reset(100)
		one.Scan(signs, query, 0, n)
		one.Finish(docs)
		got := slices.Sorted(slices.Values(one.Slots()))
		if !slices.Equal(got, want) {
			t.Errorf("dim %d, one scan: %d slots, want %d", dim, len(got), len(want))
		}

		// The same vectors in the reverse order: the same documents.
		rsigns := make([]uint64, 0, len(signs))
		rdocs := make([]uint64, 0, n)
		for i := n - 1; i >= 0; i-- {
			rsigns = append(rsigns, signs[i*words:(i+1)*words]...)
			rdocs = append(rdocs, docs[i])
		}
		var rev Shortlist
		rev.Reset(100)
		rev.Scan(rsigns, query, 0, n)
		rev.Finish(rdocs)
		var gotDocs, wantDocs []uint64
		for _, i := range rev.Slots() {
			gotDocs = append(gotDocs, rdocs[i])
		}
		for _, i := range want {
			wantDocs = append(wantDocs, docs[i])
		}
		slices.Sort(gotDocs)
		slices.Sort(wantDocs)
		if !slices.Equal(gotDocs, wantDocs) {
			t.Errorf("dim %d, reversed: other documents", dim)
		}

		if !slices.Contains(got, 17) {
			t.Errorf("dim %d: the query's own vector is not on the shortlist", dim)
		}
	}
}

func TestShortlistOfFewerVectorsThanWantedKeepsThemAll(t *testing.T) {
	q, signs := randomSigns(10, 100, 3)
	var s Shortlist
	s.Reset(100)
	s.Scan(signs, queryOf(q[:100]), 0, 10)
	s.Finish(nil)
	if len(s.Slots()) != 10 {
		t.Errorf("%d slots of 10", len(s.Slots()))
	}
}

// A query's signs are those the stored vectors get, and its strong numbers
// the larger half by magnitude.
func TestSignQueryAgreesWithAppendSigns(t *testing.T) {
	q, _ := randomSigns(1, 100, 5)
	sq := queryOf(q)
	if want := AppendSigns(nil, q); !slices.Equal(sq.Signs, want) {
		t.Errorf("SignQuery %x, AppendSigns %x", sq.Signs, want)
	}
	strong, least, most := 0, int8(127), int8(0)
	for j, x := range q {
		if sq.Strong[j/64]&(1<<(j%64)) != 0 {
			strong++
			least = min(least, max(x, -x))
		} else {
			most = max(most, max(x, -x))
		}
	}
	if least < most {
		t.Errorf("a strong number of magnitude %d, a weak one of %d", least, most)
	}
	if strong < 45 || strong > 50 {
		t.Errorf("%d strong numbers of 100, want the larger half", strong)
	}
	if d := sq.distance(AppendSigns(nil, q)); d != 0 {
		t.Errorf("a vector's distance from itself: %d", d)
	}
}

// BenchmarkShortlist is the scan of a search at 100k memories of 100
// numbers: a shortlist of 1,024 by sign. It allocates nothing once warm.
func BenchmarkShortlist(b *testing.B) {
	const n = 100000
	q, signs := randomSigns(n, 100, 9)
	query := queryOf(q[:100])
	docs := make([]uint64, n)
	for i := range docs {
		docs[i] = uint64(i + 1)
	}
	var s Shortlist
	b.ReportAllocs()
	for b.Loop() {
		s.Reset(1024)
		s.Scan(signs, query, 0, n)
		s.Finish(docs)
	}
}

// BenchmarkRescore is the exact scoring of a shortlist of 1,024.
func BenchmarkRescore(b *testing.B) {
	const n = 1024
	q, _ := randomSigns(n, 100, 11)
	query := make([]float32, 100)
	for i := range query {
		query[i] = float32(q[i]) / 127
	}
	b.ReportAllocs()
	var sink float32
	for b.Loop() {
		for i := range n {
			sink += Dot8(query, q[i*100:(i+1)*100])
		}
	}
	_ = sink
}

// A sample nearer than the rest does not cost the shortlist its want: it
// scans again.
func TestShortlistOfAMisleadingSampleScansAgain(t *testing.T) {
	const n = 4000
	signs := make([]uint64, 2*n)
	docs := make([]uint64, n)
	for i := range n {
		docs[i] = uint64(i + 1)
		signs[2*i], signs[2*i+1] = ^uint64(0), ^uint64(0) // far from the query, 0
	}
	for i := 0; i < 30*sampleEvery; i += sampleEvery {
		signs[2*i], signs[2*i+1] = 0, 0
	}
	negative := make([]int8, 100)
	for i := range negative {
		negative[i] = -1
	}
	var s Shortlist
	s.Reset(100)
	s.Scan(signs, queryOf(negative), 0, n)
	s.Finish(docs)
	if len(s.Slots()) != 100 {
		t.Fatalf("%d slots, want 100", len(s.Slots()))
	}
	near := 0
	for _, i := range s.Slots() {
		if signs[2*i] == 0 {
			near++
		}
	}
	if near != 30 {
		t.Errorf("%d of the 30 nearest kept", near)
	}
}
