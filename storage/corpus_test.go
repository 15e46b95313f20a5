package storage

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/memgate/memgate"
)

// TestSearchWithScoresAsOneStore splits memories between two stores and
// puts every one of them in a third as well: ranked with the other store's
// corpus, each memory of either store has the lexical score it has in the
// store that holds them all, whether the ranking reads whole lists or walks
// a narrowing, with postings merged to disk, in the tail, and of memories
// forgotten after their merge.
func TestSearchWithScoresAsOneStore(t *testing.T) {
	opts := func(o *Options) { o.MergeEvery = 40 }
	a, b, union := openTest(t, opts), openTest(t, opts), openTest(t, opts)
	rng := rand.New(rand.NewPCG(11, 12))
	words := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma")
	var ids []string
	byID := map[string]*Store{}
	for i := range 240 {
		n := 1 + rng.IntN(30)
		text := make([]string, n)
		for j := range text {
			text[j] = words[min(rng.IntN(len(words)), rng.IntN(len(words)))] // some words far more common
		}
		w := memgate.Write{ID: fmt.Sprintf("m%03d", i), Text: strings.Join(text, " ")}
		if i%3 == 0 {
			w.Tags = []string{"third"}
		}
		home := a
		if rng.IntN(3) == 0 {
			home = b
		}
		put(t, home, w)
		put(t, union, w)
		ids = append(ids, w.ID)
		byID[w.ID] = home
	}
	// Forget some of the first memories, merged by now, in their store and
	// in the union.
	ctx := context.Background()
	for _, id := range ids[:60:60] {
		if rng.IntN(4) != 0 {
			continue
		}
		for _, s := range []*Store{byID[id], union} {
			if err := s.Delete(ctx, id, nil); err != nil {
				t.Fatal(err)
			}
		}
	}

	for _, q := range []memgate.Query{
		{Text: "omicron", Limit: 100},
		{Text: "rho sigma", Limit: 100},
		{Text: "sigma pi rho", Limit: 100},
		{Text: "gamma kappa", Tags: []string{"third"}, Limit: 100},
		{Text: "sigma words nobody wrote", Limit: 100},
	} {
		t.Run(q.Text, func(t *testing.T) {
			want := map[string]float64{}
			res, err := union.Search(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Hits) == 0 || len(res.Hits) == q.Limit {
				t.Fatalf("the union has %d hits: the test needs some, and all of them", len(res.Hits))
			}
			for _, h := range res.Hits {
				want[h.ID] = h.LexicalScore
			}
			got := 0
			for _, pair := range [][2]*Store{{a, b}, {b, a}} {
				others, err := pair[1].Corpus(ctx, q.Text)
				if err != nil {
					t.Fatal(err)
				}
				r, err := pair[0].SearchWith(ctx, q, others, 0)
				if err != nil {
					t.Fatal(err)
				}
				// Above a bound, only the memories that score above it.
				if len(r.Hits) > 2 {
					bound := r.Hits[2].LexicalScore
					top, err := pair[0].SearchWith(ctx, q, others, bound)
					if err != nil {
						t.Fatal(err)
					}
					for i, h := range top.Hits {
						if h.ID != r.Hits[i].ID || h.LexicalScore <= bound {
							t.Fatalf("above %v: hit %d is %s (%v)", bound, i, h.ID, h.LexicalScore)
						}
					}
					if n := len(top.Hits); n > 2 || n < 1 {
						t.Fatalf("above the third score: %d hits", n)
					}
				}
				for _, h := range r.Hits {
					w, ok := want[h.ID]
					if !ok {
						t.Fatalf("%s is a hit of its store, not of the union", h.ID)
					}
					if math.Abs(h.LexicalScore-w) > 1e-9 {
						t.Fatalf("%s scores %.12f in its store, %.12f in the union", h.ID, h.LexicalScore, w)
					}
					got++
				}
			}
			if got != len(want) {
				t.Fatalf("the two stores have %d hits, the union %d", got, len(want))
			}
			// Alone, a store scores on its own scale.
			alone, err := a.Search(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(alone.Hits) > 0 && math.Abs(alone.Hits[0].LexicalScore-want[alone.Hits[0].ID]) < 1e-6 {
				t.Fatalf("%s scores as in the union without the other store's corpus", alone.Hits[0].ID)
			}
		})
	}
}

// TestCorpusCountsWhatSearchRanks checks a store's corpus against its
// memories: their number, their length in terms, and how many hold each
// query term, with a memory forgotten.
func TestCorpusCountsWhatSearchRanks(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	put(t, s, memgate.Write{ID: "1", Text: "cats and dogs"})
	put(t, s, memgate.Write{ID: "2", Text: "cats"})
	put(t, s, memgate.Write{ID: "3", Text: "dogs dogs dogs"})
	if err := s.Delete(ctx, "3", nil); err != nil {
		t.Fatal(err)
	}
	c, err := s.Corpus(ctx, "Cats birds dogs")
	if err != nil {
		t.Fatal(err)
	}
	if c.Memories != 2 || len(c.Terms) != 3 || fmt.Sprint(c.DF) != "[2 0 1]" {
		t.Fatalf("corpus %+v; want 2 memories, df [2 0 1]", c)
	}
	empty := openTest(t)
	if c, err := empty.Corpus(ctx, "cats"); err != nil || c.Memories != 0 || c.Length != 0 {
		t.Fatalf("an empty store's corpus: %+v, %v", c, err)
	}
	// Corpora of other words cannot be ranked with.
	other, err := s.Corpus(ctx, "birds")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SearchWith(ctx, memgate.Query{Text: "cats"}, other, 0); memgate.ErrorCode(err) != memgate.CodeInternal {
		t.Fatalf("a corpus of other terms: %v", err)
	}
}
