package storage

import (
	"context"
	"math"
	"strings"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/search"
)

// maxQueryTerms bounds the distinct terms of a query that are ranked; the
// rest are ignored, so a huge query costs no more than a long one.
const maxQueryTerms = 64

var postingPool = sync.Pool{New: func() any { s := make([]posting, 0, 256); return &s }}

// Search ranks memories against q: BM25 over title and text for the query's
// words, narrowed by tags and the metadata filter. Without words, the
// memories that pass the narrowing come back newest first, each scored 1.
func (s *Store) Search(ctx context.Context, q memgate.Query) (memgate.Result, error) {
	const op = "storage.Search"
	limit, err := checkLimit("limit", q.Limit, memgate.DefaultSearchLimit, memgate.MaxSearchLimit)
	if err != nil {
		return memgate.Result{}, err
	}
	if q.Budget < 0 || q.Budget > memgate.MaxBudget {
		return memgate.Result{}, memgate.Invalid("budget", "budget must be between 1 and %d tokens", memgate.MaxBudget)
	}
	tags, err := memgate.NormalizeTags("tags", q.Tags)
	if err != nil {
		return memgate.Result{}, err
	}
	mode := q.TagsMode
	switch mode {
	case "":
		mode = memgate.TagsAll
	case memgate.TagsAll, memgate.TagsAny:
	default:
		return memgate.Result{}, memgate.Invalid("tags_mode", "tags_mode must be all or any")
	}
	if _, err := memgate.NormalizeMetadata("filter", q.Filter); err != nil {
		return memgate.Result{}, err
	}
	hasText := strings.TrimSpace(q.Text) != ""
	if !hasText && len(tags) == 0 && len(q.Filter) == 0 {
		return memgate.Result{}, memgate.Invalid("query", "search needs a query, tags or a filter")
	}
	if err := cancelled(ctx); err != nil {
		return memgate.Result{}, err
	}
	terms := queryTerms(q.Text)
	res := memgate.Result{Hits: []memgate.Hit{}, Receipt: memgate.Receipt{RetrievalMode: memgate.RetrievalLexical}}
	err = s.view(func(v *view) error {
		res.Receipt.Candidates = 0
		f, err := s.newFilter(v, tags, mode, q.Filter)
		if err != nil {
			return err
		}
		var ranked []search.Scored
		switch {
		case hasText && len(terms) == 0:
			// Only stop words or punctuation: nothing can match.
		case hasText:
			ranked, res.Receipt.Candidates, err = s.rank(v, terms, f, limit)
		default:
			ranked, err = s.newest(v, f, limit)
			res.Receipt.Candidates = len(ranked)
		}
		if err != nil {
			return err
		}
		res.Hits, err = s.hits(v.tx, ranked, hasText)
		return err
	})
	if err != nil {
		return memgate.Result{}, memgate.AsError(op, err)
	}
	if q.Budget > 0 {
		sizes := make([]int, len(res.Hits))
		for i, h := range res.Hits {
			sizes[i] = len(h.Text)
		}
		if n := search.Cut(sizes, q.Budget); n < len(res.Hits) {
			res.Hits = res.Hits[:n]
			res.Receipt.Truncated = true
		}
	}
	return res, nil
}

// queryTerms analyses a query like a document and keeps its distinct terms.
func queryTerms(text string) []string {
	all := search.Terms(text)
	out := all[:0]
	for _, t := range all {
		if len(out) == maxQueryTerms {
			break
		}
		dup := false
		for _, o := range out {
			if o == t {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, t)
		}
	}
	return out
}

// rank scores every document that holds at least one term and passes f
// (nil: no filter), and returns the best limit of them and how many
// documents the terms matched before the filter. Posting lists are sorted by
// document, so it walks them side by side instead of gathering scores in a
// map.
func (s *Store) rank(v *view, terms []string, f *filter, limit int) ([]search.Scored, int, error) {
	meta := v.tx.Bucket(bucketMeta)
	count, err := s.counter(meta, metaCount)
	if err != nil {
		return nil, 0, err
	}
	total, err := s.counter(meta, metaTotalLen)
	if err != nil {
		return nil, 0, err
	}
	n := int(count)
	if n == 0 {
		return nil, 0, nil
	}
	avgLen := float64(total) / float64(n)
	lists := make([][]posting, 0, len(terms))
	idf := make([]float64, 0, len(terms))
	defer func() {
		for _, l := range lists {
			l = l[:0]
			postingPool.Put(&l)
		}
	}()
	for _, term := range terms {
		buf := postingPool.Get().(*[]posting)
		ps, err := v.list(s.seal.key(kindWord, term), (*buf)[:0])
		if err != nil {
			return nil, 0, err
		}
		if len(ps) == 0 {
			postingPool.Put(buf)
			continue
		}
		lists = append(lists, ps)
		idf = append(idf, search.DefaultBM25.IDF(len(ps), n))
	}
	// With only short filter lists, every check is exact and a bounded heap
	// keeps the best; with a long one, the candidates that pass the short
	// lists are kept and checked against it best first.
	exact := f == nil || f.exact
	top := search.NewTopK(limit)
	var scored []search.Scored
	pos := make([]int, len(lists))
	candidates := 0
	for {
		doc := uint64(math.MaxUint64)
		for i, l := range lists {
			if pos[i] < len(l) && l[pos[i]].doc < doc {
				doc = l[pos[i]].doc
			}
		}
		if doc == math.MaxUint64 {
			break
		}
		var score float64
		for i, l := range lists {
			if pos[i] < len(l) && l[pos[i]].doc == doc {
				p := l[pos[i]]
				score += search.DefaultBM25.Score(idf[i], int(p.tf), int(p.docLen), avgLen)
				pos[i]++
			}
		}
		candidates++
		if f != nil {
			ok, err := f.pass(v, doc, true)
			if err != nil {
				return nil, 0, err
			}
			if !ok {
				continue
			}
		}
		if exact {
			top.Push(doc, score)
		} else {
			scored = append(scored, search.Scored{Doc: doc, Score: score})
		}
	}
	if exact {
		return top.Sorted(), candidates, nil
	}
	best, err := f.best(v, scored, limit)
	return best, candidates, err
}

// hits loads the ranked documents and scores them relative to the best.
func (s *Store) hits(tx *bolt.Tx, ranked []search.Scored, lexical bool) ([]memgate.Hit, error) {
	t := s.txn(tx)
	hits := make([]memgate.Hit, 0, len(ranked))
	best := 0.0
	for _, r := range ranked {
		best = math.Max(best, r.Score)
	}
	for _, r := range ranked {
		rec, err := t.record(r.Doc)
		if err != nil {
			return nil, err
		}
		m, err := rec.memory(r.Doc)
		if err != nil {
			return nil, err
		}
		h := memgate.Hit{Memory: m, Score: 1}
		if lexical {
			h.LexicalScore = r.Score
			if best > 0 {
				h.Score = r.Score / best
			}
		}
		hits = append(hits, h)
	}
	return hits, nil
}
