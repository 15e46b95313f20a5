package search

import "slices"

// RRFK is the k of reciprocal-rank fusion from Cormack, Clarke and Büttcher
// (2009): large enough that the first few ranks of one ranking do not drown
// out agreement between rankings.
const RRFK = 60

// Fused is one id with its fused score.
type Fused struct {
	ID    string
	Score float64
}

// RRF fuses rankings, each a list of ids best first, by reciprocal rank:
// an id scores the sum over rankings of 1/(k + rank), rank counting from 1.
// Only ranks count, so rankings whose scores are on different scales
// (BM25 and cosine similarity) fuse fairly. An id listed twice in one
// ranking counts once, at its better rank. The result is best first; ties
// keep the order in which ids first appear (first ranking first). k <= 0
// means RRFK.
func RRF(k int, rankings ...[]string) []Fused {
	if k <= 0 {
		k = RRFK
	}
	size := 0
	for _, r := range rankings {
		size += len(r)
	}
	out := make([]Fused, 0, size)
	index := make(map[string]int, size)
	seen := make([]int, 0, size) // the last ranking that scored out[i]
	for n, ranking := range rankings {
		for rank, id := range ranking {
			i, ok := index[id]
			if !ok {
				i = len(out)
				index[id] = i
				out = append(out, Fused{ID: id})
				seen = append(seen, -1)
			}
			if seen[i] == n {
				continue
			}
			seen[i] = n
			out[i].Score += 1 / float64(k+rank+1)
		}
	}
	slices.SortStableFunc(out, func(a, b Fused) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	return out
}
