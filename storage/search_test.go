package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/search"
)

func ids(hits []memgate.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

func TestSearchRanksAndNormalises(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	put(t, s, memgate.Write{ID: "deploy", Title: "Deploying", Text: "We deploy the service with Helm charts on Kubernetes."})
	put(t, s, memgate.Write{ID: "db", Text: "The database migrations run before the service starts."})
	put(t, s, memgate.Write{ID: "style", Text: "Prefer table tests with names that read as sentences."})
	res, err := s.Search(ctx, memgate.Query{Text: "deploying with helm"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) == 0 || res.Hits[0].ID != "deploy" {
		t.Fatalf("hits = %v, want deploy first", ids(res.Hits))
	}
	if res.Hits[0].Score != 1 || res.Hits[0].LexicalScore <= 0 {
		t.Fatalf("top hit score %v lexical %v, want 1 and > 0", res.Hits[0].Score, res.Hits[0].LexicalScore)
	}
	for _, h := range res.Hits[1:] {
		if h.Score <= 0 || h.Score > 1 {
			t.Fatalf("score %v outside (0, 1]", h.Score)
		}
	}
	if res.Receipt.RetrievalMode != memgate.RetrievalLexical {
		t.Fatalf("receipt = %+v", res.Receipt)
	}
	res, _ = s.Search(ctx, memgate.Query{Text: "the migrations"})
	if strings.Join(ids(res.Hits), ",") != "db" {
		t.Fatalf("stemmed search = %v, want [db]", ids(res.Hits))
	}
	res, _ = s.Search(ctx, memgate.Query{Text: "zzyzx"})
	if len(res.Hits) != 0 {
		t.Fatalf("no-hit query found %v", ids(res.Hits))
	}
}

func TestSearchNarrowsByTagsAndFilter(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	put(t, s, memgate.Write{ID: "a", Text: "alpha note", Tags: []string{"x", "y"}, Metadata: map[string]any{"lang": "go", "n": 1}})
	put(t, s, memgate.Write{ID: "b", Text: "alpha note", Tags: []string{"x"}, Metadata: map[string]any{"lang": "rust", "n": 2}})
	put(t, s, memgate.Write{ID: "c", Text: "alpha note", Tags: []string{"z"}, Metadata: map[string]any{"lang": "go", "n": true}})
	cases := []struct {
		name string
		q    memgate.Query
		want string
	}{
		{"all tags must be present by default", memgate.Query{Text: "alpha", Tags: []string{"x", "y"}}, "a"},
		{"any tag is enough in any mode", memgate.Query{Text: "alpha", Tags: []string{"y", "z"}, TagsMode: "any"}, "c,a"},
		{"tags alone list newest first", memgate.Query{Tags: []string{"x"}}, "b,a"},
		{"a filter matches metadata exactly", memgate.Query{Filter: map[string]any{"lang": "go"}}, "c,a"},
		{"filter numbers compare as numbers", memgate.Query{Filter: map[string]any{"n": 1.0}}, "a"},
		{"filter does not confuse types", memgate.Query{Filter: map[string]any{"n": "1"}}, ""},
		{"filter and tags combine", memgate.Query{Text: "note", Tags: []string{"x"}, Filter: map[string]any{"lang": "rust"}}, "b"},
		{"an unknown tag matches nothing", memgate.Query{Tags: []string{"nope"}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.Search(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			got := ids(res.Hits)
			if tc.q.Text != "" {
				// Equal BM25 scores: compare as sets.
				got = sortedCopy(got)
				tc.want = strings.Join(sortedCopy(strings.Split(tc.want, ",")), ",")
			}
			if strings.Join(got, ",") != tc.want {
				t.Fatalf("hits = %v, want %s", got, tc.want)
			}
		})
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestSearchArguments(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	for i := range 120 {
		put(t, s, memgate.Write{Text: fmt.Sprintf("common word number %d %s", i, strings.Repeat("pad ", i))})
	}
	cases := []struct {
		name  string
		q     memgate.Query
		hits  int
		code  memgate.Code
		field string
	}{
		{"limit defaults to 10", memgate.Query{Text: "common"}, 10, "", ""},
		{"limit 100 passes", memgate.Query{Text: "common", Limit: 100}, 100, "", ""},
		{"limit 101 is refused", memgate.Query{Text: "common", Limit: 101}, 0, memgate.CodeInvalidArgument, "limit"},
		{"negative limit is refused", memgate.Query{Text: "common", Limit: -1}, 0, memgate.CodeInvalidArgument, "limit"},
		{"budget 100000 passes", memgate.Query{Text: "common", Budget: 100000}, 10, "", ""},
		{"budget 100001 is refused", memgate.Query{Text: "common", Budget: 100001}, 0, memgate.CodeInvalidArgument, "budget"},
		{"a query, tags or filter is needed", memgate.Query{Text: "  "}, 0, memgate.CodeInvalidArgument, "query"},
		{"tags_mode must be all or any", memgate.Query{Tags: []string{"a"}, TagsMode: "some"}, 0, memgate.CodeInvalidArgument, "tags_mode"},
		{"a bad tag is refused", memgate.Query{Tags: []string{"a b"}}, 0, memgate.CodeInvalidArgument, "tags"},
		{"a nested filter is refused", memgate.Query{Filter: map[string]any{"a": []any{}}}, 0, memgate.CodeInvalidArgument, "filter"},
		{"stop words alone find nothing", memgate.Query{Text: "the and of"}, 0, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.Search(ctx, tc.q)
			if tc.code != "" {
				wantCode(t, err, tc.code, tc.field)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Hits) != tc.hits {
				t.Fatalf("%d hits, want %d", len(res.Hits), tc.hits)
			}
		})
	}
}

func TestSearchBudget(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	for i := range 5 {
		put(t, s, memgate.Write{ID: fmt.Sprint(i), Text: "budget " + strings.Repeat("x", 38)}) // 45 bytes: 12 tokens
	}
	cases := []struct{ budget, hits int }{{11, 0}, {12, 1}, {23, 1}, {24, 2}, {60, 5}}
	for _, tc := range cases {
		res, err := s.Search(ctx, memgate.Query{Text: "budget", Budget: tc.budget})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Hits) != tc.hits {
			t.Errorf("budget %d: %d hits, want %d", tc.budget, len(res.Hits), tc.hits)
		}
		if res.Receipt.Truncated != (tc.hits < 5) {
			t.Errorf("budget %d: truncated = %v", tc.budget, res.Receipt.Truncated)
		}
	}
}

// After every random put, replace and forget, a memory's unique word finds it
// if and only if Get finds it, and nothing else.
func TestIndexMatchesStore(t *testing.T) {
	for _, every := range []int{1, 7, 2048} {
		t.Run(fmt.Sprint("merge every ", every), func(t *testing.T) {
			indexMatchesStore(t, openTest(t, func(o *Options) { o.MergeEvery = every }))
		})
	}
}

func indexMatchesStore(t *testing.T, s *Store) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	const keys = 40
	word := func(k, gen int) string { return fmt.Sprintf("uniq%cx%cq%c", 'a'+k%26, 'a'+k/26, 'a'+gen%26) }
	gen := make([]int, keys)
	live := make([]bool, keys)
	filler := []string{"apple", "river", "stone", "cloud", "ember", "frost"}
	for step := range 600 {
		k := rng.IntN(keys)
		id := fmt.Sprint("m", k)
		switch rng.IntN(3) {
		case 0, 1:
			gen[k]++
			text := word(k, gen[k]) + " " + filler[rng.IntN(len(filler))] + " " + filler[rng.IntN(len(filler))]
			put(t, s, memgate.Write{ID: id, Text: text, Tags: []string{filler[rng.IntN(len(filler))]}})
			live[k] = true
		case 2:
			err := s.Delete(ctx, id, nil)
			if live[k] != (err == nil) {
				t.Fatalf("step %d: forget %s: %v (live %v)", step, id, err, live[k])
			}
			live[k] = false
		}
		for j := range keys {
			_, gerr := s.Get(ctx, fmt.Sprint("m", j))
			res, err := s.Search(ctx, memgate.Query{Text: word(j, gen[j]), Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			found := len(res.Hits) == 1 && res.Hits[0].ID == fmt.Sprint("m", j)
			if (gerr == nil) != found || len(res.Hits) > 1 {
				t.Fatalf("step %d: memory m%d: get err %v, search hits %v", step, j, gerr, ids(res.Hits))
			}
			if gen[j] > 1 {
				res, _ := s.Search(ctx, memgate.Query{Text: word(j, gen[j]-1)})
				if len(res.Hits) != 0 {
					t.Fatalf("step %d: replaced text of m%d still found", step, j)
				}
			}
		}
	}
	st, _ := s.Stats(ctx)
	n := 0
	for _, l := range live {
		if l {
			n++
		}
	}
	if st.Count != int64(n) {
		t.Fatalf("count = %d, want %d", st.Count, n)
	}
}

// Posting chunks split at chunkSize; removing from the middle, the start and
// the end of a long list keeps every other document findable.
func TestLongPostingLists(t *testing.T) {
	s := openTest(t, func(o *Options) { o.MergeEvery = 50 })
	ctx := context.Background()
	const n = chunkSize*3 + 7
	for i := range n {
		put(t, s, memgate.Write{ID: fmt.Sprint(i), Text: fmt.Sprintf("shared token%d", i)})
	}
	for _, i := range []int{0, 1, chunkSize - 1, chunkSize, chunkSize + 1, 2 * chunkSize, n - 1} {
		if err := s.Delete(ctx, fmt.Sprint(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Search(ctx, memgate.Query{Text: "shared", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if res.Receipt.Candidates != n-7 {
		t.Fatalf("candidates = %d, want %d", res.Receipt.Candidates, n-7)
	}
}

// A write is visible to the next search the moment Put returns, a forget
// the moment Delete returns, while other writers and index merges run.
func TestSearchSeesEveryAcknowledgedWrite(t *testing.T) {
	s := openTest(t, func(o *Options) { o.MergeEvery = 16 })
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 60 {
				id := fmt.Sprintf("w%d-%d", w, i)
				word := fmt.Sprintf("zq%cx%cv%c", 'a'+w, 'a'+i%26, 'a'+i/26)
				put(t, s, memgate.Write{ID: id, Text: word + " shared filler"})
				res, err := s.Search(ctx, memgate.Query{Text: word})
				if err != nil || len(res.Hits) != 1 || res.Hits[0].ID != id {
					t.Errorf("search right after put of %s: %v %v", id, ids(res.Hits), err)
					return
				}
				if i%3 == 0 {
					if err := s.Delete(ctx, id, nil); err != nil {
						t.Error(err)
						return
					}
					if res, _ := s.Search(ctx, memgate.Query{Text: word}); len(res.Hits) != 0 {
						t.Errorf("search right after forget of %s still finds it", id)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	res, err := s.Search(ctx, memgate.Query{Text: "shared", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if want := 8 * 40; res.Receipt.Candidates != want {
		t.Fatalf("candidates = %d, want %d", res.Receipt.Candidates, want)
	}
}

// The tail of the index is rebuilt at open from the newest records.
func TestTailSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(path, Options{NoSync: true, MergeEvery: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 25 { // two merges, five documents left in the tail
		put(t, s, memgate.Write{ID: fmt.Sprint(i), Text: "reopen " + letterWord(i)})
	}
	if err := s.Delete(ctx, "24", nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path, Options{NoSync: true, MergeEvery: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		s.Close()
		checkFile(t, path)
	}()
	res, _ := s.Search(ctx, memgate.Query{Text: "reopen", Limit: 100})
	if res.Receipt.Candidates != 24 {
		t.Fatalf("after reopen %d candidates, want 24", res.Receipt.Candidates)
	}
	for _, i := range []int{3, 21, 23} {
		if res, _ := s.Search(ctx, memgate.Query{Text: letterWord(i)}); len(res.Hits) != 1 {
			t.Fatalf("memory %d not found after reopen", i)
		}
	}
	if res, _ := s.Search(ctx, memgate.Query{Text: letterWord(24)}); len(res.Hits) != 0 {
		t.Fatal("forgotten memory found after reopen")
	}
}

// letterWord is a made-up word unique to i, made of letters only so the
// analyser keeps it whole.
func letterWord(i int) string {
	return fmt.Sprintf("zx%cq%cv", 'a'+i%26, 'a'+i/26)
}

// A merge cut short leaves the index readable and exact; writes wait for a
// merge that succeeds, and a reopen finishes it.
func TestMergeCutShort(t *testing.T) {
	oldSlice := mergeSlice
	mergeSlice = 3
	t.Cleanup(func() { mergeSlice, mergeFault = oldSlice, nil })
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(path, Options{NoSync: true, MergeEvery: 20})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 19 {
		put(t, s, memgate.Write{ID: fmt.Sprint(i), Text: "partial " + letterWord(i)})
	}
	mergeFault = func(n int) error {
		if n == 2 {
			return errors.New("disk full")
		}
		return nil
	}
	// The 20th write fills the tail; its merge fails after two slices.
	put(t, s, memgate.Write{ID: "19", Text: "partial " + letterWord(19)})
	check := func(want int) {
		t.Helper()
		res, err := s.Search(ctx, memgate.Query{Text: "partial", Limit: 100})
		if err != nil || res.Receipt.Candidates != want {
			t.Fatalf("candidates %d (%v), want %d", res.Receipt.Candidates, err, want)
		}
		for i := range want {
			if res, _ := s.Search(ctx, memgate.Query{Text: letterWord(i)}); len(res.Hits) != 1 {
				t.Fatalf("memory %d: %d hits", i, len(res.Hits))
			}
		}
	}
	check(20)
	_, _, err = s.Put(ctx, memgate.Write{ID: "refused", Text: "x"})
	wantCode(t, err, memgate.CodeUnavailable, "")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	mergeFault = nil
	if s, err = Open(path, Options{NoSync: true, MergeEvery: 20}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		s.Close()
		checkFile(t, path)
	}()
	check(20)
	if err := s.Delete(ctx, "3", nil); err != nil {
		t.Fatal(err)
	}
	put(t, s, memgate.Write{ID: "20", Text: "partial more"})
	res, _ := s.Search(ctx, memgate.Query{Text: "partial", Limit: 100})
	if res.Receipt.Candidates != 20 {
		t.Fatalf("after finishing the merge: %d candidates, want 20", res.Receipt.Candidates)
	}
	if res, _ := s.Search(ctx, memgate.Query{Text: letterWord(3)}); len(res.Hits) != 0 {
		t.Fatal("a forgotten memory is still found")
	}
}

// Narrowing by tags and filter gives the same answers whether the
// documents are merged or still in the tail.
func TestNarrowingMatchesBruteForce(t *testing.T) {
	narrowingMatchesBruteForce(t)
}

func narrowingMatchesBruteForce(t *testing.T) {
	s := openTest(t, func(o *Options) { o.MergeEvery = 300 })
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	words := []string{"river", "stone", "cloud", "ember", "frost", "grove"}
	tagNames := []string{"a", "b", "c", "d"}
	type mem struct {
		words []string
		tags  []string
		k     float64
	}
	mems := map[string]mem{}
	for i := range 1000 {
		m := mem{k: float64(rng.IntN(3))}
		for _, w := range words {
			if rng.IntN(3) == 0 {
				m.words = append(m.words, w)
			}
		}
		for j, tg := range tagNames {
			if rng.IntN(j+2) == 0 { // "a" on half, "d" on a fifth
				m.tags = append(m.tags, tg)
			}
		}
		id := fmt.Sprint("m", i)
		mems[id] = m
		put(t, s, memgate.Write{ID: id, Text: "filler " + strings.Join(m.words, " "), Tags: m.tags, Metadata: map[string]any{"k": m.k}})
	}
	has := func(list []string, x string) bool { return slices.Contains(list, x) }
	for q := range 150 {
		word := words[rng.IntN(len(words))]
		tags := []string{tagNames[rng.IntN(4)]}
		if rng.IntN(2) == 0 {
			tags = append(tags, tagNames[rng.IntN(4)])
		}
		mode := []string{memgate.TagsAll, memgate.TagsAny}[rng.IntN(2)]
		var filter map[string]any
		if rng.IntN(2) == 0 {
			filter = map[string]any{"k": float64(rng.IntN(3))}
		}
		text := ""
		if q%3 != 0 {
			text = word
		}
		res, err := s.Search(ctx, memgate.Query{Text: text, Tags: tags, TagsMode: mode, Filter: filter, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, m := range mems {
			pass := text == "" || has(m.words, text)
			inAny, inAll := false, true
			for _, tg := range tags {
				inAny = inAny || has(m.tags, tg)
				inAll = inAll && has(m.tags, tg)
			}
			if mode == memgate.TagsAny {
				pass = pass && inAny
			} else {
				pass = pass && inAll
			}
			if filter != nil {
				pass = pass && m.k == filter["k"]
			}
			if pass {
				want++
			}
		}
		if len(res.Hits) != min(want, 100) {
			t.Fatalf("query %d (%q %v %s %v): %d hits, want %d", q, text, tags, mode, filter, len(res.Hits), min(want, 100))
		}
		for i, h := range res.Hits {
			m := mems[h.ID]
			if text != "" && !has(m.words, text) {
				t.Fatalf("query %d: hit %s lacks the word", q, h.ID)
			}
			if filter != nil && m.k != filter["k"] {
				t.Fatalf("query %d: hit %s fails the filter", q, h.ID)
			}
			if i > 0 && (h.Score > res.Hits[i-1].Score || text == "" && h.Version > res.Hits[i-1].Version) {
				t.Fatalf("query %d: hits out of order at %d", q, i)
			}
		}
	}
}

// A query's terms are its first maxQueryTerms distinct ones, however long
// the text, and the same whether it is analysed whole or in pieces.
func TestQueryTermsAreTheFirstDistinct(t *testing.T) {
	var sb strings.Builder
	for i := 0; sb.Len() < 64<<10; i++ {
		fmt.Fprintf(&sb, "word%d Repeated\tidentifier_%d\n", i%50, i)
	}
	text := sb.String()
	got := queryTerms(text)
	var want []string
	for _, term := range search.Terms(text) {
		if len(want) < maxQueryTerms && !slices.Contains(want, term) {
			want = append(want, term)
		}
	}
	if !slices.Equal(got, want) || len(got) != maxQueryTerms {
		t.Fatalf("terms %d %v, want %d %v", len(got), got, len(want), want)
	}
	if got := queryTerms("alpha beta alpha"); !slices.Equal(got, search.Terms("alpha beta")) {
		t.Fatalf("short query: %v", got)
	}
}

// A query is analysed up to maxQueryBytes: a text that repeats a few words
// past that mark costs that much, and a word that first comes after it is
// not a term.
func TestQueryTermsWithinTheirBytes(t *testing.T) {
	within := strings.Repeat("alpha ", (maxQueryBytes-1024)/6) + "omega"
	if got := queryTerms(within); !slices.Equal(got, search.Terms("alpha omega")) {
		t.Fatalf("a new word before the bound: %v", got)
	}
	past := strings.Repeat("alpha ", maxQueryBytes/6+1024) + "omega"
	if got := queryTerms(past); !slices.Equal(got, search.Terms("alpha")) {
		t.Fatalf("a new word after the bound: %v", got)
	}
}

// rankWhole, which merges the lists while they are few and short, lists
// the documents it scores in its array while they are few, and walks its
// whole array past that, ranks as the walk in document order does: the
// same documents, scores and order (ties to the newer), whether the words
// are rare, common or both, and however many.
func TestRankWholeEqualsTheWalk(t *testing.T) {
	s := openTest(t, func(o *Options) { o.MergeEvery = 300 })
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 1200 {
		words := []string{"common"}
		if i%2 == 0 {
			words = append(words, "half")
		}
		if i%97 == 0 {
			words = append(words, "rare")
		}
		words = append(words, fmt.Sprintf("w%d", rng.IntN(40)), fmt.Sprintf("x%d", rng.IntN(400)))
		put(t, s, memgate.Write{Text: strings.Join(words, " ")})
	}
	// A small limit fills the top early, so that rankWhole's merge skips
	// the documents that cannot reach it: the same hits and candidates.
	for _, limit := range []int{50, 3} {
		rankWholeAgainstTheWalk(t, s, limit, "rare", "rare w3", "common", "half rare", "common half rare w1 w2", "w5 w6 w7",
			"nothing", "rare x1 common", "x1 x2 x3 x4 x5 x6 x7 x8 x9 x10 rare", "x1 rare nothing x2", "common x1", "half w1 x2")
	}
}

// Documents of a common word alone cannot enter a full top of documents
// that hold a rare word as well: rankWhole counts them without scoring
// them, and finds what the walk finds.
func TestRankWholeSkipsWhatCannotEnterTheTop(t *testing.T) {
	s := openTest(t, func(o *Options) { o.MergeEvery = 300 })
	for i := range 1200 {
		words := []string{"filler", fmt.Sprint("x", i)}
		switch {
		case i%120 == 0:
			words = append(words, "needle", "filler")
		case i%9 != 0:
			words = []string{fmt.Sprint("y", i)}
		}
		put(t, s, memgate.Write{Text: strings.Join(words, " ")})
	}
	for _, limit := range []int{1, 2, 5, 10, 20} {
		rankWholeAgainstTheWalk(t, s, limit, "needle filler", "filler needle", "filler")
	}
}

// Of words whose lists are short enough to merge, rankWhole tells which
// of its hits hold every term of the query, as their records' text does
// (hybrid search weighs the vectors by it).
func TestRankWholeSaysWhichHitsHoldEveryTerm(t *testing.T) {
	s := openTest(t, func(o *Options) { o.MergeEvery = 300 })
	rng := rand.New(rand.NewPCG(9, 10))
	word := func(i int) string { return "zq" + string(rune('b'+i/10)) + string(rune('b'+i%10)) }
	for range 1200 {
		put(t, s, memgate.Write{Text: word(rng.IntN(60)) + " " + word(rng.IntN(60)) + " " + word(rng.IntN(60))})
	}
	var queries []string
	for range 40 {
		queries = append(queries, word(rng.IntN(60))+" "+word(rng.IntN(60)), word(rng.IntN(60))+" "+word(rng.IntN(60))+" "+word(rng.IntN(60)))
	}
	for _, limit := range []int{1, 5, 50} {
		rankWholeAgainstTheWalk(t, s, limit, queries...)
	}
}

// cutKeeps is what a hybrid search keeps of hits for the fusion: those of
// at least the cut's share of the first and those holding every term.
func cutKeeps(hits []search.Scored, every *wholeTerms, cut *lexicalCut) []search.Scored {
	var out []search.Scored
	for _, h := range hits {
		if h.Score >= cut.share*hits[0].Score || every.holds(h.Doc) {
			out = append(out, h)
		}
	}
	return out
}

func rankWholeAgainstTheWalk(t *testing.T, s *Store, limit int, queries ...string) {
	t.Helper()
	mergedWhole := 0
	for _, q := range queries {
		terms := queryTerms(q)
		var whole, walk []search.Scored
		var wholeCandidates, walkCandidates int
		err := s.view(func(v *view) error {
			n, avgLen := 1200, 0.0
			total, err := s.counter(v.tx.Bucket(bucketMeta), metaTotalLen)
			if err != nil {
				return err
			}
			avgLen = float64(total) / float64(n)
			var ok bool
			var every wholeTerms
			if whole, wholeCandidates, ok, err = s.rankWhole(v, newWalk(context.Background()), terms, limit, n, newBM25(n, total, scale{}), &every, nil); err != nil || !ok {
				return fmt.Errorf("rankWhole declined (%v)", err)
			}
			// A hybrid's cut: the same candidates counted, the same hits
			// kept by the cut (those of at least its share of the best, and
			// those holding every term), and the score of any document.
			cut := &lexicalCut{share: lexicalShare, keep: min(limit, 3)}
			var everyCut wholeTerms
			cutRanked, cutCandidates, _, err := s.rankWhole(v, newWalk(context.Background()), terms, limit, n, newBM25(n, total, scale{}), &everyCut, cut)
			if err != nil {
				return err
			}
			for _, r := range whole {
				rec, err := s.decodeRecord(u64(r.Doc), s.txn(v.tx).docs.Get(u64(r.Doc)))
				if err != nil {
					return err
				}
				if x := cut.score(&rec, terms); x != r.Score {
					return fmt.Errorf("%q, limit %d: document %d scores %v from its record, %v ranked", q, limit, r.Doc, x, r.Score)
				}
				if cut.scoreOf == nil {
					return fmt.Errorf("%q, limit %d: the ranking gave no scoreOf", q, limit)
				}
				if x := cut.scoreOf(r.Doc); x != r.Score {
					return fmt.Errorf("%q, limit %d: document %d scores %v by the cut's scoreOf, %v ranked", q, limit, r.Doc, x, r.Score)
				}
			}
			if cut.release != nil {
				cut.release()
			}
			if cutCandidates != wholeCandidates {
				return fmt.Errorf("%q, limit %d: %d candidates with a cut, %d without", q, limit, cutCandidates, wholeCandidates)
			}
			if a, b := cutKeeps(whole, &every, cut), cutKeeps(cutRanked, &everyCut, cut); !slices.Equal(a, b) {
				return fmt.Errorf("%q, limit %d: the cut keeps %v of the ranking with it, %v without", q, limit, b, a)
			}
			if want := whole[:min(cut.keep, len(whole))]; !slices.Equal(cut.first, want) {
				return fmt.Errorf("%q, limit %d: the cut's first %v, the ranking's %v", q, limit, cut.first, want)
			}
			for _, r := range cutRanked {
				h, err := holdsEvery(s.txn(v.tx), r.Doc, terms)
				if err != nil {
					return err
				}
				if everyCut.known && everyCut.holds(r.Doc) != h {
					return fmt.Errorf("%q, limit %d: the merge says document %d holds every term: %v; the record: %v", q, limit, r.Doc, everyCut.holds(r.Doc), h)
				}
			}
			// Whether the first k hold a document of every term, as the
			// merge saw it and as the records' text says (an array of
			// scores cannot tell).
			if every.known {
				mergedWhole++
			}
			held := false
			for k := range whole {
				h, err := holdsEvery(s.txn(v.tx), whole[k].Doc, terms)
				if err != nil {
					return err
				}
				if held = held || h; every.known && every.among(whole[:k+1]) != held {
					return fmt.Errorf("%q, limit %d: of the first %d, the merge says a hit holds every term: %v; the records: %v", q, limit, k+1, every.among(whole[:k+1]), held)
				}
			}
			r := ranking{avgLen: avgLen, top: search.NewTopK(limit), limit: limit}
			for _, term := range terms {
				it, err := v.iter(newWalk(context.Background()), s.seal.key(kindWord, term), ascending)
				if err != nil {
					return err
				}
				df, _, _, err := it.count(-1)
				if err != nil {
					return err
				}
				if df > 0 {
					r.lists = append(r.lists, it)
					r.idf = append(r.idf, search.DefaultBM25.IDF(df, n))
				}
			}
			if len(r.lists) > 0 {
				if err := r.byDocument(nil); err != nil {
					return err
				}
			}
			walk, walkCandidates = r.top.Sorted(), r.candidates
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if wholeCandidates != walkCandidates {
			t.Fatalf("%q, limit %d: rankWhole scored %d candidates, the walk %d", q, limit, wholeCandidates, walkCandidates)
		}
		if len(whole) != len(walk) {
			t.Fatalf("%q, limit %d: rankWhole %d hits, the walk %d", q, limit, len(whole), len(walk))
		}
		for i := range whole {
			if whole[i].Doc != walk[i].Doc || math.Abs(whole[i].Score-walk[i].Score) > 1e-9 {
				t.Fatalf("%q, limit %d: hit %d: rankWhole %+v, the walk %+v", q, limit, i, whole[i], walk[i])
			}
		}
	}
	if mergedWhole == 0 {
		t.Fatalf("limit %d: no query was merged, so none said which hits hold every term", limit)
	}
}
