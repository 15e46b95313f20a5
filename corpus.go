package memgate

import "slices"

// Corpus is what BM25 knows of the memories one search ranks, for the
// words of one query: how many memories there are, their total length in
// terms, and how many hold each term. A view (--include-namespace) ranks
// each store of it with the sum of its stores' corpora, so that a memory
// scores as it would in one store holding them all.
type Corpus struct {
	Memories int64
	Length   int64
	// Terms are the query's terms, as the stores analyse them, and DF how
	// many memories hold each.
	Terms []string
	DF    []int64
}

// Add returns the corpus of c and o together. A corpus without memories
// adds nothing; two corpora of different terms (different queries, or
// analyses) cannot be added, and Add reports false.
func (c Corpus) Add(o Corpus) (Corpus, bool) {
	switch {
	case o.Memories == 0 && o.Length == 0:
		return c, true
	case c.Memories == 0 && c.Length == 0:
		o.DF = slices.Clone(o.DF)
		return o, true
	case !slices.Equal(c.Terms, o.Terms) || len(c.DF) != len(o.DF):
		return Corpus{}, false
	}
	sum := Corpus{Memories: c.Memories + o.Memories, Length: c.Length + o.Length, Terms: c.Terms,
		DF: make([]int64, len(c.DF))}
	for i := range c.DF {
		sum.DF[i] = c.DF[i] + o.DF[i]
	}
	return sum, true
}
