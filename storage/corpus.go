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
		for i, term := range terms {
			it, err := v.iter(w, s.seal.key(kindWord, term), ascending)
			if err != nil {
				return err
			}
			df, _, _, err := it.count(-1)
			if err != nil {
				return err
			}
			c.DF[i] = int64(df - v.goneDF(it.term))
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
// their Corpus for q.Text), added to its own. With an empty others it is
// Search.
func (s *Store) SearchWith(ctx context.Context, q memgate.Query, others memgate.Corpus) (memgate.Result, error) {
	if others.Memories != 0 || others.Length != 0 {
		terms := queryTerms(q.Text)
		if _, ok := (memgate.Corpus{Memories: 1, Terms: terms, DF: make([]int64, len(terms))}).Add(others); !ok {
			return memgate.Result{}, memgate.Internal("storage.Search", errOtherTerms)
		}
	}
	return s.search(ctx, q, others)
}

// scale is what one ranking scores with: the number of memories and their
// average length, this store's alone or a view's, and the other stores'
// document frequencies by query term (nil: none).
type scale struct {
	n      int
	avgLen float64
	df     []int64
}

// newScale is the scale of a store of n memories of total length total,
// with others added.
func newScale(n int, total uint64, others memgate.Corpus) scale {
	all := n + int(others.Memories)
	return scale{n: all, avgLen: float64(int64(total)+others.Length) / float64(all), df: others.DF}
}

// idf is the inverse document frequency of the query's term i, which df of
// this store's memories hold.
func (sc scale) idf(i, df int) float64 {
	if i < len(sc.df) {
		df += int(sc.df[i])
	}
	return search.DefaultBM25.IDF(df, sc.n)
}
