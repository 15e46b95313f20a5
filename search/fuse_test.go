package search

import (
	"math"
	"slices"
	"testing"
)

func TestFuse(t *testing.T) {
	s := func(docs ...uint64) []Scored {
		out := make([]Scored, len(docs))
		for i, d := range docs {
			out[i] = Scored{Doc: d, Score: float64(100 - i)}
		}
		return out
	}
	tests := []struct {
		name              string
		lexical, semantic []Scored
		limit             int
		want              []Scored
	}{
		{"a document in both lists beats ones in one", s(1, 2), s(2, 3), 10,
			[]Scored{{2, 1.0/62 + 1.0/61}, {3, 1.0 / 62}, {1, 1.0 / 61}}[:0]},
		{"equal fused scores: the larger document first", s(1, 2), s(2, 1), 10,
			[]Scored{{2, 1.0/62 + 1.0/61}, {1, 1.0/61 + 1.0/62}}},
		{"documents of one list only keep their reciprocal rank", s(5), nil, 10,
			[]Scored{{5, 1.0 / 61}}},
		{"semantic only", nil, s(7, 8), 10, []Scored{{7, 1.0 / 61}, {8, 1.0 / 62}}},
		{"equal scores from one list each: the first list's document first", s(1), s(9), 10,
			[]Scored{{1, 1.0 / 61}, {9, 1.0 / 61}}},
		{"a document twice in a list counts once, at its better rank", s(4, 4, 9), nil, 10,
			[]Scored{{4, 1.0 / 61}, {9, 1.0 / 63}}},
		{"limit cuts the fused list", s(1, 2, 3), s(3), 1, []Scored{{3, 1.0/63 + 1.0/61}}},
		{"nothing fuses to nothing", nil, nil, 10, []Scored{}},
	}
	// The first case's ranks: 2 is 2nd and 1st, 1 is 1st in one list, 3 is 2nd in one.
	tests[0].want = []Scored{{2, 1.0/62 + 1.0/61}, {1, 1.0 / 61}, {3, 1.0 / 62}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Fuse(tt.lexical, tt.semantic, tt.limit)
			if !slices.EqualFunc(got, tt.want, func(a, b Scored) bool { return a.Doc == b.Doc && near(a.Score, b.Score) }) {
				t.Errorf("Fuse = %v, want %v", got, tt.want)
			}
		})
	}
	// The same input twice fuses the same, whatever the map order.
	a, b := Fuse(s(1, 2, 3, 4, 5), s(5, 4, 3, 2, 1), 10), Fuse(s(1, 2, 3, 4, 5), s(5, 4, 3, 2, 1), 10)
	if !slices.Equal(a, b) || a[0].Doc != 5 {
		t.Errorf("two fusions differ or ties were not broken by the larger document: %v, %v", a, b)
	}
}

// Weighed at a half, the second ranking's documents alone come after every
// document of the first, and a document of both still moves up.
func TestFuseWeightedPutsTheSecondListAlonesLast(t *testing.T) {
	first := make([]Scored, 50)
	for i := range first {
		first[i] = Scored{Doc: uint64(i + 1), Score: float64(100 - i)}
	}
	second := []Scored{{Doc: 1000, Score: 0.9}, {Doc: 30, Score: 0.8}}
	got := FuseWeighted(first, second, 0.5, 100)
	if len(got) != 51 || got[50].Doc != 1000 {
		t.Fatalf("the second list's own document is at %d of %d, want last", slices.IndexFunc(got, func(s Scored) bool { return s.Doc == 1000 }), len(got))
	}
	if got[0].Doc != 30 {
		t.Errorf("first %d, want 30 (in both lists)", got[0].Doc)
	}
	if want := 1.0/90 + 0.5/62; math.Abs(got[0].Score-want) > 1e-15 {
		t.Errorf("fused score %v, want %v", got[0].Score, want)
	}
}

func TestFillAppendsTheRankingsLeftOutInOrder(t *testing.T) {
	fused := []Scored{{Doc: 7, Score: 0.03}, {Doc: 2, Score: 0.004}}
	ranking := []Scored{{Doc: 2, Score: 9}, {Doc: 5, Score: 4}, {Doc: 2, Score: 4}, {Doc: 9, Score: 1}, {Doc: 1, Score: 0.5}}
	got := Fill(slices.Clone(fused), ranking, 4)
	want := []Scored{{Doc: 7, Score: 0.03}, {Doc: 2, Score: 0.004}, {Doc: 5, Score: 0.004}, {Doc: 9, Score: 0.004}}
	if !slices.Equal(got, want) {
		t.Fatalf("Fill: %v, want %v", got, want)
	}
	if got := Fill(slices.Clone(fused), ranking, 2); !slices.Equal(got, fused) {
		t.Fatalf("Fill of a full answer changed it: %v", got)
	}
	if got := Fill(nil, ranking, 2); len(got) != 2 || got[0].Doc != 2 || got[1].Doc != 5 || got[0].Score != 1.0/61 || got[1].Score != 1.0/62 {
		t.Fatalf("Fill of nothing: %v", got)
	}
}

// FuseBehind puts a document of the second list alone after every one of
// the first, however deep the first, with a score no higher than theirs;
// the second still reorders the first.
func TestFuseBehind(t *testing.T) {
	var first []Scored
	for d := range uint64(80) {
		first = append(first, Scored{Doc: d + 1, Score: float64(100 - d)})
	}
	second := []Scored{{Doc: 1000, Score: 1}, {Doc: 80, Score: 0.9}}
	got := FuseBehind(first, second, 0.5, 100)
	if len(got) != 81 || got[80].Doc != 1000 {
		t.Fatalf("the second list's own document is not last: %v", got[75:])
	}
	if got[79].Doc == 80 {
		t.Errorf("the second list did not reorder the first: %v", got[75:])
	}
	for i := 1; i < len(got); i++ {
		if got[i].Score > got[i-1].Score {
			t.Fatalf("score %v after %v at %d", got[i].Score, got[i-1].Score, i)
		}
	}
	if w := FuseWeighted(first, second, 0.5, 100); w[80].Doc == 1000 {
		t.Errorf("FuseWeighted already puts it last: the test shows nothing")
	}
}
