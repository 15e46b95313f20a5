package search

import "math"

// BM25 holds the Okapi BM25 parameters: K1 is how fast repeats of a term
// stop adding to a score, B how much a long document is penalised.
type BM25 struct{ K1, B float64 }

// DefaultBM25 is the usual choice (Lucene's defaults).
var DefaultBM25 = BM25{K1: 1.2, B: 0.75}

// IDF is the inverse document frequency of a term that df of n documents
// hold. It is Lucene's form, ln(1 + (n − df + 0.5)/(df + 0.5)), which unlike
// the classic one is never negative: a term in most documents still counts
// a little instead of counting against them. df is clamped to [0, n].
func (p BM25) IDF(df, n int) float64 {
	n = max(n, 0)
	df = min(max(df, 0), n)
	return math.Log1p((float64(n-df) + 0.5) / (float64(df) + 0.5))
}

// Score is the BM25 weight of a term with inverse document frequency idf
// that occurs tf times in a document of docLen terms, where documents have
// avgDocLen terms on average. A non-positive avgDocLen scores as if the
// document had the average length.
func (p BM25) Score(idf float64, tf, docLen int, avgDocLen float64) float64 {
	if tf <= 0 {
		return 0
	}
	norm := 1.0
	if avgDocLen > 0 {
		norm = 1 - p.B + p.B*float64(docLen)/avgDocLen
	}
	f := float64(tf)
	return idf * f * (p.K1 + 1) / (f + p.K1*norm)
}

// Normalize divides every score by the largest, in place, so the best is 1.
// Scores from different queries are then on one scale. With no positive
// score (empty, or all zero) it changes nothing.
func Normalize(scores []float64) {
	top := 0.0
	for _, s := range scores {
		top = max(top, s)
	}
	if top <= 0 || math.IsInf(top, 1) || math.IsNaN(top) {
		return
	}
	for i := range scores {
		scores[i] /= top
	}
}
