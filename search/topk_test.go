package search

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestTopK(t *testing.T) {
	type push struct {
		doc   uint64
		score float64
	}
	tests := []struct {
		name   string
		k      int
		pushes []push
		want   []Scored
	}{
		{
			"the k best are kept, best first",
			2,
			[]push{{1, 0.5}, {2, 3}, {3, 1}, {4, 2}},
			[]Scored{{2, 3}, {4, 2}},
		},
		{
			"of equal scores the newer document wins",
			2,
			[]push{{5, 1}, {9, 1}, {7, 1}},
			[]Scored{{9, 1}, {7, 1}},
		},
		{
			"equal scores are listed newest first",
			3,
			[]push{{1, 2}, {3, 2}, {2, 2}},
			[]Scored{{3, 2}, {2, 2}, {1, 2}},
		},
		{
			"fewer pushes than k keeps them all",
			10,
			[]push{{1, 1}, {2, 2}},
			[]Scored{{2, 2}, {1, 1}},
		},
		{
			"a NaN score is ignored",
			2,
			[]push{{1, math.NaN()}, {2, 1}},
			[]Scored{{2, 1}},
		},
		{
			"k of zero keeps nothing",
			0,
			[]push{{1, 1}},
			[]Scored{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top := NewTopK(tt.k)
			for _, p := range tt.pushes {
				top.Push(p.doc, p.score)
			}
			if got := top.Sorted(); !slices.Equal(got, tt.want) {
				t.Errorf("Sorted() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTopKMin(t *testing.T) {
	top := NewTopK(2)
	if _, ok := top.Min(); ok {
		t.Fatal("Min() of an empty TopK reports a threshold")
	}
	top.Push(1, 5)
	if _, ok := top.Min(); ok {
		t.Fatal("Min() of a TopK that is not full reports a threshold")
	}
	top.Push(2, 3)
	top.Push(3, 4)
	if got, ok := top.Min(); !ok || got != 4 {
		t.Fatalf("Min() = %v, %v; want 4, true", got, ok)
	}
}

func TestTopKReset(t *testing.T) {
	top := NewTopK(3)
	for i := range 5 {
		top.Push(uint64(i), float64(i))
	}
	top.Reset(1)
	top.Push(10, 1)
	top.Push(11, 0.5)
	want := []Scored{{10, 1}}
	if got := top.Sorted(); !slices.Equal(got, want) {
		t.Fatalf("after Reset(1), Sorted() = %v, want %v", got, want)
	}
}

// TopK must agree with sorting everything, including on many ties.
func TestTopKMatchesFullSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, k := range []int{1, 7, 100, 1000} {
		top := NewTopK(k)
		var all []Scored
		for doc := range uint64(3000) {
			s := Scored{Doc: doc, Score: float64(r.IntN(50))}
			all = append(all, s)
			top.Push(s.Doc, s.Score)
		}
		slices.SortFunc(all, func(a, b Scored) int {
			if better(a, b) {
				return -1
			}
			return 1
		})
		if got := top.Sorted(); !slices.Equal(got, all[:k]) {
			t.Fatalf("k=%d: Sorted() differs from the full sort's first %d", k, k)
		}
		if got := top.Sorted(); len(got) != k {
			t.Fatalf("k=%d: calling Sorted() twice gave %d documents", k, len(got))
		}
	}
}
