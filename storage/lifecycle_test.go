package storage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate"
)

// clock is a test clock that moves only when told.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) now() time.Time                               { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) add(d time.Duration)                          { c.ns.Add(int64(d)) }
func (c *clock) opt() func(o *Options)                        { return func(o *Options) { o.Now = c.now } }
func ttl(d time.Duration) memgate.Write                       { return memgate.Write{TTL: d} }
func expiring(w memgate.Write, d time.Duration) memgate.Write { w.TTL = d; return w }

// An expired memory is gone for every reader from its expiry instant, and
// gone from the file after a sweep: under --encrypt no byte of it is left
// readable, and the store's counters no longer count it.
func TestExpiredMemoryIsGoneAtOnceAndSweptFromDisk(t *testing.T) {
	for _, enc := range []bool{false, true} {
		t.Run(fmt.Sprint("encrypted ", enc), func(t *testing.T) {
			c := newClock()
			opts := []func(*Options){c.opt(), func(o *Options) { o.MergeEvery = 3 }}
			if enc {
				opts = append(opts, encrypted(t, "a passphrase"))
			}
			s := openTest(t, opts...)
			ctx := context.Background()
			put(t, s, memgate.Write{ID: "keep", Text: "the harbour lantern stays lit", Tags: []string{"note"}})
			put(t, s, expiring(memgate.Write{ID: "brief", Text: "the Quixotrambulation lantern is temporary", Tags: []string{"note"}}, time.Minute))
			at := time.Date(2026, 12, 2, 12, 0, 30, 0, time.UTC)
			put(t, s, memgate.Write{ID: "dated", Text: "a dated lantern", ExpiresAt: &at})
			m, err := s.Get(ctx, "brief")
			if err != nil || m.ExpiresAt == nil || !m.ExpiresAt.Equal(c.now().Add(time.Minute)) {
				t.Fatalf("get before expiry: %+v %v", m, err)
			}
			visible := func(want int) {
				t.Helper()
				res, err := s.Search(ctx, memgate.Query{Text: "lantern", Limit: 10})
				if err != nil || len(res.Hits) != want {
					t.Fatalf("search: %d hits %v, want %d", len(res.Hits), err, want)
				}
				res, _ = s.Search(ctx, memgate.Query{Tags: []string{"note"}})
				page, _ := s.List(ctx, memgate.ListQuery{})
				created, _ := s.List(ctx, memgate.ListQuery{Order: memgate.OrderCreatedAsc})
				tagged, _ := s.List(ctx, memgate.ListQuery{Tags: []string{"note"}})
				st, _ := s.Stats(ctx)
				var out bytes.Buffer
				n, _, _ := s.Export(ctx, &out, "", 0)
				if len(page.Memories) != want || len(created.Memories) != want || st.Count != int64(want) || n != want {
					t.Fatalf("list %d, created %d, stats %d, export %d; want %d", len(page.Memories), len(created.Memories), st.Count, n, want)
				}
				if want == 1 && (len(tagged.Memories) != 1 || len(res.Hits) != 1) {
					t.Fatalf("narrowed: list %d, search %d", len(tagged.Memories), len(res.Hits))
				}
			}
			visible(3)
			c.add(30 * time.Second) // "dated" expires at this instant
			if _, err := s.Get(ctx, "dated"); memgate.ErrorCode(err) != memgate.CodeNotFound {
				t.Fatalf("get at the expiry instant: %v", err)
			}
			visible(2)
			c.add(30 * time.Second)
			visible(1)
			if _, err := s.Get(ctx, "brief"); memgate.ErrorCode(err) != memgate.CodeNotFound {
				t.Fatalf("get after expiry: %v", err)
			}
			if err := s.Delete(ctx, "brief", nil); memgate.ErrorCode(err) != memgate.CodeNotFound {
				t.Fatalf("forget after expiry: %v", err)
			}
			// Writing the id of an expired memory creates it anew.
			if _, created, err := s.Put(ctx, memgate.Write{ID: "dated", Text: "back"}); err != nil || !created {
				t.Fatalf("rewrite of an expired id: created %v %v", created, err)
			}
			expired, _, err := s.Sweep(ctx, 0)
			if err != nil || expired != 1 {
				t.Fatalf("sweep: %d %v, want 1", expired, err)
			}
			if n, _, _ := s.Sweep(ctx, 0); n != 0 {
				t.Fatalf("a second sweep deleted %d", n)
			}
			st, _ := s.Stats(ctx)
			if st.Count != 2 {
				t.Fatalf("count after the sweep: %d", st.Count)
			}
			if enc {
				if !s.index.tryMerge() {
					t.Fatal("merge failed")
				}
				s.Close()
				raw, err := os.ReadFile(s.Path())
				if err != nil {
					t.Fatal(err)
				}
				for _, needle := range []string{"Quixotrambulation", "quixotrambul", "brief", "temporary"} {
					if bytes.Contains(bytes.ToLower(raw), []byte(strings.ToLower(needle))) {
						t.Errorf("the encrypted file holds %q", needle)
					}
				}
			}
		})
	}
}

// A TTL and an expiry time are refused together, out of range, and in the
// past; at the bounds they are taken.
func TestExpiryRules(t *testing.T) {
	c := newClock()
	s := openTest(t, c.opt())
	ctx := context.Background()
	now := c.now()
	for _, tc := range []struct {
		w     memgate.Write
		field string
	}{
		{memgate.Write{TTL: time.Second, ExpiresAt: ptr(now.Add(time.Hour))}, "ttl_seconds"},
		{memgate.Write{TTL: time.Second - 1}, "ttl_seconds"},
		{memgate.Write{TTL: (memgate.MaxTTLSeconds + 1) * time.Second}, "ttl_seconds"},
		{memgate.Write{ExpiresAt: &now}, "expires_at"},
		{memgate.Write{ExpiresAt: ptr(now.Add(-time.Second))}, "expires_at"},
	} {
		tc.w.Text = "x"
		_, _, err := s.Put(ctx, tc.w)
		wantCode(t, err, memgate.CodeInvalidArgument, tc.field)
	}
	for _, w := range []memgate.Write{
		{TTL: time.Second}, {TTL: memgate.MaxTTLSeconds * time.Second}, {ExpiresAt: ptr(now.Add(time.Nanosecond))},
	} {
		w.Text = fmt.Sprint("ok ", w.TTL, w.ExpiresAt)
		if _, _, err := s.Put(ctx, w); err != nil {
			t.Fatalf("%+v: %v", w, err)
		}
	}
}

// A remember without id whose normalised text equals a live memory's
// stores nothing and returns that memory; allow_duplicate, an id or an
// if_version store it; an expired memory is no duplicate.
func TestDuplicates(t *testing.T) {
	c := newClock()
	s := openTest(t, c.opt())
	ctx := context.Background()
	first, err := s.Write(ctx, memgate.Write{Text: "  Café  au\tLAIT\n"})
	if err != nil || !first.Created || first.Deduplicated {
		t.Fatalf("first: %+v %v", first, err)
	}
	for _, text := range []string{"café au lait", "CAFÉ AU LAIT", "Cafe\u0301 au lait", "café\n\n au   lait  "} {
		again, err := s.Write(ctx, memgate.Write{Text: text, Tags: []string{"other"}})
		if err != nil || again.Created || !again.Deduplicated || again.Memory.ID != first.Memory.ID ||
			again.Memory.Version != first.Memory.Version {
			t.Fatalf("%q: %+v %v", text, again, err)
		}
	}
	if w, _ := s.Write(ctx, memgate.Write{Text: "café au laits"}); w.Deduplicated {
		t.Fatal("a different text was taken for a duplicate")
	}
	for _, w := range []memgate.Write{
		{Text: "café au lait", AllowDuplicate: true},
		{Text: "café au lait", ID: "mine"},
		{Text: "café au lait", IfVersion: ptr(int64(0))},
	} {
		if got, err := s.Write(ctx, w); err != nil || got.Deduplicated || !got.Created {
			t.Fatalf("%+v: %+v %v", w, got, err)
		}
	}
	// Forget them all: the next write is no duplicate of a forgotten one.
	page, _ := s.List(ctx, memgate.ListQuery{})
	for _, m := range page.Memories {
		if err := s.Delete(ctx, m.ID, nil); err != nil {
			t.Fatal(err)
		}
	}
	put(t, s, expiring(memgate.Write{Text: "short lived"}, time.Minute))
	if w, _ := s.Write(ctx, memgate.Write{Text: "café au lait"}); w.Deduplicated {
		t.Fatal("a forgotten memory was taken for a duplicate")
	}
	c.add(time.Minute)
	if w, _ := s.Write(ctx, memgate.Write{Text: "short lived"}); w.Deduplicated || !w.Created {
		t.Fatalf("an expired memory was taken for a duplicate: %+v", w)
	}
}

// 64 writers of the same text at once store one memory.
func TestConcurrentDuplicatesStoreOne(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	ids := make([]string, 64)
	for i := range ids {
		wg.Go(func() {
			w, err := s.Write(ctx, memgate.Write{Text: "the same note, again and again"})
			if err != nil {
				t.Error(err)
			}
			ids[i] = w.Memory.ID
		})
	}
	wg.Wait()
	if st, _ := s.Stats(ctx); st.Count != 1 {
		t.Fatalf("%d memories stored", st.Count)
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("writers were answered with different memories: %s, %s", ids[0], id)
		}
	}
}

// Quotas refuse at N+1 and take N; a replace counts its difference; 64
// concurrent writers never pass them; an import stops at them with its
// report.
func TestQuotas(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, func(o *Options) { o.MaxMemories = 3; o.MaxBytes = 30 })
	for i := range 3 {
		put(t, s, memgate.Write{ID: fmt.Sprint("m", i), Text: "ten bytes!"})
	}
	_, _, err := s.Put(ctx, memgate.Write{Text: "x"})
	wantCode(t, err, memgate.CodeQuotaExceeded, "")
	if d := memgate.AsError("", err).Details; d["kind"] != "memories" || d["limit"] != int64(3) {
		t.Fatalf("details %v", d)
	}
	// A replace adds no memory; its bytes count by their difference.
	put(t, s, memgate.Write{ID: "m0", Text: "ten bytes?"})
	_, _, err = s.Put(ctx, memgate.Write{ID: "m0", Text: "eleven bytes"})
	wantCode(t, err, memgate.CodeQuotaExceeded, "")
	if d := memgate.AsError("", err).Details; d["kind"] != "bytes" || d["limit"] != int64(30) {
		t.Fatalf("details %v", d)
	}
	put(t, s, memgate.Write{ID: "m0", Text: "short"})
	put(t, s, memgate.Write{ID: "m1", Text: "fifteen bytes.."}) // 5 + 15 + 10 = 30: at the quota
	if err := s.Delete(ctx, "m2", nil); err != nil {
		t.Fatal(err)
	}
	put(t, s, memgate.Write{Text: "tenbytes!!"})

	c := openTest(t, func(o *Options) { o.MaxMemories = 10 })
	var wg sync.WaitGroup
	var refused atomic.Int32
	for i := range 64 {
		wg.Go(func() {
			_, _, err := c.Put(ctx, memgate.Write{Text: fmt.Sprint("writer ", i)})
			if memgate.ErrorCode(err) == memgate.CodeQuotaExceeded {
				refused.Add(1)
			} else if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if st, _ := c.Stats(ctx); st.Count != 10 || refused.Load() != 54 {
		t.Fatalf("%d stored, %d refused; want 10 and 54", st.Count, refused.Load())
	}

	imp := openTest(t, func(o *Options) { o.MaxMemories = 1500 })
	var lines strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&lines, "{\"id\":\"i%d\",\"text\":\"line %d\"}\n", i, i)
	}
	rep, err := imp.Import(ctx, strings.NewReader(lines.String()), ImportSkip)
	wantCode(t, err, memgate.CodeQuotaExceeded, "")
	if st, _ := imp.Stats(ctx); rep.Imported != 1500 || st.Count != 1500 {
		t.Fatalf("import report %+v, %d stored; want 1500", rep, st.Count)
	}
}

// With a retention, forget keeps the memory in the trash: invisible to
// every reader, listed, restored with its id and fields as a new version,
// refused over a live memory of its id, and purged after the retention.
func TestTrash(t *testing.T) {
	c := newClock()
	s := openTest(t, c.opt(), func(o *Options) { o.TrashRetention = time.Hour })
	ctx := context.Background()
	src := &memgate.Source{Kind: "conversation", Reference: "chat 7", Actor: "ana"}
	m := put(t, s, memgate.Write{ID: "a", Text: "the lantern note", Title: "Lantern", Tags: []string{"x"}, Source: src})
	put(t, s, memgate.Write{ID: "b", Text: "another note"})
	for _, id := range []string{"a", "b"} {
		if err := s.Delete(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
		c.add(time.Minute)
	}
	if _, err := s.Get(ctx, "a"); memgate.ErrorCode(err) != memgate.CodeNotFound {
		t.Fatalf("get of a trashed memory: %v", err)
	}
	if res, _ := s.Search(ctx, memgate.Query{Text: "lantern"}); len(res.Hits) != 0 {
		t.Fatal("search finds a trashed memory")
	}
	page, err := s.Trash(ctx, "", 1)
	if err != nil || len(page.Memories) != 1 || page.Memories[0].Memory.ID != "a" || page.NextCursor == "" {
		t.Fatalf("trash page 1: %+v %v", page, err)
	}
	next, _ := s.Trash(ctx, page.NextCursor, 10)
	if len(next.Memories) != 1 || next.Memories[0].Memory.ID != "b" || next.NextCursor != "" {
		t.Fatalf("trash page 2: %+v", next)
	}
	put(t, s, memgate.Write{ID: "a", Text: "a new a"})
	_, err = s.Restore(ctx, "a")
	wantCode(t, err, memgate.CodeVersionConflict, "")
	if err := s.Delete(ctx, "a", nil); err != nil { // the new a goes to the trash, replacing the old
		t.Fatal(err)
	}
	r, err := s.Restore(ctx, "a")
	if err != nil || r.Text != "a new a" || r.Version <= m.Version {
		t.Fatalf("restore: %+v %v", r, err)
	}
	_, err = s.Restore(ctx, "a")
	wantCode(t, err, memgate.CodeNotFound, "")
	if res, _ := s.Search(ctx, memgate.Query{Text: "new"}); len(res.Hits) != 1 {
		t.Fatal("the restored memory is not searchable")
	}
	c.add(time.Hour)
	if _, purged, err := s.Sweep(ctx, time.Hour); err != nil || purged != 1 {
		t.Fatalf("sweep purged %d (%v), want b", purged, err)
	}
	if page, _ := s.Trash(ctx, "", 10); len(page.Memories) != 0 {
		t.Fatalf("trash after the retention: %+v", page)
	}
	if err := s.Delete(ctx, "a", nil); err != nil {
		t.Fatal(err)
	}
	if n, err := s.EmptyTrash(ctx); err != nil || n != 1 {
		t.Fatalf("empty trash: %d %v", n, err)
	}
}

// A source is stored, returned, exported and imported, and search narrows
// by its kind.
func TestSourceRoundTripAndNarrowing(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	seen := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	src := memgate.Source{Kind: "url", Reference: "https://example.org/a", Actor: "crawler", ObservedAt: &seen}
	put(t, s, memgate.Write{ID: "web", Text: "lantern from the web", Source: &src})
	put(t, s, memgate.Write{ID: "chat", Text: "lantern from a chat", Source: &memgate.Source{Kind: "conversation", Reference: "c", Actor: "ana"}})
	put(t, s, memgate.Write{ID: "none", Text: "lantern from nowhere"})
	m, _ := s.Get(ctx, "web")
	if m.Source == nil || *m.Source.ObservedAt != seen || m.Source.Reference != src.Reference {
		t.Fatalf("source: %+v", m.Source)
	}
	res, err := s.Search(ctx, memgate.Query{Text: "lantern", SourceKind: "url"})
	if err != nil || len(res.Hits) != 1 || res.Hits[0].ID != "web" {
		t.Fatalf("source_kind url: %v %v", ids(res.Hits), err)
	}
	res, _ = s.Search(ctx, memgate.Query{SourceKind: "conversation"})
	if len(res.Hits) != 1 || res.Hits[0].ID != "chat" {
		t.Fatalf("source_kind alone: %v", ids(res.Hits))
	}
	var out bytes.Buffer
	if _, _, err := s.Export(ctx, &out, "", 0); err != nil {
		t.Fatal(err)
	}
	other := openTest(t)
	if _, err := other.Import(ctx, &out, ImportFail); err != nil {
		t.Fatal(err)
	}
	back, _ := other.Get(ctx, "web")
	if back.Source == nil || *back.Source.ObservedAt != seen || back.Source.Kind != "url" {
		t.Fatalf("imported source: %+v", back.Source)
	}
	for _, tc := range []struct {
		src   memgate.Source
		field string
	}{
		{memgate.Source{Kind: strings.Repeat("k", 33), Reference: "r", Actor: "a"}, "source.kind"},
		{memgate.Source{Kind: "Url", Reference: "r", Actor: "a"}, "source.kind"},
		{memgate.Source{Kind: "url", Reference: strings.Repeat("é", 1025), Actor: "a"}, "source.reference"},
		{memgate.Source{Kind: "url", Reference: "r", Actor: strings.Repeat("a", 257)}, "source.actor"},
		{memgate.Source{Kind: "url", Reference: "", Actor: "a"}, "source.reference"},
	} {
		_, _, err := s.Put(ctx, memgate.Write{Text: "x", Source: &tc.src})
		wantCode(t, err, memgate.CodeInvalidArgument, tc.field)
	}
	for _, src := range []memgate.Source{
		{Kind: strings.Repeat("k", 32), Reference: strings.Repeat("é", 1024), Actor: strings.Repeat("a", 256)},
	} {
		if _, _, err := s.Put(ctx, memgate.Write{Text: "at the bounds", Source: &src}); err != nil {
			t.Fatal(err)
		}
	}
}
