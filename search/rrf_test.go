package search

import (
	"slices"
	"testing"
)

func TestRRF(t *testing.T) {
	tests := []struct {
		name     string
		k        int
		rankings [][]string
		want     []Fused
	}{
		{
			"an id high in both rankings beats one high in only one",
			0,
			[][]string{{"a", "b"}, {"b"}},
			[]Fused{{"b", 1.0/62 + 1.0/61}, {"a", 1.0 / 61}},
		},
		{
			"equal scores keep the order of first appearance",
			0,
			[][]string{{"a", "b", "c"}, {"b", "a", "d"}},
			[]Fused{{"a", 1.0/61 + 1.0/62}, {"b", 1.0/62 + 1.0/61}, {"c", 1.0 / 63}, {"d", 1.0 / 63}},
		},
		{
			"an id repeated in one ranking counts once, at its better rank",
			0,
			[][]string{{"a", "a", "b"}},
			[]Fused{{"a", 1.0 / 61}, {"b", 1.0 / 63}},
		},
		{
			"a given k replaces RRFK",
			1,
			[][]string{{"x", "y"}},
			[]Fused{{"x", 1.0 / 2}, {"y", 1.0 / 3}},
		},
		{
			"a single ranking keeps its order",
			0,
			[][]string{{"c", "b", "a"}},
			[]Fused{{"c", 1.0 / 61}, {"b", 1.0 / 62}, {"a", 1.0 / 63}},
		},
		{"no rankings fuse to nothing", 0, nil, []Fused{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RRF(tt.k, tt.rankings...)
			// Constant expressions are exact; the sums at run time round.
			same := slices.EqualFunc(got, tt.want, func(a, b Fused) bool {
				return a.ID == b.ID && near(a.Score, b.Score)
			})
			if !same {
				t.Errorf("RRF(%d, %q) = %v, want %v", tt.k, tt.rankings, got, tt.want)
			}
		})
	}
}
