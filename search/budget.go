package search

// Tokens estimates how many model tokens text costs: one per four bytes,
// rounded up, the usual rule of thumb for English with BPE tokenizers. It
// overestimates for prose and underestimates for CJK; it is a budget, not a
// count. Empty text costs 0, any other at least 1.
func Tokens(text string) int {
	return tokens(len(text))
}

func tokens(size int) int {
	if size <= 0 {
		return 0
	}
	return (size + 3) / 4
}

// Cut returns how many of a ranking's items fit in budget tokens, given each
// item's text size in bytes, best first. It stops at the first item that
// would take the total past budget, rather than skipping to smaller ones
// below it, so what comes back is always a prefix of the ranking. A budget
// of zero or less means no budget.
func Cut(sizes []int, budget int) int {
	if budget <= 0 {
		return len(sizes)
	}
	total := 0
	for i, size := range sizes {
		total += tokens(size)
		if total > budget {
			return i
		}
	}
	return len(sizes)
}
