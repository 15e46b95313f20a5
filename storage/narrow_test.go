package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate"
)

// The narrowed walks (search ranked or newest first, list in every order)
// give exactly what a brute-force filter over the unnarrowed answers gives:
// on a store with common and rare tags, metadata, merged and tail postings,
// removals and replacements; in all and any modes; whichever path the
// sizes choose (the narrowing leading, the words scored whole and the best
// probed, or the walk in document order).
func TestNarrowingEqualsBruteForce(t *testing.T) {
	for _, c := range []struct {
		name           string
		merge, gather  int
		byRecord, seed uint64
	}{
		{"merged and tail", 97, 4096, 256, 1},
		{"all in the tail", 5000, 4096, 256, 2},
		{"probing past a small gather", 61, 40, 8, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			oldG, oldR := gatherMax, byRecord
			gatherMax, byRecord = c.gather, int(c.byRecord)
			t.Cleanup(func() { gatherMax, byRecord = oldG, oldR })
			narrowingEqualsBruteForce(t, c.merge, c.seed)
		})
	}
}

type bruteMem struct {
	tags []string
	k    float64
}

func narrowingEqualsBruteForce(t *testing.T, mergeEvery int, seed uint64) {
	s := openTest(t, func(o *Options) { o.MergeEvery = mergeEvery })
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 99))
	vocab := make([]string, 60)
	for i := range vocab {
		vocab[i] = "w" + letterWord(i)
	}
	allTags := []string{"common", "team1", "team2", "half", "rare", "never"}
	live := map[string]bruteMem{}
	write := func(id string) {
		m := bruteMem{k: float64(rng.IntN(3))}
		for _, tg := range allTags {
			p := map[string]int{"common": 97, "team1": 99, "team2": 99, "half": 50, "rare": 3, "never": 0}[tg]
			if rng.IntN(100) < p {
				m.tags = append(m.tags, tg)
			}
		}
		words := []string{"filler"}
		for range 3 {
			words = append(words, vocab[rng.IntN(len(vocab))])
		}
		put(t, s, memgate.Write{ID: id, Text: strings.Join(words, " "), Tags: m.tags, Metadata: map[string]any{"k": m.k}})
		live[id] = m
	}
	for i := range 700 {
		write(fmt.Sprint("m", i))
	}
	for i := range 140 {
		id := fmt.Sprint("m", rng.IntN(700))
		if i%2 == 0 {
			write(id)
			continue
		}
		if _, ok := live[id]; ok {
			if err := s.Delete(ctx, id, nil); err != nil {
				t.Fatal(err)
			}
			delete(live, id)
		}
	}
	pass := func(id string, tags []string, mode string, filter map[string]any) bool {
		m := live[id]
		in := 0
		for _, tg := range tags {
			if slices.Contains(m.tags, tg) {
				in++
			}
		}
		switch {
		case len(tags) > 0 && mode == memgate.TagsAny && in == 0,
			len(tags) > 0 && mode != memgate.TagsAny && in < len(tags):
			return false
		}
		return filter == nil || m.k == filter["k"]
	}
	for q := range 150 {
		var tags []string
		for range 1 + rng.IntN(4) {
			tags = append(tags, allTags[rng.IntN(len(allTags))])
		}
		mode := []string{memgate.TagsAll, memgate.TagsAny}[rng.IntN(2)]
		var filter map[string]any
		if rng.IntN(3) == 0 {
			filter = map[string]any{"k": float64(rng.IntN(3))}
		}
		limit := []int{1, 3, 10, 100}[rng.IntN(4)]
		text := ""
		if q%4 != 0 {
			text = vocab[rng.IntN(len(vocab))]
			if rng.IntN(2) == 0 {
				text += " " + vocab[rng.IntN(len(vocab))]
			}
		}
		got, err := s.Search(ctx, memgate.Query{Text: text, Tags: tags, TagsMode: mode, Filter: filter, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		var want []memgate.Hit
		if text != "" {
			all, err := s.Search(ctx, memgate.Query{Text: text, Limit: memgate.MaxSearchLimit})
			if err != nil {
				t.Fatal(err)
			}
			if len(all.Hits) == memgate.MaxSearchLimit {
				t.Fatalf("query %d: the reference is cut at %d hits", q, len(all.Hits))
			}
			for _, h := range all.Hits {
				if pass(h.ID, tags, mode, filter) && len(want) < limit {
					want = append(want, h)
				}
			}
		} else {
			ids := listIDs(t, s, memgate.ListQuery{}, 1000)
			for _, id := range ids {
				if pass(id, tags, mode, filter) && len(want) < limit {
					want = append(want, memgate.Hit{Memory: memgate.Memory{ID: id}})
				}
			}
		}
		if len(got.Hits) != len(want) {
			t.Fatalf("query %d (%q %v %s %v limit %d): %d hits, want %d", q, text, tags, mode, filter, limit, len(got.Hits), len(want))
		}
		for i := range want {
			if got.Hits[i].ID != want[i].ID || got.Hits[i].LexicalScore != want[i].LexicalScore {
				t.Fatalf("query %d (%q %v %s %v): hit %d is %s (%v), want %s (%v)", q, text, tags, mode, filter, i,
					got.Hits[i].ID, got.Hits[i].LexicalScore, want[i].ID, want[i].LexicalScore)
			}
		}
		// A listing narrowed by the tags (all of them), in every order and
		// page by page, is the unnarrowed listing filtered.
		order := []string{memgate.OrderUpdatedDesc, memgate.OrderCreatedAsc, memgate.OrderCreatedDesc}[q%3]
		page := []int{1, 7, 100}[rng.IntN(3)]
		gotIDs := listIDs(t, s, memgate.ListQuery{Tags: tags, Filter: filter, Order: order}, page)
		var wantIDs []string
		for _, id := range listIDs(t, s, memgate.ListQuery{Order: order}, 1000) {
			if pass(id, tags, memgate.TagsAll, filter) {
				wantIDs = append(wantIDs, id)
			}
		}
		if !slices.Equal(gotIDs, wantIDs) {
			t.Fatalf("query %d: list %v %v %s by %d: %d memories %v, want %d %v", q, tags, filter, order, page,
				len(gotIDs), gotIDs, len(wantIDs), wantIDs)
		}
	}
}

// listIDs pages through a listing with pages of size.
func listIDs(t *testing.T, s *Store, q memgate.ListQuery, size int) []string {
	t.Helper()
	var out []string
	q.Limit = size
	for {
		p, err := s.List(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Memories {
			out = append(out, m.ID)
		}
		if p.NextCursor == "" {
			return out
		}
		q.Cursor = p.NextCursor
	}
}
