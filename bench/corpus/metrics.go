package corpus

// Ranks are 1-based: 1 is the first hit, and 0 means the target was not
// among the hits at all.

// Rank returns the 1-based position of want in ids, or 0 if it is absent.
func Rank(ids []string, want string) int {
	for i, id := range ids {
		if id == want {
			return i + 1
		}
	}
	return 0
}

// SuccessAt reports whether a target found at rank is in the first k hits.
func SuccessAt(k, rank int) bool {
	return rank >= 1 && rank <= k
}

// SuccessRate returns the share of ranks that are in the first k hits, or 0
// for no ranks.
func SuccessRate(k int, ranks []int) float64 {
	if len(ranks) == 0 {
		return 0
	}
	n := 0
	for _, r := range ranks {
		if SuccessAt(k, r) {
			n++
		}
	}
	return float64(n) / float64(len(ranks))
}

// MRR returns the mean reciprocal rank: the mean of 1/rank, where a rank of
// 0 (not found) counts as 0. It is 0 for no ranks.
func MRR(ranks []int) float64 {
	if len(ranks) == 0 {
		return 0
	}
	var sum float64
	for _, r := range ranks {
		if r >= 1 {
			sum += 1 / float64(r)
		}
	}
	return sum / float64(len(ranks))
}
