package storage

import (
	"context"
	"errors"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/search"
)

// Ranking across stores. A view (several namespaces searched as one) ranks
// in two phases: each store tells its corpus for the query's terms
// (Corpus), the caller adds them up, and each store ranks its memories
// with the sum (SearchWith). BM25 then sees one collection: the memory
// count, the average length and every term's document frequency are the
// union's, so a memory's lexical score is what it would be in one store
// holding every memory of the view, and the per-store rankings merge by
// score. Each store reads its own part again in the transaction that
// ranks, so its own memories are always counted as they are in that
// snapshot; only the other stores' parts date from the first phase.

// Corpus returns what BM25 knows of this store for the words of text: the
// memories, their total length, and each query term's document frequency,
// counted as Search counts them (gone memories discounted).
func (s *Store) Corpus(ctx context.Context, text string) (memgate.Corpus, error) {
	const op = "storage.Corpus"
	if err := s.fresh(ctx, op); err != nil {
		return memgate.Corpus{}, err
	}
	if err := cancelled(ctx); err != nil {
		return memgate.Corpus{}, err
	}
	terms := queryTerms(text)
	c := memgate.Corpus{Terms: terms, DF: make([]int64, len(terms))}
	err := s.view(func(v *view) error {
		meta := v.tx.Bucket(bucketMeta)
		count, err := s.counter(meta, metaCount)
		if err != nil {
			return err
		}
		total, err := s.counter(meta, metaTotalLen)
		if err != nil {
			return err
		}
		c.Memories, c.Length = int64(count), int64(total)
		if count == 0 {
			return nil
		}
		w := newWalk(ctx)
		var scratch []posting
		for i, term := range terms {
			df, err := v.df(w, s.seal.key(kindWord, term), &scratch)
			if err != nil {
				return err
			}
			c.DF[i] = int64(df)
		}
		return nil
	})
	if err != nil {
		return memgate.Corpus{}, memgate.AsError(op, err)
	}
	return c, nil
}

var errOtherTerms = errors.New("the corpus of the other stores has other terms than the query")

// SearchWith is Search on the scale of a view: it ranks this store's
// memories with others, the corpus of the view's other stores (the sum of
// their Corpus for q.Text), added to its own. Of the memories it ranks
// best, it returns only those whose lexical score is above above: the view
// already holds the limit of hits that score as high, so no other can join
// them, and it need not read them. With an empty others and above 0 it is
// Search.
func (s *Store) SearchWith(ctx context.Context, q memgate.Query, others memgate.Corpus, above float64) (memgate.Result, error) {
	if err := s.fresh(ctx, "storage.Search"); err != nil {
		return memgate.Result{}, err
	}
	if others.Memories != 0 || others.Length != 0 {
		terms := queryTerms(q.Text)
		if _, ok := (memgate.Corpus{Memories: 1, Terms: terms, DF: make([]int64, len(terms))}).Add(others); !ok {
			return memgate.Result{}, memgate.Internal("storage.Search", errOtherTerms)
		}
	}
	return s.search(ctx, q, scale{others: others, above: above, view: true})
}

// scale is how a search of a view ranks: with the other stores' corpus,
// keeping the memories that score above above. The zero scale is a store's
// alone.
type scale struct {
	others memgate.Corpus
	above  float64
	view   bool // a search of a view: lexical, whatever the store's embedder
}

// bm25 is what one ranking scores with: the number of memories and their
// average length, this store's alone or a view's, and the other stores'
// document frequencies by query term (nil: none).
type bm25 struct {
	n      int
	avgLen float64
	df     []int64
}

// newBM25 is what a store of n memories of total length total ranks with,
// with the other stores of sc added.
func newBM25(n int, total uint64, sc scale) bm25 {
	all := n + int(sc.others.Memories)
	return bm25{n: all, avgLen: float64(int64(total)+sc.others.Length) / float64(all), df: sc.others.DF}
}

// idf is the inverse document frequency of the query's term i, which df of
// this store's memories hold.
func (b bm25) idf(i, df int) float64 {
	if i < len(b.df) {
		df += int(b.df[i])
	}
	return search.DefaultBM25.IDF(df, b.n)
}

// keep drops from ranked, best first, the memories that score at or below
// the scale's bound.
func (sc scale) keep(ranked []search.Scored) []search.Scored {
	if sc.above <= 0 {
		return ranked
	}
	for i, r := range ranked {
		if r.Score <= sc.above {
			return ranked[:i]
		}
	}
	return ranked
}

// df is how many memories of v's snapshot hold term, counted as rank counts
// them (a list's count, less its gone documents) from the chunk headers and
// the tail, without decoding a chunk. scratch holds the tail's postings.
func (v *view) df(w *walk, term []byte, scratch *[]posting) (int, error) {
	it := &postingIter{v: v, w: w, term: term}
	n, after := 0, v.tail.base
	c := v.postings.Cursor()
	for k, val := c.Seek(chunkKey(term, 0)); it.match(k); k, val = c.Next() {
		if err := w.step(); err != nil {
			return 0, err
		}
		plain, err := v.seal.open(bucketPostings, k, val)
		if err != nil {
			return 0, err
		}
		cnt, last, _, ok := chunkHeader(it.first(k), plain)
		if !ok {
			return 0, errBadRecord
		}
		n, after = n+cnt, max(after, last)
	}
	// While a merge runs, a term may be on disk and in the tail at once.
	*scratch = v.tail.postings(term, v.seq, after, (*scratch)[:0])
	return n + len(*scratch) - v.goneDF(term), nil
}
