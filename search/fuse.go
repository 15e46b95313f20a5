package search

import "slices"

// Fuse fuses two rankings of documents, each best first, by reciprocal
// rank with RRFK, and returns the best limit, each with its fused score.
// Ties are broken as TopK breaks them: the larger document (the newer
// memory) first, so the answer does not depend on the order of a map or of
// a scan. A document twice in one ranking counts once, at its better rank.
func Fuse(lexical, semantic []Scored, limit int) []Scored {
	out := make([]Scored, 0, len(lexical)+len(semantic))
	at := make(map[uint64]int, len(lexical)+len(semantic))
	for _, list := range [2][]Scored{lexical, semantic} {
		seen := make(map[uint64]bool, len(list))
		for rank, s := range list {
			if seen[s.Doc] {
				continue
			}
			seen[s.Doc] = true
			add := 1 / float64(RRFK+rank+1)
			if i, ok := at[s.Doc]; ok {
				out[i].Score += add
				continue
			}
			at[s.Doc] = len(out)
			out = append(out, Scored{Doc: s.Doc, Score: add})
		}
	}
	slices.SortFunc(out, func(a, b Scored) int {
		switch {
		case better(a, b):
			return -1
		case better(b, a):
			return 1
		}
		return 0
	})
	if limit >= 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}
