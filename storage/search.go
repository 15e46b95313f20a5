package storage

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/search"
)

// maxQueryTerms bounds the distinct terms of a query that are ranked, and
// maxQueryBytes the part of it that is analysed to find them; the rest is
// ignored, so a huge query costs no more than a long one, even one that
// repeats a few words 64 KiB long.
const (
	maxQueryTerms = 64
	maxQueryBytes = 16 << 10
)

// Search ranks memories against q: BM25 over title and text for the query's
// words, narrowed by tags and the metadata filter. Without words, the
// memories that pass the narrowing come back newest first, each scored 1.
func (s *Store) Search(ctx context.Context, q memgate.Query) (memgate.Result, error) {
	if err := s.fresh(ctx, "storage.Search"); err != nil {
		return memgate.Result{}, err
	}
	return s.search(ctx, q, scale{})
}

// search is Search on the scale of a view (see SearchWith).
func (s *Store) search(ctx context.Context, q memgate.Query, sc scale) (memgate.Result, error) {
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
	if q.SourceKind != "" {
		if err := memgate.ValidateSourceKind("source_kind", q.SourceKind); err != nil {
			return memgate.Result{}, err
		}
	}
	hasText := strings.TrimSpace(q.Text) != ""
	if !hasText && len(tags) == 0 && len(q.Filter) == 0 && q.SourceKind == "" {
		return memgate.Result{}, memgate.Invalid("query", "search needs a query, tags or a filter")
	}
	if err := cancelled(ctx); err != nil {
		return memgate.Result{}, err
	}
	terms := queryTerms(q.Text)
	res := memgate.Result{Hits: []memgate.Hit{}, Receipt: memgate.Receipt{RetrievalMode: memgate.RetrievalLexical}}
	var hy *hybrid
	switch {
	case !hasText || s.opts.Embedder == nil:
	case sc.view || sc.others.Memories != 0 || sc.others.Length != 0 || sc.above != 0:
		res.Receipt.SemanticFallback = FallbackDisabled
	default:
		hy = s.embedQuery(ctx, q.Text, &res.Receipt)
	}
	err = s.view(func(v *view) error {
		res.Receipt.Candidates = 0
		if hasText && len(terms) == 0 {
			return nil // only stop words or punctuation: nothing can match
		}
		w := newWalk(ctx)
		dir := descending
		if hasText {
			dir = ascending
		}
		order := orderSeveral
		if hasText {
			order = orderAlways
		}
		f, err := s.newFilter(v, w, tags, mode, q.Filter, q.SourceKind, dir, order)
		if err != nil {
			return err
		}
		var ranked []search.Scored
		switch {
		case hy != nil:
			res.Hits, res.Receipt.Candidates, err = s.rankHybrid(v, w, terms, f, limit, hy)
			return err
		case hasText:
			ranked, res.Receipt.Candidates, err = s.rank(v, w, terms, f, limit, sc.others, nil, nil)
			ranked = sc.keep(ranked)
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

// queryTerms analyses a query like a document and keeps its first
// maxQueryTerms distinct terms within its first maxQueryBytes (and the word
// that crosses that mark). It analyses the text a piece at a time (pieces
// end at white space, where no word spans) and stops once it has them, so a
// long query (a 64 KiB topic) costs its first words, not its length.
func queryTerms(text string) []string {
	const piece = 1024
	out := make([]string, 0, 8) // a query's few words, not the most it may have
	var buf []string
	for read := 0; text != "" && len(out) < maxQueryTerms && read < maxQueryBytes; {
		n := len(text)
		if n > piece {
			if i := strings.IndexAny(text[piece:], " \t\r\n"); i >= 0 {
				n = piece + i
			}
		}
		buf = search.AppendTerms(buf[:0], text[:n])
		text, read = text[n:], read+n
		for _, t := range buf {
			if len(out) == maxQueryTerms {
				break
			}
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// rank scores every document that holds at least one term and passes f
// (nil: no filter), and returns the best limit of them and how many
// documents it scored.
//
// The filter's documents are gathered first, as long as there are fewer
// than the terms' postings divided by the number of terms: when the filter
// ends sooner, only its documents are scored, each list seeking to them.
// Otherwise the terms' lists are read whole and scored term by term into an
// array by document, which the gathered documents, then the rest of the
// filter's walk, narrow in document order. Either way the work is about the
// smaller of the narrowing and the words, not the store.
func (s *Store) rank(v *view, w *walk, terms []string, f *filter, limit int, others memgate.Corpus, whole *wholeTerms, cut *lexicalCut) ([]search.Scored, int, error) {
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
	bm := newBM25(n, total, scale{others: others})
	if f == nil {
		if top, candidates, ok, err := s.rankWhole(v, w, terms, limit, n, bm, whole, cut); ok || err != nil {
			return top, candidates, err
		}
	}
	lists := make([]*postingIter, 0, len(terms))
	dfs := make([]int, 0, len(terms))
	termIndex := make([]int, 0, len(terms)) // of each list, its term's index in terms
	cost := 0
	for ti, term := range terms {
		it, err := v.iter(w, s.seal.key(kindWord, term), ascending)
		if err != nil {
			return nil, 0, err
		}
		df, _, _, err := it.count(-1)
		if err != nil {
			return nil, 0, err
		}
		df -= v.goneDF(it.term)
		if df == 0 {
			continue
		}
		lists = append(lists, it)
		dfs = append(dfs, df)
		termIndex = append(termIndex, ti)
		cost += df
	}
	if len(lists) == 0 {
		return nil, 0, nil
	}
	r := ranking{v: v, lists: lists, idf: make([]float64, len(lists)), avgLen: bm.avgLen, f: f, top: search.NewTopK(limit), limit: limit,
		probe: func() (*filter, error) { return f.fresh(v, w) }}
	if cut != nil {
		cut.idf, cut.avgLen = make([]float64, len(terms)), bm.avgLen
	}
	for i, df := range dfs {
		r.idf[i] = bm.idf(termIndex[i], df)
		if cut != nil {
			cut.idf[termIndex[i]] = r.idf[i]
		}
	}
	if f != nil {
		ended, err := r.gather(max(limit, cost/len(lists)), v.seq)
		if err != nil {
			return nil, 0, err
		}
		if ended {
			err := r.byDocument(r.gathered)
			return r.top.Sorted(), r.candidates, err
		}
	}
	ok, err := r.byTerm(v, n)
	if err == nil && !ok {
		err = r.byDocument(nil)
	}
	return r.top.Sorted(), r.candidates, err
}

// ranking is one search's scoring state.
type ranking struct {
	v          *view
	lists      []*postingIter
	idf        []float64
	avgLen     float64
	f          *filter
	probe      func() (*filter, error) // a fresh filter, to probe
	gathered   []uint64                // the filter's first documents, in order
	ended      bool                    // gathered holds all of them
	top        *search.TopK
	limit      int
	candidates int
}

func (r *ranking) score(i int, p posting) float64 {
	return search.DefaultBM25.Score(r.idf[i], int(p.tf), int(p.docLen), r.avgLen)
}

// gather walks the filter for up to max documents; it reports whether the
// filter ended first.
func (r *ranking) gather(max int, seq uint64) (bool, error) {
	for target := uint64(0); ; {
		doc, err := r.f.next(target)
		if err != nil {
			return false, err
		}
		if doc == ascending.end() {
			r.ended = true
			return true, nil
		}
		if len(r.gathered) == max || dense(len(r.gathered), doc, seq, max) {
			return false, nil
		}
		r.gathered = append(r.gathered, doc)
		target = doc + 1
	}
}

// dense reports, from the first n documents of a walk in document order
// (the last of them doc, of documents up to seq), whether the walk will
// clearly yield more than max: at the rate so far it would yield four times
// as many. A narrowing most memories pass is then not gathered at all.
func dense(n int, doc, seq uint64, max int) bool {
	return n >= 64 && n%64 == 0 && doc > 0 && float64(n)*float64(seq)/float64(doc) > 4*float64(max)
}

// byDocument scores the documents of docs (nil: every document of the
// terms, narrowed by the filter), seeking every list to each.
func (r *ranking) byDocument(docs []uint64) error {
	words := newGroup(ascending, r.lists)
	for i, target := 0, uint64(0); ; i++ {
		var doc uint64
		if docs != nil {
			if i == len(docs) {
				return nil
			}
			doc = docs[i]
			if err := words.seekAll(doc); err != nil {
				return err
			}
			if words.cur != doc {
				continue
			}
		} else {
			if err := words.seekAll(target); err != nil {
				return err
			}
			if doc = words.cur; doc == ascending.end() {
				return nil
			}
			target = doc + 1
			if r.f != nil {
				next, err := r.f.next(doc)
				if err != nil {
					return err
				}
				if next != doc {
					if next == ascending.end() {
						return nil
					}
					target = next
					continue
				}
			}
		}
		if r.v.dead(doc) {
			continue
		}
		var sum float64
		for j, l := range r.lists {
			if l.cur == doc {
				sum += r.score(j, l.posting())
			}
		}
		r.candidates++
		r.top.Push(doc, sum)
	}
}

// maxScoreArray bounds the array of scores by document (8 bytes each), so
// that no counter, however large, makes a search allocate more than 32 MiB.
const maxScoreArray = 1 << 22

var (
	scorePool   = sync.Pool{New: func() any { return new(scores) }}
	postingPool = sync.Pool{New: func() any { return new([]posting) }}
)

// scores is an array of scores by document, zero wherever it is not in
// use, and the documents of it that a search touched: a search that touches
// few documents reads and zeroes those, not the whole array.
type scores struct {
	acc     []float64
	touched []uint32
}

// get returns the array for documents 0 to hi, all zero.
func (sc *scores) get(hi uint64) []float64 {
	if cap(sc.acc) < int(hi)+1 {
		sc.acc = make([]float64, hi+1)
	}
	sc.touched = sc.touched[:0]
	return sc.acc[:hi+1]
}

// put zeroes what the search wrote into acc (all of it when it touched
// too many documents to list) and gives the array back.
func (sc *scores) put(acc []float64, listed bool) {
	if listed {
		for _, d := range sc.touched {
			acc[d] = 0
		}
	} else {
		clear(acc)
	}
	scorePool.Put(sc)
}

// rankWhole is rank without a narrowing: each term's list is read whole,
// once (its length is its document frequency), and the lists are scored
// per document, in query order. While the lists are few (maxMerged) and
// short (together at most an eighth of the store's document numbers), they
// are merged in document order and each document's score summed as it
// comes: the work reads the lists and nothing else, so a search whose
// lists fit in the cache stays there, even in a process whose caches other
// work has just cooled. Past that, they are scored into an array by
// document, which pays for itself once the lists are long. The documents
// scored in the array are listed while they are few (an eighth of the
// array), so that a search of rarer words reads and zeroes those instead of
// the whole array. Either way a document's score is the same sum, in the
// same order, as byDocument's. It declines (false) when the store's
// document numbers are too sparse for an array.
//
// A hybrid search gives the cut it makes of the ranking (lexicalCut), and
// the merge does not score a document the cut would drop: one whose
// postings could not reach the cut's share of the best so far, nor the
// first keep so far. What the cut keeps is the same.
func (s *Store) rankWhole(v *view, w *walk, terms []string, limit, n int, bm bm25, whole *wholeTerms, cut *lexicalCut) ([]search.Scored, int, bool, error) {
	hi := v.seq
	if hi >= uint64(8*n+65536) || hi >= maxScoreArray {
		return nil, 0, false, nil
	}
	top := search.NewTopK(limit)
	candidates := 0
	best := 0.0            // the best score pushed
	var first *search.TopK // with a cut, the best cut.keep so far
	if cut != nil {
		first = search.NewTopK(cut.keep)
	}
	push := func(doc uint64, x float64) {
		if x != 0 && !v.expired1(doc) {
			candidates++
			top.Push(doc, x)
			best = max(best, x)
			if first != nil {
				first.Push(doc, x)
			}
		}
	}
	var every wholeTerms // of the merge: the first document holding every term
	maxListed := int(hi+1) / 8
	pbuf := postingPool.Get().(*[]posting)
	var arr *scoreArray // nil while the lists are merged
	lent := false       // the lists or the array outlive the ranking, for cut.scoreOf
	defer func() {
		if !lent {
			postingPool.Put(pbuf)
			if arr != nil {
				arr.put()
			}
		}
	}()
	if cut != nil {
		cut.idf, cut.avgLen = make([]float64, len(terms)), bm.avgLen
	}
	ps := (*pbuf)[:0]
	var lists [maxMerged]mergeList // the lists held in ps, to merge
	merged := 0
	for ti, term := range terms {
		if err := stopped(w.ctx); err != nil {
			return nil, 0, false, err
		}
		start := len(ps)
		var err error
		ps, err = v.list(s.seal.key(kindWord, term), ps)
		*pbuf = ps
		if err != nil {
			return nil, 0, false, err
		}
		if len(ps) == start {
			continue
		}
		for _, p := range ps[start:] {
			if p.doc > hi {
				return nil, 0, false, errBadRecord // a posting past the snapshot: a damaged list
			}
		}
		l := mergeList{start: start, at: start, end: len(ps), idf: bm.idf(ti, len(ps)-start)}
		if cut != nil {
			cut.idf[ti] = l.idf
		}
		if arr == nil && merged < maxMerged && len(ps) <= maxListed {
			lists[merged] = l
			merged++
			continue
		}
		if arr == nil {
			arr = newScoreArray(hi, maxListed)
			for _, m := range lists[:merged] {
				arr.add(ps[m.at:m.end], m.idf, bm.avgLen)
			}
		}
		arr.add(ps[start:], l.idf, bm.avgLen)
		ps = ps[:0]
	}
	if arr != nil {
		arr.push(push)
		if cut != nil {
			cut.first = first.Sorted()
			lent = true
			cut.scoreOf = arr.score
			cut.release = func() { postingPool.Put(pbuf); arr.put() }
		}
		return top.Sorted(), candidates, true, nil // whole stays unknown
	}
	heads := lists[:merged]
	// A posting scores less than idf·(k1+1), however large its tf and
	// however short its document, while 0 ≤ b ≤ 1 and k1 ≥ 0; and more
	// than 0 when its tf does (the idf is always positive).
	bm25p := search.DefaultBM25
	canSkip := bm25p.K1 >= 0 && bm25p.B >= 0 && bm25p.B <= 1
	for {
		doc := uint64(math.MaxUint64)
		for _, l := range heads {
			if l.at < l.end {
				doc = min(doc, ps[l.at].doc)
			}
		}
		if doc == math.MaxUint64 {
			break
		}
		floor, full := top.Min()
		if !full {
			floor = 0
		}
		cutFloor := 0.0
		if cut != nil {
			if kept, full := first.Min(); full {
				cutFloor = min(cut.share*best, kept)
			}
		}
		if max(floor, cutFloor) > 0 && canSkip {
			// A document whose postings could not score above the worst of
			// a full top, or that the cut would drop, is counted, not
			// scored: most documents of a query's commoner words hold that
			// word alone.
			// (A document holding every term is never below the share:
			// its bound is at least any document's score.)
			bound := 0.0
			for _, l := range heads {
				for at := l.at; at < l.end && ps[at].doc == doc; at++ {
					bound += l.idf * (bm25p.K1 + 1)
				}
			}
			if bound *= 1 + 1e-9; bound < max(floor, cutFloor) {
				scored := false
				for i := range heads {
					l := &heads[i]
					for ; l.at < l.end && ps[l.at].doc == doc; l.at++ {
						scored = scored || ps[l.at].tf > 0
					}
				}
				if scored && !v.expired1(doc) {
					candidates++
				}
				continue
			}
		}
		var x float64
		held := 0 // of the terms, how many doc holds
		for i := range heads {
			l := &heads[i]
			in := false
			for ; l.at < l.end && ps[l.at].doc == doc; l.at++ {
				p := ps[l.at]
				x += search.DefaultBM25.Score(l.idf, int(p.tf), int(p.docLen), bm.avgLen)
				in = in || p.tf > 0
			}
			if in {
				held++
			}
		}
		if held == len(terms) && x != 0 && !v.expired1(doc) {
			every.offer(doc, x)
			if whole != nil && len(terms) > 1 {
				every.docs = append(every.docs, doc) // in document order
			}
		}
		if cut != nil && x < cut.share*max(best, x) && held < len(terms) {
			// Below the cut: a candidate for the first keep alone.
			if x != 0 && !v.expired1(doc) {
				candidates++
				first.Push(doc, x)
			}
			continue
		}
		push(doc, x)
	}
	ranked := top.Sorted()
	if whole != nil {
		every.known = true
		every.one = len(terms) == 1 && len(heads) == 1
		*whole = every
	}
	if cut != nil {
		cut.first = first.Sorted()
		// The score of any document, from the lists, summed as the merge
		// sums it.
		lent = true
		cut.release = func() { postingPool.Put(pbuf) }
		cut.scoreOf = func(doc uint64) float64 {
			x := 0.0
			for _, l := range heads {
				list := ps[l.start:l.end]
				i, _ := slices.BinarySearchFunc(list, doc, func(p posting, doc uint64) int { return cmp.Compare(p.doc, doc) })
				for ; i < len(list) && list[i].doc == doc; i++ {
					x += search.DefaultBM25.Score(l.idf, int(list[i].tf), int(list[i].docLen), bm.avgLen)
				}
			}
			return x
		}
	}
	return ranked, candidates, true, nil
}

// wholeTerms is what a ranking saw of the documents holding every one of
// its terms: the first of them in its order, if it scored any, and which
// of the documents it ranked hold them all. A ranking that cannot tell
// leaves known false.
type wholeTerms struct {
	first search.Scored
	found bool
	known bool
	docs  []uint64 // of the scored documents, those holding every term, in order (with one term, none: see one)
	one   bool     // the ranking had one term, which every scored document holds
}

// holds reports whether the scored document doc holds every term.
func (wt *wholeTerms) holds(doc uint64) bool {
	_, ok := slices.BinarySearch(wt.docs, doc)
	return ok || wt.one
}

// A lexicalCut is what a hybrid search keeps of its lexical ranking — for
// the fusion, the documents scoring at least share of the best and those
// holding every term, which the ranking returns; to fill its answer
// (search.Fill), the first keep, which it gives in first (nil when it
// ranked every document). The others would take a fused place from a
// document holding every term (a memory holding one word of three, ranked
// modestly by both, would pass the memory that holds all three), so the
// merge need not score them. A hit the fusion brings from the vectors that
// the ranking did not return is scored by scoreOf, from the lists or the
// array the ranking read, until release; where the ranking gives none (a
// filter's), from its record (score), with the terms' idf and the average
// length the ranking used.
type lexicalCut struct {
	share   float64
	keep    int
	first   []search.Scored
	idf     []float64 // by term; 0 for a term no memory holds
	avgLen  float64
	scoreOf func(doc uint64) float64
	release func()
}

// holdsAny reports whether doc, which the ranking did not return, holds
// one of terms: never, when it returned every document it scored
// (rankedAll); otherwise by its score. A document gone from the snapshot
// counts as holding one (it is no candidate).
func (c *lexicalCut) holdsAny(t *txn, doc uint64, terms []string, rankedAll bool) (bool, error) {
	switch {
	case len(terms) == 0 || rankedAll:
		return false, nil
	case c.scoreOf != nil:
		return c.scoreOf(doc) > 0, nil
	}
	v := t.docs.Get(u64(doc))
	if v == nil {
		return true, nil
	}
	r, err := t.s.decodeRecord(u64(doc), v)
	if err != nil {
		return false, err
	}
	return c.score(&r, terms) > 0, nil
}

// score is the BM25 score the ranking would have given the record r for
// terms, summed in the ranking's order.
func (c *lexicalCut) score(r *record, terms []string) float64 {
	if c.idf == nil {
		return 0
	}
	tf := make([]int, len(terms))
	length := search.CountTerms(r.indexText(), terms, tf)
	x := 0.0
	for i := range terms {
		if tf[i] > 0 && c.idf[i] > 0 {
			x += search.DefaultBM25.Score(c.idf[i], tf[i], length, c.avgLen)
		}
	}
	return x
}

func (wt *wholeTerms) offer(doc uint64, x float64) {
	if !wt.found || x > wt.first.Score || x == wt.first.Score && doc > wt.first.Doc {
		wt.first, wt.found = search.Scored{Doc: doc, Score: x}, true
	}
}

// among reports whether a document holding every term is in top. Whether
// any is comes down to the first of them: a top of the ranking's order
// that holds one holds the first.
func (wt *wholeTerms) among(top []search.Scored) bool {
	return wt.found && slices.ContainsFunc(top, func(s search.Scored) bool { return s.Doc == wt.first.Doc })
}

// maxMerged is the most lists rankWhole merges; a query of more terms
// scores into the array, where a posting costs the same whatever the
// number of lists.
const maxMerged = 8

// mergeList is one term's list within rankWhole's buffer: from at (the
// next posting to merge) to end, and its term's idf.
type mergeList struct {
	start, at, end int // the list is ps[start:end]; the merge is at at
	idf            float64
}

// scoreArray is rankWhole's array of scores by document: the pooled
// scores, and whether the documents it holds are still listed.
type scoreArray struct {
	sc        *scores
	acc       []float64
	listed    bool
	maxListed int
}

func newScoreArray(hi uint64, maxListed int) *scoreArray {
	sc := scorePool.Get().(*scores)
	return &scoreArray{sc: sc, acc: sc.get(hi), listed: true, maxListed: maxListed}
}

// add scores the postings of one term into the array.
func (a *scoreArray) add(ps []posting, idf, avgLen float64) {
	acc := a.acc
	for _, p := range ps {
		if a.listed && acc[p.doc] == 0 {
			if a.listed = len(a.sc.touched) < a.maxListed; a.listed {
				a.sc.touched = append(a.sc.touched, uint32(p.doc))
			}
		}
		acc[p.doc] += search.DefaultBM25.Score(idf, int(p.tf), int(p.docLen), avgLen)
	}
}

// push hands every document scored to push, once. Of equal scores TopK
// keeps the newer document whatever the order of pushes, so the listed
// documents give what a walk of the array would. A listed document's score
// turns negative once pushed, so that one listed twice (a score of 0 added
// first) counts once; score reads it all the same.
func (a *scoreArray) push(push func(doc uint64, x float64)) {
	if a.listed {
		for _, d := range a.sc.touched {
			if x := a.acc[d]; x > 0 {
				push(uint64(d), x)
				a.acc[d] = -x
			}
		}
		return
	}
	for doc, x := range a.acc {
		push(uint64(doc), x)
	}
}

// score is a document's score, once pushed.
func (a *scoreArray) score(doc uint64) float64 {
	if doc >= uint64(len(a.acc)) {
		return 0
	}
	return math.Abs(a.acc[doc])
}

// put zeroes the array and gives it back.
func (a *scoreArray) put() { a.sc.put(a.acc, a.listed) }

// byTerm reads the terms' lists whole, in query order, adding each
// posting's score to an array indexed by document (the same sums, in the
// same order, as byDocument), then walks the array in document order,
// narrowed by the gathered documents and the rest of the filter. It
// declines (false) when the store's document numbers are too sparse for an
// array.
func (r *ranking) byTerm(v *view, n int) (bool, error) {
	lo := uint64(math.MaxUint64)
	for _, l := range r.lists {
		lo = min(lo, l.cur)
	}
	hi := v.seq
	if hi < lo || hi-lo >= uint64(8*n+65536) || hi-lo >= maxScoreArray {
		return false, nil
	}
	sc := scorePool.Get().(*scores)
	acc := sc.get(hi - lo)
	defer sc.put(acc, false)
	for i, l := range r.lists {
		for l.cur != ascending.end() {
			ps := l.tail
			if l.onDisk {
				ps = l.chunk
			}
			for _, p := range ps[l.i:] {
				if p.doc < lo || p.doc > hi {
					return false, errBadRecord // a posting past the snapshot: a damaged list
				}
				acc[p.doc-lo] += r.score(i, p)
			}
			l.i = len(ps) - 1
			if err := l.seek(ps[l.i].doc + 1); err != nil {
				return false, err
			}
		}
	}
	v.clearDead(acc, lo)
	if r.f != nil {
		// A narrowing most documents pass: the best few candidates, probed
		// best first, give the answer without walking the filter over every
		// candidate; when too few of them pass, the walk below does.
		for _, x := range acc {
			if x != 0 {
				r.candidates++
			}
		}
		done, err := r.probeBest(acc, lo)
		if err != nil || done {
			return true, err
		}
	}
	g := 0 // the next gathered document
	for j := 0; j < len(acc); j++ {
		if acc[j] == 0 {
			continue
		}
		doc := lo + uint64(j)
		if r.f != nil {
			for g < len(r.gathered) && r.gathered[g] < doc {
				g++
			}
			switch {
			case g < len(r.gathered) && r.gathered[g] == doc:
			case g < len(r.gathered):
				j = int(r.gathered[g]-lo) - 1
				continue
			default:
				next, err := r.f.next(doc)
				if err != nil {
					return false, err
				}
				if next == ascending.end() {
					return true, nil
				}
				if next != doc {
					j = int(next-lo) - 1
					continue
				}
			}
		}
		if r.f == nil {
			r.candidates++
		}
		r.top.Push(doc, acc[j])
	}
	return true, nil
}

// probeBest checks the best few times limit of the scored documents against
// the narrowing, best first, and keeps them if limit of them pass (or all
// the scored do): true when that answered the search.
func (r *ranking) probeBest(acc []float64, lo uint64) (bool, error) {
	limit, n := r.limit, 4*r.limit+16
	few := search.NewTopK(n)
	for j, x := range acc {
		if x != 0 {
			few.Push(lo+uint64(j), x)
		}
	}
	best := few.Sorted()
	probe, err := r.probe()
	if err != nil {
		return false, err
	}
	var kept []search.Scored
	for _, sc := range best {
		ok, err := probe.has(sc.Doc)
		if err != nil {
			return false, err
		}
		if ok {
			if kept = append(kept, sc); len(kept) == limit {
				break
			}
		}
	}
	if len(kept) < limit && len(best) == n {
		return false, nil // too few passed: walk
	}
	for _, sc := range kept {
		r.top.Push(sc.Doc, sc.Score)
	}
	return true, nil
}

// newest returns up to limit documents that pass f, newest first, each
// scored 1.
func (s *Store) newest(v *view, f *filter, limit int) ([]search.Scored, error) {
	var out []search.Scored
	for target := v.seq; len(out) < limit; {
		doc, err := f.next(target)
		if err != nil {
			return nil, err
		}
		if doc == descending.end() {
			break
		}
		out = append(out, search.Scored{Doc: doc, Score: 1})
		target = doc - 1
	}
	return out, nil
}

// hits loads the ranked documents and scores them relative to the best.
func (s *Store) hits(tx *bolt.Tx, ranked []search.Scored, lexical bool) ([]memgate.Hit, error) {
	// The docs bucket alone: a read transaction opens a bucket with a seek
	// from the root each time, and a search's hits need no other.
	t := &txn{s: s, tx: tx, docs: tx.Bucket(bucketDocs)}
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
