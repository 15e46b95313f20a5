package storage

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
)

// A store whose merged memories were forgotten answers every search and
// listing as a store that never held them — the same hits with the same
// scores — before the merge that purges them, after a reopen, and after
// that merge, which leaves no posting of them on disk.
func TestForgottenMergedMemoriesAreAsNeverWritten(t *testing.T) {
	for _, enc := range []bool{false, true} {
		t.Run(fmt.Sprint("encrypted ", enc), func(t *testing.T) {
			const n = 300
			opts := func(o *Options) {
				o.MergeEvery = n // the last write merges: every memory below is merged
				if enc {
					o.Encryption = encryption(t, "a passphrase")
				}
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "stores", "a", FileName)
			o := Options{NoSync: true}
			opts(&o)
			a, err := Open(path, o)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { a.Close() }()
			b := openTest(t, opts)
			ctx := context.Background()
			words := []string{"river", "stone", "cloud", "ember", "frost", "maple", "harbor", "lantern"}
			tags := []string{"team", "ops", "docs"}
			rng := rand.New(rand.NewPCG(5, 6))
			forget := map[string]bool{}
			writes := make([]memgate.Write, n)
			for i := range writes {
				text := ""
				for range 3 + rng.IntN(12) {
					text += words[rng.IntN(len(words))] + " "
				}
				w := memgate.Write{ID: fmt.Sprint("m", i), Text: text, Tags: []string{tags[rng.IntN(3)], "all"},
					Metadata: map[string]any{"k": i % 4}}
				writes[i] = w
				forget[w.ID] = rng.IntN(3) == 0
			}
			// A memory of stop words only has no term; it is gone all the same.
			writes[n/2].Text, writes[n/2].Tags, writes[n/2].Metadata = "the of and", nil, nil
			forget[writes[n/2].ID] = true
			for _, w := range writes {
				put(t, a, w)
			}
			if got := a.index.current().len(); got != 0 {
				t.Fatalf("tail holds %d documents after the merge, want 0", got)
			}
			for _, w := range writes {
				if forget[w.ID] {
					if err := a.Delete(ctx, w.ID, nil); err != nil {
						t.Fatal(err)
					}
				} else {
					put(t, b, w)
				}
			}
			if len(a.index.current().goneDocs()) == 0 {
				t.Fatal("no gone document: the forgets did not take the lazy path")
			}
			same := func(stage string) {
				t.Helper()
				for _, q := range []memgate.Query{
					{Text: "river stone", Limit: 50},
					{Text: "ember frost maple lantern harbor", Limit: 7},
					{Text: "cloud", Tags: []string{"ops"}, Limit: 20},
					{Text: "cloud river", Tags: []string{"team", "docs"}, TagsMode: memgate.TagsAny, Limit: 20},
					{Text: "maple", Filter: map[string]any{"k": 2}, Limit: 100},
					{Tags: []string{"all"}, Limit: 30},
					{Tags: []string{"docs", "all"}, Limit: 100},
				} {
					ra, err := a.Search(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					rb, err := b.Search(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(ids(ra.Hits), ids(rb.Hits)) {
						t.Fatalf("%s: search %+v: %v, never written: %v", stage, q, ids(ra.Hits), ids(rb.Hits))
					}
					for i := range ra.Hits {
						if math.Abs(ra.Hits[i].LexicalScore-rb.Hits[i].LexicalScore) > 1e-9 {
							t.Fatalf("%s: search %+v: hit %d scores %v, never written %v", stage, q, i, ra.Hits[i].LexicalScore, rb.Hits[i].LexicalScore)
						}
					}
				}
				for _, q := range []memgate.ListQuery{
					{Tags: []string{"ops"}, Limit: 500},
					{Tags: []string{"all"}, Order: memgate.OrderCreatedAsc, Limit: 500},
					{Filter: map[string]any{"k": 1}, Order: memgate.OrderCreatedDesc, Limit: 500},
				} {
					pa, err := a.List(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					pb, err := b.List(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(memoryIDs(pa.Memories), memoryIDs(pb.Memories)) {
						t.Fatalf("%s: list %+v: %v, never written: %v", stage, q, memoryIDs(pa.Memories), memoryIDs(pb.Memories))
					}
				}
			}
			same("before the merge")
			schema := func(s *Store) (v uint64) {
				t.Helper()
				if err := s.db.View(func(tx *bolt.Tx) error {
					v = binary.BigEndian.Uint64(tx.Bucket(bucketMeta).Get(metaSchema))
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				return v
			}
			if got := schema(a); got < schemaGone {
				t.Fatalf("schema %d with gone memories, want %d or later: memgate before it must refuse the store", got, schemaGone)
			}
			// A copy of the file as it is now, as after a crash: Close would
			// merge.
			copyPath := filepath.Join(dir, "stores", "copy", FileName)
			if err := os.MkdirAll(filepath.Dir(copyPath), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := a.db.View(func(tx *bolt.Tx) error { return tx.CopyFile(copyPath, 0o600) }); err != nil {
				t.Fatal(err)
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			o.MergeEvery = 1 << 20 // the reopened store merges only when told
			if a, err = Open(copyPath, o); err != nil {
				t.Fatal(err)
			}
			if len(a.index.current().goneDocs()) == 0 {
				t.Fatal("the gone documents were not loaded at open")
			}
			same("after a reopen")
			if err := a.write.do(func(*txn) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if !a.index.tryMerge() {
				t.Fatal("merge failed")
			}
			same("after the merge")
			// A store created now is at schemaFolded for good (reindex.go):
			// the merge leaves it there, as it lowers schemaGone to schemaBase.
			if got := schema(a); got != schemaFolded {
				t.Fatalf("schema %d after the merge, want %d", got, schemaFolded)
			}
			err = a.view(func(v *view) error {
				if v.tx.Bucket(bucketGone) != nil {
					t.Error("the gone bucket outlived the merge")
				}
				for _, term := range [][]byte{a.seal.key(kindWord, "river"), a.seal.key(kindTag, "all")} {
					ps, err := readPostings(v.postings, v.seal, term, nil)
					if err != nil {
						return err
					}
					for _, p := range ps {
						if _, err := (&txn{s: a, docs: v.tx.Bucket(bucketDocs)}).record(p.doc); err != nil {
							t.Errorf("a posting of document %d, which has no record, is still on disk", p.doc)
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func memoryIDs(ms []memgate.Memory) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// A reader sees its snapshot: a forget committed while it reads does not
// hide the memory from it, nor change a term's document frequency. The
// forget leaves the chunks as they were, so the older snapshot is this
// store's view with the sequence it had before.
func TestForgetOfMergedMemoryKeepsOlderSnapshots(t *testing.T) {
	s := openTest(t, func(o *Options) { o.MergeEvery = 2 })
	ctx := context.Background()
	put(t, s, memgate.Write{ID: "a", Text: "quartz garden"})
	put(t, s, memgate.Write{ID: "b", Text: "quartz meadow"})
	term := s.seal.key(kindWord, "quartz")
	var before uint64
	if err := s.view(func(v *view) error { before = v.seq; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "a", nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		older      bool
		list, gone int
	}{{true, 2, 0}, {false, 1, 1}} {
		err := s.view(func(v *view) error {
			if tc.older {
				v.seq = before
			}
			ps, err := v.list(term, nil)
			if err != nil {
				return err
			}
			if len(ps) != tc.list || v.goneDF(term) != tc.gone {
				t.Errorf("older %v: the snapshot lists %d postings, %d gone; want %d and %d", tc.older, len(ps), v.goneDF(term), tc.list, tc.gone)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A forget whose commit fails leaves no gone document behind in the tail.
func TestFailedForgetLeavesNoGoneDocument(t *testing.T) {
	s := openTest(t, func(o *Options) { o.MergeEvery = 1 })
	put(t, s, memgate.Write{ID: "a", Text: "quartz garden"})
	boom := fmt.Errorf("boom")
	err := s.write.do(func(t2 *txn) error {
		old, doc, err := t2.lookup("a")
		if err != nil {
			return err
		}
		stamp, err := t2.nextDoc()
		if err != nil {
			return err
		}
		if err := t2.remove(&old, doc, stamp); err != nil {
			return err
		}
		return boom
	})
	if err == nil {
		t.Fatal("the failing write succeeded")
	}
	if g := s.index.current().goneDocs(); len(g) != 0 {
		t.Fatalf("gone documents after a failed forget: %v", g)
	}
	if _, err := s.Get(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
}

// purge leaves each list as encoding its other postings would, whichever
// documents it takes out of however many chunks.
func TestPurgeEqualsReencoding(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	db, err := bolt.Open(filepath.Join(t.TempDir(), "p.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for round := range 200 {
		term := []byte(fmt.Sprintf("t%03d", round))
		n := 1 + r.IntN(4*chunkSize)
		ps := make([]posting, n)
		doc := uint64(1 + r.IntN(100))
		for i := range ps {
			if i > 0 {
				doc += 1 + uint64(r.IntN([]int{1, 50, 1 << 20}[r.IntN(3)]))
			}
			ps[i] = posting{doc: doc, tf: uint32(1 + r.IntN(9)), docLen: uint32(r.IntN(500))}
		}
		var cut []uint64
		want := []posting{}
		for _, p := range ps {
			if r.IntN(4) == 0 {
				cut = append(cut, p.doc)
			} else {
				want = append(want, p)
			}
			if r.IntN(10) == 0 && !slices.ContainsFunc(ps, func(q posting) bool { return q.doc == p.doc+1 }) {
				cut = append(cut, p.doc+1) // a document that is not in the list
			}
		}
		cut = append([]uint64{0}, cut...)
		cut = append(cut, math.MaxUint64)
		slices.Sort(cut)
		cut = slices.Compact(cut)
		err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bucketPostings)
			if err != nil {
				return err
			}
			w := postingsWriter{b: b, seal: plainSealer{}}
			if err := w.appendTerm(term, ps); err != nil {
				return err
			}
			_, err = w.purge(term, cut, nil)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		err = db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketPostings)
			got, err := readPostings(b, plainSealer{}, term, nil)
			if err != nil {
				return err
			}
			if !slices.Equal(got, want) {
				t.Fatalf("round %d: %d postings left, want %d", round, len(got), len(want))
			}
			c := b.Cursor()
			for k, v := c.Seek(term); k != nil && len(k) == len(term)+8 && string(k[:len(term)]) == string(term); k, v = c.Next() {
				first := chunkKeyDoc(k, term)
				got, ok := appendChunk(nil, first, v)
				if !ok || len(got) == 0 || got[0].doc != first {
					t.Fatalf("round %d: chunk %d does not start at its key", round, first)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func chunkKeyDoc(k, term []byte) uint64 {
	var d uint64
	for _, c := range k[len(term):] {
		d = d<<8 | uint64(c)
	}
	return d
}
