package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/embed"
	"github.com/memgate/memgate/internal/syncbuf"
	"github.com/memgate/memgate/search"
)

// fixture is the word vectors committed for tests: a few words in four
// dimensions (vehicles, medicine, travel, money).
func fixture(t testing.TB) *embed.Static {
	t.Helper()
	v, _, err := embed.LoadFile("../embed/testdata/wink-4d.json", "")
	if err != nil {
		t.Fatal(err)
	}
	return embed.StaticFrom("wink-4d", "test", v)
}

// switchable is an embedder whose failure the test sets: a real embedder
// cannot be made to time out or fail on demand.
type switchable struct {
	*embed.Static
	mu   sync.Mutex
	fail error
}

func (s *switchable) set(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

func (s *switchable) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	s.mu.Lock()
	err := s.fail
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s.Static.Embed(ctx, texts)
}

var paraphrases = []string{
	"Bought a new automobile last spring",
	"The physician said my blood pressure is fine",
	"We rented a cabin by the lake for the summer holiday",
	"Ticket INV-4521 was escalated to Acme support",
}

func search1(t *testing.T, s *Store, q memgate.Query) memgate.Result {
	t.Helper()
	res, err := s.Search(context.Background(), q)
	if err != nil {
		t.Fatalf("Search(%q): %v", q.Text, err)
	}
	return res
}

func TestHybridFindsParaphrasesLexicalMisses(t *testing.T) {
	e := fixture(t)
	lexical := openTest(t)
	hybrid := openTest(t, func(o *Options) { o.Embedder = e })
	ids := map[string]string{}
	for _, text := range paraphrases {
		put(t, lexical, memgate.Write{Text: text})
		ids[text] = put(t, hybrid, memgate.Write{Text: text}).ID
	}
	for query, want := range map[string]string{
		"what car do I drive":     paraphrases[0],
		"what did the doctor say": paraphrases[1],
		"vacation plans":          paraphrases[2],
		"INV-4521":                paraphrases[3],
	} {
		lex := search1(t, lexical, memgate.Query{Text: query})
		if query != "INV-4521" && len(lex.Hits) != 0 {
			t.Errorf("%q: BM25 found %d hits; the fixture's point is that it finds none", query, len(lex.Hits))
		}
		if lex.Receipt.RetrievalMode != memgate.RetrievalLexical || lex.Receipt.SemanticFallback != "" {
			t.Errorf("%q: a store without an embedder answered %+v", query, lex.Receipt)
		}
		res := search1(t, hybrid, memgate.Query{Text: query})
		r := res.Receipt
		if r.RetrievalMode != memgate.RetrievalHybrid || r.EmbeddingModel != "wink-4d" || r.EmbeddingVersion != "test" || r.SemanticFallback != "" {
			t.Errorf("%q: receipt %+v, want hybrid with wink-4d/test", query, r)
		}
		if len(res.Hits) == 0 || res.Hits[0].ID != ids[want] {
			t.Errorf("%q: hits %v, want %q first", query, texts(res.Hits), want)
			continue
		}
		top := res.Hits[0]
		if top.Score != 1 || top.SemanticScore == nil {
			t.Errorf("%q: top hit score %v, semantic %v", query, top.Score, top.SemanticScore)
		}
		again := search1(t, hybrid, memgate.Query{Text: query})
		if !sameIDs(res.Hits, again.Hits) {
			t.Errorf("%q: two searches ranked differently: %v, %v", query, texts(res.Hits), texts(again.Hits))
		}
	}
	if n := hybrid.Embedded(); n != int64(len(paraphrases)) {
		t.Errorf("Embedded() = %d, want %d", n, len(paraphrases))
	}
}

func texts(hits []memgate.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Text
	}
	return out
}

func sameIDs(a, b []memgate.Hit) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID {
			return false
		}
	}
	return true
}

func TestHybridNarrowsAndForgets(t *testing.T) {
	s := openTest(t, func(o *Options) { o.Embedder = fixture(t) })
	car := put(t, s, memgate.Write{Text: "Bought a new automobile last spring", Tags: []string{"home"}})
	put(t, s, memgate.Write{Text: "The vehicle needs new tyres", Tags: []string{"work"}})
	res := search1(t, s, memgate.Query{Text: "car", Tags: []string{"work"}})
	for _, h := range res.Hits {
		if h.ID == car.ID {
			t.Errorf("a memory without the tag was found by its vector")
		}
	}
	if len(res.Hits) != 1 {
		t.Errorf("tagged search: %v, want the vehicle", texts(res.Hits))
	}
	if err := s.Delete(context.Background(), car.ID, nil); err != nil {
		t.Fatal(err)
	}
	res = search1(t, s, memgate.Query{Text: "car"})
	if len(res.Hits) != 1 || res.Hits[0].ID == car.ID {
		t.Errorf("after forget: %v", texts(res.Hits))
	}
	if n := s.Embedded(); n != 1 {
		t.Errorf("Embedded() = %d after a forget, want 1", n)
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketVectors).Stats().KeyN != 1 {
			t.Errorf("the forgotten memory's vector is still stored")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestHybridFallsBackAndCatchesUp(t *testing.T) {
	e := &switchable{Static: fixture(t)}
	e.set(search.ErrNotReady)
	path := t.TempDir() + "/store.db"
	s, err := Open(path, Options{NoSync: true, Embedder: e})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, text := range paraphrases {
		put(t, s, memgate.Write{Text: text}) // never fails for the embedder
	}
	for err, want := range map[error]string{
		search.ErrNotReady:              FallbackNotReady,
		search.ErrUnavailable:           FallbackUnavailable,
		context.DeadlineExceeded:        FallbackTimeout,
		errors.New("the model said no"): FallbackError,
	} {
		e.set(err)
		res := search1(t, s, memgate.Query{Text: "Ticket INV-4521"})
		if res.Receipt.RetrievalMode != memgate.RetrievalLexical || res.Receipt.SemanticFallback != want {
			t.Errorf("embedder failing with %v: receipt %+v, want lexical, %s", err, res.Receipt, want)
		}
		if len(res.Hits) != 1 || res.Hits[0].SemanticScore != nil {
			t.Errorf("the lexical answer: %v", texts(res.Hits))
		}
	}
	if n := s.Embedded(); n != 0 {
		t.Errorf("Embedded() = %d while the embedder failed", n)
	}
	e.set(nil)
	s.wakeCatchUp()
	deadline := time.Now().Add(10 * time.Second)
	for s.Embedded() != int64(len(paraphrases)) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := s.Embedded(); n != int64(len(paraphrases)) {
		t.Fatalf("the catch-up embedded %d of %d memories", n, len(paraphrases))
	}
	res := search1(t, s, memgate.Query{Text: "what car do I drive"})
	if res.Receipt.RetrievalMode != memgate.RetrievalHybrid || len(res.Hits) == 0 || res.Hits[0].Text != paraphrases[0] {
		t.Errorf("after the catch-up: %+v, %v", res.Receipt, texts(res.Hits))
	}
	// Another model: the vectors of the old one are not used, and the
	// catch-up embeds everything again.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	v, _, _ := embed.LoadFile("../embed/testdata/wink-4d.json", "")
	s, err = Open(path, Options{NoSync: true, Embedder: embed.StaticFrom("wink-4d", "v2", v)})
	if err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for s.Embedded() != int64(len(paraphrases)) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	res = search1(t, s, memgate.Query{Text: "what car do I drive"})
	if res.Receipt.EmbeddingVersion != "v2" || len(res.Hits) == 0 || res.Hits[0].Text != paraphrases[0] {
		t.Errorf("under v2: %+v, %v", res.Receipt, texts(res.Hits))
	}
}

func TestHybridSealsVectors(t *testing.T) {
	s := openTest(t, func(o *Options) {
		o.Embedder = fixture(t)
		o.Encryption = encryption(t, "a passphrase")
	})
	put(t, s, memgate.Write{Text: "Bought a new automobile last spring"})
	res := search1(t, s, memgate.Query{Text: "car"})
	if len(res.Hits) != 1 || res.Receipt.RetrievalMode != memgate.RetrievalHybrid {
		t.Fatalf("encrypted hybrid search: %+v %v", res.Receipt, texts(res.Hits))
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketVectors).ForEach(func(k, v []byte) error {
			if _, err := unmarshalVector(v); err == nil {
				t.Errorf("a vector is stored in the clear")
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The vectors only reorder BM25's ranking when a memory within the limit
// holds every term of the query (titles included, after analysis).
func TestHoldsEveryTermOfTheQuery(t *testing.T) {
	s := openTest(t)
	whole := put(t, s, memgate.Write{Text: "Car payments are due", Title: "Budget"})
	part := put(t, s, memgate.Write{Text: "payment by invoice"})
	err := s.view(func(v *view) error {
		tx := s.txn(v.tx)
		for _, c := range []struct {
			id, query string
			want      bool
		}{
			{whole.ID, "car payment", true},
			{whole.ID, "budget cars", true},
			{part.ID, "car payment", false},
			{part.ID, "invoices", true},
		} {
			_, doc, err := tx.lookup(c.id)
			if err != nil {
				return err
			}
			got, err := holdsEvery(tx, doc, queryTerms(c.query))
			if err != nil {
				return err
			}
			if got != c.want {
				t.Errorf("%q holds every term of %q: %v, want %v", c.id, c.query, got, c.want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// table embeds each text as the vector its first word names, so that a
// test sets every cosine; a text of no known word gets no vector.
type table map[string][]float32

func (table) Model() (string, string) { return "table", "1" }

func (tb table) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, text := range texts {
		word, _, _ := strings.Cut(text, " ")
		if v, ok := tb[word]; ok {
			out[i] = slices.Clone(v)
			search.Normalise(out[i])
		}
	}
	return out, nil
}

// A filter narrows the vectors' ranking to the memories it passes: the
// memories it leaves out, nearer the query, take no place from them (the
// margin below the best is the best kept's).
func TestHybridFilterKeepsItsOwnNearest(t *testing.T) {
	s := openTest(t, func(o *Options) {
		o.Embedder = table{"query": {1, 0, 0, 0}, "truck": {0.55, 0.835, 0, 0}, "moto": {0.49, 0.87, 0, 0}, "car": {0.4, 0, 0.916, 0}, "filler": {0, 0, 0, 1}}
	})
	put(t, s, memgate.Write{Text: "truck tyres"})
	put(t, s, memgate.Write{Text: "moto sold"})
	car := put(t, s, memgate.Write{Text: "car leased", Tags: []string{"target"}, Metadata: map[string]any{"k": "t"}})
	for i := range 17 {
		put(t, s, memgate.Write{Text: fmt.Sprint("filler text ", i), Tags: []string{"target"}})
	}
	waitEmbedded(t, s, 20)
	for _, q := range []memgate.Query{
		{Text: "query", Tags: []string{"target"}},
		{Text: "query", Filter: map[string]any{"k": "t"}},
	} {
		res := search1(t, s, q)
		if len(res.Hits) != 1 || res.Hits[0].ID != car.ID {
			t.Errorf("tags %v filter %v: hits %v, want the car alone", q.Tags, q.Filter, texts(res.Hits))
		}
	}
	// The margin is the best kept's even when the filter passes too many
	// to score each: the scan's nearest it passes.
	near := []search.Scored{{Doc: 1, Score: 0.55}, {Doc: 2, Score: 0.49}, {Doc: 3, Score: 0.40}, {Doc: 4, Score: 0.35}, {Doc: 5, Score: 0.31}, {Doc: 6, Score: 0.29}}
	err := s.view(func(v *view) error {
		got, err := s.semantic(v, near, 10, func(doc uint64) (bool, error) { return doc >= 3, nil })
		if err != nil {
			return err
		}
		if len(got) != 3 || got[0].Doc != 3 || got[2].Doc != 5 { // 6 is below 0.40 − 0.1
			t.Errorf("semantic kept %v, want documents 3, 4 and 5", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Hundreds of memories with one and the same vector, whose signs match
// the query's better, cannot hide the nearest memory: in a small store
// every vector is scored exactly, and past that a shortlist they fill
// grows until they no longer do.
func TestHybridIdenticalVectorsDoNotHideTheNearest(t *testing.T) {
	for _, n := range []int{exactScan, exactScan + 1, 2 * exactScan} {
		s := openTest(t, func(o *Options) {
			o.Embedder = table{"query": {1, 0.1, 0.1, 0.1}, "target": {1, -0.1, -0.1, -0.1}, "dupe": {0.3, 0.9, 0.3, 0.3}}
		})
		target := put(t, s, memgate.Write{Text: "target memory"})
		for i := range n - 1 {
			put(t, s, memgate.Write{Text: fmt.Sprint("dupe memory ", i)})
		}
		waitEmbedded(t, s, int64(n))
		res := search1(t, s, memgate.Query{Text: "query", Limit: 3})
		if len(res.Hits) == 0 || res.Hits[0].ID != target.ID {
			t.Fatalf("%d vectors: hits %v, want the target first", n, texts(res.Hits))
		}
	}
}

func waitEmbedded(t *testing.T, s *Store, n int64) {
	t.Helper()
	for began := time.Now(); s.Embedded() < n; {
		if time.Since(began) > 10*time.Second {
			t.Fatalf("%d of %d memories embedded after 10 s", s.Embedded(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A memory written while the embedder fails is embedded soon after the
// embedder is back, not at the catch-up's next round a minute later.
func TestHybridEmbedsWhatWentWithoutAVectorOnceTheEmbedderIsBack(t *testing.T) {
	e := &switchable{Static: fixture(t)}
	var logs syncBuffer
	// Durable writes: the commit takes the time of a sync, in which the
	// catch-up, woken too early, would look for the memory and not find it.
	s := openTest(t, func(o *Options) {
		o.Embedder, o.NoSync = e, false
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	put(t, s, memgate.Write{Text: "The physician said my blood pressure is fine"})
	waitEmbedded(t, s, 1) // the catch-up has nothing left: it waits
	e.set(search.ErrUnavailable)
	put(t, s, memgate.Write{Text: "Bought a new automobile last spring"})
	for began := time.Now(); !strings.Contains(logs.String(), "the embedder fails") && time.Since(began) < 10*time.Second; {
		time.Sleep(5 * time.Millisecond) // the catch-up tries, and fails
	}
	e.set(nil)
	waitEmbedded(t, s, 2)
	// The failure and the recovery are logged once each, without the text.
	out := logs.String()
	if strings.Count(out, "the embedder fails") != 1 || !strings.Contains(out, "reason=unavailable") ||
		strings.Count(out, "the embedder answers again") != 1 || strings.Contains(out, "automobile") {
		t.Errorf("the log: %s", out)
	}
}

// syncBuffer is a bytes.Buffer that a store's goroutines may log into.
type syncBuffer = syncbuf.Buffer

// A filter passing exactFiltered memories has them scored exactly, and one
// passing one more has the scan's nearest it passes: either way the
// nearest memory it passes is found, ahead of nearer ones it leaves out.
func TestHybridFilterAtTheExactBound(t *testing.T) {
	for _, n := range []int{exactFiltered, exactFiltered + 1} {
		s := openTest(t, func(o *Options) {
			o.Embedder = table{"query": {1, 0, 0, 0}, "near": {0.9, 0.436, 0, 0}, "car": {0.5, 0, 0.866, 0}, "filler": {0, 0, 0, 1}}
		})
		put(t, s, memgate.Write{Text: "near but untagged"})
		car := put(t, s, memgate.Write{Text: "car tagged", Tags: []string{"t"}})
		for i := range n - 1 {
			put(t, s, memgate.Write{Text: fmt.Sprint("filler ", i), Tags: []string{"t"}})
		}
		waitEmbedded(t, s, int64(n+1))
		res := search1(t, s, memgate.Query{Text: "query", Tags: []string{"t"}, Limit: 3})
		if len(res.Hits) != 1 || res.Hits[0].ID != car.ID {
			t.Errorf("a filter of %d: hits %v, want the car alone", n, texts(res.Hits))
		}
		err := s.view(func(v *view) error {
			w := newWalk(context.Background())
			f, err := s.newFilter(v, w, []string{"t"}, memgate.TagsAll, nil, "", ascending, orderAlways)
			if err != nil {
				return err
			}
			_, exact, err := s.filteredNear(v, w, f, []float32{1, 0, 0, 0}, 10)
			if exact != (n <= exactFiltered) {
				t.Errorf("a filter of %d scored exactly: %v", n, exact)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A search of a view ranks lexically across its namespaces, and its
// receipt says why the store's embedder was not used.
func TestHybridViewSearchIsLexicalAndSaysSo(t *testing.T) {
	s := openTest(t, func(o *Options) { o.Embedder = fixture(t) })
	put(t, s, memgate.Write{Text: "Bought a new automobile last spring"})
	waitEmbedded(t, s, 1)
	for _, others := range []memgate.Corpus{{}, {Memories: 3, Length: 30, Terms: []string{"automobil"}, DF: []int64{1}}} {
		res, err := s.SearchWith(context.Background(), memgate.Query{Text: "automobile"}, others, 0)
		if err != nil {
			t.Fatal(err)
		}
		if r := res.Receipt; r.RetrievalMode != memgate.RetrievalLexical || r.SemanticFallback != FallbackDisabled || len(res.Hits) != 1 {
			t.Errorf("a view's search (others %+v): %+v, %d hits", others, r, len(res.Hits))
		}
	}
	if res := search1(t, s, memgate.Query{Text: "automobile"}); res.Receipt.RetrievalMode != memgate.RetrievalHybrid {
		t.Errorf("the store's own search: %+v", res.Receipt)
	}
}

// The same flood in a clustered store: two thousand memories of one vector,
// farther from the query than the target, make their cluster's centroid;
// the target, a member of that cluster whose residual's signs disagree with
// the query's, is estimated below them (0.76 against 0.88, its cosine
// 0.93), and only the shortlist's growth finds it. A thousand memories of
// other vectors, away from the query, fill the other clusters, so that the
// target gets no cluster of its own.
func TestHybridIdenticalVectorsDoNotHideTheNearestOnceClustered(t *testing.T) {
	defer func(n int) { clusterMin = n }(clusterMin)
	clusterMin = 600
	tb := table{"query": {1, 0.3, 0, 0}, "target": {0.93, 0.25, 0.26, 0.26}, "dupe": {1, 0, 0.3, 0.3}}
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 1000 {
		// Elsewhere: away from the query, so that none is nearer it.
		tb[fmt.Sprint("o", i)] = []float32{-float32(math.Abs(r.NormFloat64())), float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64())}
	}
	s := openTest(t, func(o *Options) { o.Embedder = tb })
	const n = 3000
	var target memgate.Memory
	for i := range n {
		word := "dupe"
		switch {
		case i == n/2: // not first: the training's first centroid is the first vector
			target = put(t, s, memgate.Write{Text: "target memory"})
			continue
		case i%3 == 0:
			word = fmt.Sprint("o", i%1000)
		}
		put(t, s, memgate.Write{Text: fmt.Sprint(word, " memory ", i)})
	}
	waitEmbedded(t, s, n)
	for began := time.Now(); !s.Clustered(); time.Sleep(5 * time.Millisecond) {
		if time.Since(began) > 20*time.Second {
			t.Fatal("no clusters after 20 s")
		}
	}
	res := search1(t, s, memgate.Query{Text: "query", Limit: 3})
	if len(res.Hits) == 0 || res.Hits[0].ID != target.ID {
		t.Fatalf("clustered: hits %v, want the target first", texts(res.Hits))
	}
}

// In a small store, where the vectors bring few memories of their own,
// turning them on returns every memory lexical search does: those the
// fusion leaves out (holding a word or two of a longer query, far below
// the best) come after those it keeps, a memory holding every term is
// never left out, and each hit's lexical_score is its BM25 score whether
// the fusion took it or not.
func TestHybridLosesNoLexicalHit(t *testing.T) {
	s := openTest(t, func(o *Options) { o.Embedder = hashed{} })
	plain := openTest(t) // the same memories, lexical
	texts1 := []string{
		"The quarterly budget meeting moved to Thursday afternoon in the large conference room near the kitchen, please bring the laptop and the printed agenda",
		"budget budget budget", "meeting notes", "Thursday Thursday Thursday Thursday budget",
	}
	for i := range 10 {
		texts1 = append(texts1, fmt.Sprint("an unrelated memory about gardening, number ", i))
	}
	var mems []memgate.Memory
	for i, text := range texts1 {
		id := fmt.Sprint("m", i)
		mems = append(mems, put(t, s, memgate.Write{ID: id, Text: text}))
		put(t, plain, memgate.Write{ID: id, Text: text})
	}
	a, b, c := mems[0], mems[1], mems[2]
	waitEmbedded(t, s, int64(len(texts1)))
	for _, q := range []string{"budget meeting Thursday", "budget", "quarterly budget", "Thursday budget"} {
		lex := search1(t, plain, memgate.Query{Text: q, Limit: 10})
		hy := search1(t, s, memgate.Query{Text: q, Limit: 10})
		if hy.Receipt.RetrievalMode != memgate.RetrievalHybrid {
			t.Fatalf("%q: not hybrid: %+v", q, hy.Receipt)
		}
		at := map[string]int{}
		for i, h := range hy.Hits {
			at[h.ID] = i
			if h.SemanticScore != nil && (*h.SemanticScore > 1 || *h.SemanticScore < -1) {
				t.Errorf("%q: semantic_score %v", q, *h.SemanticScore)
			}
		}
		for _, l := range lex.Hits {
			i, ok := at[l.ID]
			if !ok {
				t.Errorf("%q: hybrid lost the lexical hit %q (%v)", q, l.Text, texts(hy.Hits))
				continue
			}
			if hy.Hits[i].LexicalScore != l.LexicalScore {
				t.Errorf("%q: %q has lexical_score %v in hybrid, %v in lexical", q, l.Text, hy.Hits[i].LexicalScore, l.LexicalScore)
			}
		}
	}
	// The memory holding all three words comes before those holding one.
	hy := search1(t, s, memgate.Query{Text: "budget meeting Thursday", Limit: 10})
	pos := map[string]int{}
	for i, h := range hy.Hits {
		pos[h.ID] = i
	}
	if pos[a.ID] > pos[b.ID] || pos[a.ID] > pos[c.ID] {
		t.Errorf("the memory holding every word after one holding one: %v", texts(hy.Hits))
	}
}

// A memory whose vector is the query's scores a cosine of at most 1,
// though its vector is kept as int8 numbers.
func TestHybridSemanticScoreIsACosine(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	tb := table{}
	for i := range 40 {
		v := make([]float32, 24)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		tb[fmt.Sprint("w", i)] = v
	}
	s := openTest(t, func(o *Options) { o.Embedder = tb })
	for i := range 40 {
		put(t, s, memgate.Write{Text: fmt.Sprint("w", i, " memory")})
	}
	waitEmbedded(t, s, 40)
	for i := range 40 {
		res := search1(t, s, memgate.Query{Text: fmt.Sprint("w", i), Limit: 1})
		if len(res.Hits) != 1 || res.Hits[0].SemanticScore == nil || *res.Hits[0].SemanticScore > 1 || *res.Hits[0].SemanticScore < 0.99 {
			t.Fatalf("w%d: %+v", i, res.Hits)
		}
	}
}

// A memory holding every term of the query stays in the fusion however
// far below the best its BM25 score is: a memory holding one of the words,
// first by the vectors, does not pass it.
func TestHybridKeepsTheMemoryHoldingEveryTerm(t *testing.T) {
	s := openTest(t, func(o *Options) {
		o.Embedder = table{"alpha": {1, 0, 0, 0}, "sim": {0.99, 0.1, 0, 0}, "wordy": {0, 0, 1, 0}, "pad": {0, 0, 0, 1}}
	})
	put(t, s, memgate.Write{Text: "alpha beta"})
	wordy := put(t, s, memgate.Write{Text: "wordy notes that go on and on about many things, " +
		"the alpha release, the beta programme, the gamma rays of the lab, and a great deal more besides that nobody reads"})
	sim := put(t, s, memgate.Write{Text: "sim beta, and a few more words after it to make it long"})
	for i := range 20 {
		put(t, s, memgate.Write{Text: fmt.Sprint("pad memory ", i)})
	}
	waitEmbedded(t, s, 23)
	res := search1(t, s, memgate.Query{Text: "alpha beta gamma", Limit: 5})
	pos := map[string]int{}
	for i, h := range res.Hits {
		pos[h.ID] = i
	}
	w, okW := pos[wordy.ID]
	m, okM := pos[sim.ID]
	if !okW || okM && m < w {
		t.Fatalf("the memory holding every term at %d (%v), one holding a word at %d: %v", w, okW, m, texts(res.Hits))
	}
}

// Every hit's lexical_score is its BM25 score, however the ranking went:
// a memory the vectors bring from past the lexical ranking's depth, with a
// tags filter or without, through the merge of the lists or the array of
// scores, has the score lexical search gives it.
func TestHybridLexicalScoreOfAMemoryTheVectorsBring(t *testing.T) {
	for _, padded := range []bool{false, true} { // merged lists, then an array of scores
		var writes []memgate.Write
		for i := range 60 {
			writes = append(writes, memgate.Write{Text: fmt.Sprint("pad alpha beta ", i), Tags: []string{"t"}})
		}
		writes = append(writes, memgate.Write{Text: "sim beta, and a few more words after it to make it long", Tags: []string{"t"}})
		if padded {
			for i := range 600 {
				writes = append(writes, memgate.Write{Text: fmt.Sprint("pad unrelated ", i), Tags: []string{"t"}})
			}
		}
		s, plain := twinStores(t, writes)
		for _, tags := range [][]string{nil, {"t"}} {
			q := memgate.Query{Text: "alpha beta gamma", Limit: 5, Tags: tags}
			hy := search1(t, s, q)
			q.Limit = 100
			want := map[string]float64{}
			for _, h := range search1(t, plain, q).Hits {
				want[h.ID] = h.LexicalScore
			}
			brought := false
			for _, h := range hy.Hits {
				brought = brought || strings.HasPrefix(h.Text, "sim")
				if h.LexicalScore != want[h.ID] {
					t.Errorf("padded %v, tags %v: %q has lexical_score %v, lexical search gives %v", padded, tags, h.Text, h.LexicalScore, want[h.ID])
				}
			}
			if !brought {
				t.Errorf("padded %v, tags %v: the vectors did not bring the memory: %v", padded, tags, texts(hy.Hits))
			}
		}
	}
}

// Behind a memory holding every term of the query, the vectors reorder
// BM25's memories and add theirs after all of them, at any limit: a
// memory the vectors alone find never passes one holding the query's word.
func TestHybridAddsTheVectorsMemoriesAfterLexicalOnesAtAnyLimit(t *testing.T) {
	s := openTest(t, func(o *Options) {
		o.Embedder = table{"beta": {1, 0, 0, 0}, "sim": {0.99, 0.1, 0, 0}, "pad": {0, 0, 0, 1}}
	})
	for i := range 70 {
		put(t, s, memgate.Write{Text: fmt.Sprint("pad beta ", i)})
	}
	for i := range 5 {
		put(t, s, memgate.Write{Text: fmt.Sprint("sim thing ", i)})
	}
	waitEmbedded(t, s, 75)
	for _, limit := range []int{10, 61, 62, 63, 100} {
		res := search1(t, s, memgate.Query{Text: "beta", Limit: limit})
		holders := min(limit, 70)
		if len(res.Hits) != min(limit, 75) {
			t.Fatalf("limit %d: %d hits", limit, len(res.Hits))
		}
		for i, h := range res.Hits {
			if holds := strings.Contains(h.Text, "beta"); holds != (i < holders) {
				t.Fatalf("limit %d: hit %d is %q: %v", limit, i, h.Text, texts(res.Hits))
			}
			if i > 0 && h.Score > res.Hits[i-1].Score {
				t.Fatalf("limit %d: hit %d scores %v after %v", limit, i, h.Score, res.Hits[i-1].Score)
			}
		}
	}
}

// A hybrid search's candidates are the memories the query's words matched
// and those the vectors alone found: a memory both found counts once, so
// where every memory holds a word the count is lexical search's.
func TestHybridCountsEachCandidateOnce(t *testing.T) {
	var writes []memgate.Write
	for i := range 60 {
		writes = append(writes, memgate.Write{Text: fmt.Sprint("pad alpha beta ", i), Tags: []string{"t"}})
	}
	for i := range 10 {
		writes = append(writes, memgate.Write{Text: fmt.Sprint("sim beta, and more words to make it long ", i), Tags: []string{"t"}})
	}
	s, plain := twinStores(t, writes)
	for _, tags := range [][]string{nil, {"t"}} {
		for _, limit := range []int{5, 100} {
			q := memgate.Query{Text: "alpha beta", Limit: limit, Tags: tags}
			hy, lex := search1(t, s, q), search1(t, plain, q)
			if hy.Receipt.RetrievalMode != memgate.RetrievalHybrid || hy.Receipt.Candidates != lex.Receipt.Candidates || hy.Receipt.Candidates > len(writes) {
				t.Errorf("tags %v, limit %d: %d candidates in hybrid (%s), %d in lexical, %d memories", tags, limit,
					hy.Receipt.Candidates, hy.Receipt.RetrievalMode, lex.Receipt.Candidates, len(writes))
			}
		}
	}
}

// twinStores are two stores holding writes (their ids m0, m1, …): one
// whose memories a text's first word embeds (alpha, and sim close to it;
// pad far from both), and one without vectors, for lexical search.
func twinStores(t *testing.T, writes []memgate.Write) (hy, plain *Store) {
	t.Helper()
	hy = openTest(t, func(o *Options) {
		o.Embedder = table{"alpha": {1, 0, 0, 0}, "sim": {0.99, 0.1, 0, 0}, "pad": {0, 0, 0, 1}}
	})
	plain = openTest(t)
	for i, w := range writes {
		w.ID = fmt.Sprint("m", i)
		put(t, hy, w)
		put(t, plain, w)
	}
	waitEmbedded(t, hy, int64(len(writes)))
	return hy, plain
}
