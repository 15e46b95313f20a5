package search

import "slices"

// Fuse fuses two rankings of documents, each best first, by reciprocal
// rank with RRFK, and returns the best limit, each with its fused score.
// Of equal fused scores, a document of the first ranking (the lexical one)
// goes first, then the larger document (the newer memory), as in TopK: the
// answer does not depend on the order of a map or of a scan. A document
// twice in one ranking counts once, at its better rank.
func Fuse(first, second []Scored, limit int) []Scored {
	return FuseWeighted(first, second, 1, limit)
}

// FuseWeighted is Fuse with the second ranking's reciprocal ranks weighed
// by weight.
func FuseWeighted(first, second []Scored, weight float64, limit int) []Scored {
	return fuse(first, second, weight, limit, false)
}

// FuseBehind is FuseWeighted where a document of the second ranking alone
// comes after every document of the first, whatever their scores: the
// second reorders the first and adds its own documents after them. Each of
// those scores no higher than the document before it.
func FuseBehind(first, second []Scored, weight float64, limit int) []Scored {
	return fuse(first, second, weight, limit, true)
}

func fuse(first, second []Scored, weight float64, limit int, behind bool) []Scored {
	type fused struct {
		Scored
		inFirst bool
	}
	out := make([]fused, 0, len(first)+len(second))
	at := make(map[uint64]int, len(first)+len(second))
	for n, list := range [2][]Scored{first, second} {
		seen := make(map[uint64]bool, len(list))
		for rank, s := range list {
			if seen[s.Doc] {
				continue
			}
			seen[s.Doc] = true
			add := 1 / float64(RRFK+rank+1)
			if n == 1 {
				add *= weight
			}
			if i, ok := at[s.Doc]; ok {
				out[i].Score += add
				continue
			}
			at[s.Doc] = len(out)
			out = append(out, fused{Scored{Doc: s.Doc, Score: add}, n == 0})
		}
	}
	slices.SortFunc(out, func(a, b fused) int {
		switch {
		case behind && a.inFirst != b.inFirst:
			if a.inFirst {
				return -1
			}
			return 1
		case a.Score != b.Score:
			if a.Score > b.Score {
				return -1
			}
			return 1
		case a.inFirst != b.inFirst:
			if a.inFirst {
				return -1
			}
			return 1
		case a.Doc != b.Doc:
			if a.Doc > b.Doc {
				return -1
			}
			return 1
		}
		return 0
	})
	if limit >= 0 && len(out) > limit {
		out = out[:limit]
	}
	res := make([]Scored, len(out))
	for i, f := range out {
		res[i] = f.Scored
		if i > 0 {
			res[i].Score = min(res[i].Score, res[i-1].Score)
		}
	}
	return res
}

// Fill appends to fused, while it holds fewer than limit, the documents of
// ranking (best first) it lacks, in ranking's order: a hybrid search's
// lexical hits that its fusion left out take the places its fused hits
// leave. Each gets the score its rank would add in the fusion, no higher
// than the score before it.
func Fill(fused, ranking []Scored, limit int) []Scored {
	if len(fused) >= limit {
		return fused
	}
	have := make(map[uint64]bool, len(fused))
	for _, f := range fused {
		have[f.Doc] = true
	}
	for rank, s := range ranking {
		if len(fused) >= limit {
			break
		}
		if have[s.Doc] {
			continue
		}
		have[s.Doc] = true
		score := 1 / float64(RRFK+rank+1)
		if n := len(fused); n > 0 {
			score = min(score, fused[n-1].Score)
		}
		fused = append(fused, Scored{Doc: s.Doc, Score: score})
	}
	return fused
}
