package search

import (
	"math"
	"slices"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestIDF(t *testing.T) {
	tests := []struct {
		name  string
		df, n int
		want  float64
	}{
		{"a term in one of ten documents", 1, 10, 1.992430164690206},                    // ln(1 + 9.5/1.5)
		{"a term in every document still counts a little", 10, 10, 0.04652001563489291}, // ln(1 + 0.5/10.5)
		{"a term in 5 of 100 documents", 5, 100, 2.9103724246028344},                    // ln(1 + 95.5/5.5)
		{"an empty collection", 0, 0, math.Ln2},                                         // ln(1 + 0.5/0.5)
		{"a document frequency above n counts as n", 12, 10, 0.04652001563489291},
		{"a negative document frequency counts as zero", -3, 10, math.Log(1 + 10.5/0.5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DefaultBM25.IDF(tt.df, tt.n); !near(got, tt.want) {
				t.Errorf("IDF(%d, %d) = %v, want %v", tt.df, tt.n, got, tt.want)
			}
		})
	}
}

func TestIDFIsNeverNegative(t *testing.T) {
	for n := 0; n < 50; n++ {
		for df := -1; df <= n+1; df++ {
			if got := DefaultBM25.IDF(df, n); got <= 0 {
				t.Fatalf("IDF(%d, %d) = %v, want > 0", df, n, got)
			}
		}
	}
}

func TestScore(t *testing.T) {
	tests := []struct {
		name   string
		idf    float64
		tf     int
		docLen int
		avg    float64
		want   float64
	}{
		// 2 × 3 × 2.2 / (3 + 1.2 × (0.25 + 0.75 × 10/5)) = 13.2 / 5.1
		{"a long document is penalised", 2, 3, 10, 5, 2.588235294117647},
		// 1.5 × 2 × 2.2 / (2 + 1.2 × (0.25 + 0.75 × 5/10)) = 6.6 / 2.75
		{"a short document is favoured", 1.5, 2, 5, 10, 2.4},
		{"one occurrence in a document of average length scores the idf", 1.7, 1, 8, 8, 1.7},
		{"no occurrence scores zero", 1.7, 0, 8, 8, 0},
		{"an unknown average length scores as average", 1.7, 1, 8, 0, 1.7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DefaultBM25.Score(tt.idf, tt.tf, tt.docLen, tt.avg); !near(got, tt.want) {
				t.Errorf("Score(%v, %d, %d, %v) = %v, want %v", tt.idf, tt.tf, tt.docLen, tt.avg, got, tt.want)
			}
		})
	}
}

func TestScoreSaturates(t *testing.T) {
	// However often a term repeats, it scores below idf × (k1 + 1).
	p := DefaultBM25
	prev := 0.0
	for tf := 1; tf <= 1000; tf *= 10 {
		s := p.Score(1, tf, 100, 100)
		if s <= prev || s >= p.K1+1 {
			t.Fatalf("Score(tf=%d) = %v, want in (%v, %v)", tf, s, prev, p.K1+1)
		}
		prev = s
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		name   string
		scores []float64
		want   []float64
	}{
		{"the best score becomes 1 and the rest scale with it", []float64{2, 4, 1}, []float64{0.5, 1, 0.25}},
		{"a single score becomes 1", []float64{7.5}, []float64{1}},
		{"all zero scores are left alone", []float64{0, 0}, []float64{0, 0}},
		{"no scores are left alone", []float64{}, []float64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := slices.Clone(tt.scores)
			Normalize(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Normalize(%v) = %v, want %v", tt.scores, got, tt.want)
			}
		})
	}
}
