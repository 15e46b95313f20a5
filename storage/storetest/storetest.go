// Package storetest is the contract of a memgate store, as one test suite
// that every storage backend runs (bbolt's in package storage): versions,
// compare-and-set, quotas, duplicates, expiry, the trash, candidates,
// search, listing and export/import, as SPEC §1–§4 say them, through the
// store's methods alone. A backend's own tests cover what is its own (file
// formats, crash safety, sealing on disk).
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
)

// Store is what a backend's store offers the rest of memgate.
type Store interface {
	Write(ctx context.Context, w memgate.Write) (memgate.Written, error)
	Delete(ctx context.Context, id string, ifVersion *int64) error
	Get(ctx context.Context, id string) (memgate.Memory, error)
	List(ctx context.Context, q memgate.ListQuery) (memgate.Page, error)
	Search(ctx context.Context, q memgate.Query) (memgate.Result, error)
	Stats(ctx context.Context) (memgate.StoreStats, error)
	Propose(ctx context.Context, w memgate.Write) (memgate.Memory, error)
	Candidates(ctx context.Context, cursor string, limit int) (memgate.Page, error)
	Approve(ctx context.Context, id string) (memgate.Memory, error)
	Reject(ctx context.Context, id string) error
	Trash(ctx context.Context, cursor string, limit int) (storage.TrashPage, error)
	Restore(ctx context.Context, id string) (memgate.Memory, error)
	EmptyTrash(ctx context.Context) (int, error)
	Export(ctx context.Context, w io.Writer, cursor string, limit int) (int, string, error)
	Import(ctx context.Context, r io.Reader, onConflict string) (storage.ImportReport, error)
	Sweep(ctx context.Context, retention time.Duration) (expired, purged int, err error)
}

// Open returns a new, empty store with o, closed when the test ends.
type Open func(t *testing.T, o storage.Options) Store

// Run runs the contract on stores that open makes.
func Run(t *testing.T, open Open) {
	for _, c := range []struct {
		name string
		test func(*testing.T, Open)
	}{
		{"Versions", versions},
		{"CompareAndSet", compareAndSet},
		{"CompareAndSetRace", compareAndSetRace},
		{"QuotaOfMemories", quotaOfMemories},
		{"QuotaOfBytes", quotaOfBytes},
		{"QuotaUnderConcurrency", quotaUnderConcurrency},
		{"Duplicates", duplicates},
		{"Expiry", expiry},
		{"Trash", trash},
		{"TrashMeetsExpiry", trashMeetsExpiry},
		{"ExpiredMemoriesLeaveTheQuota", expiredLeaveTheQuota},
		{"Candidates", candidates},
		{"Search", search},
		{"ListPages", listPages},
		{"ExportImport", exportImport},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					f, ok := r.(failure)
					if !ok {
						panic(r)
					}
					t.Fatalf("%s: %v", f.at, f.err)
				}
			}()
			c.test(t, open)
		})
	}
}

// clock is a test's time, moved by hand.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) now() time.Time            { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) add(d time.Duration)       { c.ns.Add(int64(d)) }
func version(v int64) *int64               { return &v }
func write(text string) memgate.Write      { return memgate.Write{Text: text} }
func withID(id, text string) memgate.Write { return memgate.Write{ID: id, Text: text} }

// must returns v, or ends the test (through Run) with err and where it came.
func must[T any](v T, err error) T {
	if err != nil {
		_, file, line, _ := runtime.Caller(1)
		panic(failure{fmt.Sprintf("%s:%d", filepath.Base(file), line), err})
	}
	return v
}

// failure is a must that failed.
type failure struct {
	at  string
	err error
}

func wantCode(t *testing.T, err error, code memgate.Code) {
	t.Helper()
	if got := memgate.ErrorCode(err); got != code {
		t.Fatalf("got %v (%s), want %s", err, got, code)
	}
}

func ids(ms []memgate.Memory) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func hitIDs(r memgate.Result) []string {
	out := make([]string, len(r.Hits))
	for i, h := range r.Hits {
		out[i] = h.ID
	}
	return out
}

// Every write takes the next version of one counter, which never repeats,
// not even for an id forgotten and written again; a replace keeps
// created_at.
func versions(t *testing.T, open Open) {
	ctx, c := context.Background(), newClock()
	s := open(t, storage.Options{Now: c.now})
	a := must(s.Write(ctx, withID("a", "first text"))).Memory
	c.add(time.Second)
	b := must(s.Write(ctx, withID("b", "second text"))).Memory
	c.add(time.Second)
	a2 := must(s.Write(ctx, withID("a", "first text, replaced")))
	if a2.Created || !(a.Version < b.Version && b.Version < a2.Memory.Version) {
		t.Fatalf("versions %d %d %d, created %v", a.Version, b.Version, a2.Memory.Version, a2.Created)
	}
	if !a2.Memory.CreatedAt.Equal(a.CreatedAt) || !a2.Memory.UpdatedAt.After(a.UpdatedAt) {
		t.Fatalf("times of a replace: %v %v, was %v %v", a2.Memory.CreatedAt, a2.Memory.UpdatedAt, a.CreatedAt, a.UpdatedAt)
	}
	if err := s.Delete(ctx, "b", nil); err != nil {
		t.Fatal(err)
	}
	b2 := must(s.Write(ctx, withID("b", "second text again")))
	if !b2.Created || b2.Memory.Version <= a2.Memory.Version {
		t.Fatalf("b written again: %+v", b2)
	}
	got := must(s.Get(ctx, "a"))
	if got.Text != "first text, replaced" || got.Version != a2.Memory.Version {
		t.Fatalf("get %+v", got)
	}
	wantCode(t, s.Delete(ctx, "nobody", nil), memgate.CodeNotFound)
	_, err := s.Get(ctx, "nobody")
	wantCode(t, err, memgate.CodeNotFound)
}

// if_version writes only over that version; 0 only where there is none.
func compareAndSet(t *testing.T, open Open) {
	ctx := context.Background()
	s := open(t, storage.Options{})
	w := withID("k", "one")
	w.IfVersion = version(0)
	m := must(s.Write(ctx, w)).Memory
	_, err := s.Write(ctx, w)
	wantCode(t, err, memgate.CodeVersionConflict)
	w = withID("k", "two")
	w.IfVersion = version(m.Version + 1)
	_, err = s.Write(ctx, w)
	wantCode(t, err, memgate.CodeVersionConflict)
	w.IfVersion = version(m.Version)
	m2 := must(s.Write(ctx, w)).Memory
	wantCode(t, s.Delete(ctx, "k", version(m.Version)), memgate.CodeVersionConflict)
	if err := s.Delete(ctx, "k", version(m2.Version)); err != nil {
		t.Fatal(err)
	}
	w = withID("gone", "x")
	w.IfVersion = version(3)
	_, err = s.Write(ctx, w)
	wantCode(t, err, memgate.CodeVersionConflict)
}

// Of writers racing with the same version read, exactly one wins.
func compareAndSetRace(t *testing.T, open Open) {
	ctx := context.Background()
	s := open(t, storage.Options{})
	m := must(s.Write(ctx, withID("k", "start"))).Memory
	for round := range 5 {
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				w := withID("k", fmt.Sprintf("round %d writer %d", round, i))
				w.IfVersion = version(m.Version)
				_, err := s.Write(ctx, w)
				switch memgate.ErrorCode(err) {
				case "":
					wins.Add(1)
				case memgate.CodeVersionConflict:
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d winners", round, wins.Load())
		}
		m = must(s.Get(ctx, "k"))
	}
}

func quotaOfMemories(t *testing.T, open Open) {
	ctx := context.Background()
	s := open(t, storage.Options{MaxMemories: 3})
	for i := range 3 {
		must(s.Write(ctx, withID(fmt.Sprint(i), fmt.Sprint("memory number ", i))))
	}
	_, err := s.Write(ctx, write("one too many"))
	wantCode(t, err, memgate.CodeQuotaExceeded)
	var e *memgate.Error
	if errors.As(err, &e); e.Details["kind"] != "memories" || fmt.Sprint(e.Details["limit"]) != "3" {
		t.Fatalf("details %v", e.Details)
	}
	// At the limit a replace still goes; a forget makes room.
	must(s.Write(ctx, withID("0", "memory number 0, replaced")))
	if err := s.Delete(ctx, "1", nil); err != nil {
		t.Fatal(err)
	}
	must(s.Write(ctx, write("room again")))
	if st := must(s.Stats(ctx)); st.Count != 3 {
		t.Fatalf("count %d", st.Count)
	}
}

func quotaOfBytes(t *testing.T, open Open) {
	ctx := context.Background()
	s := open(t, storage.Options{MaxBytes: 100})
	must(s.Write(ctx, withID("a", strings.Repeat("a", 60))))
	must(s.Write(ctx, withID("b", strings.Repeat("b", 40)))) // 100: at the limit
	_, err := s.Write(ctx, write("c"))
	wantCode(t, err, memgate.CodeQuotaExceeded)
	var e *memgate.Error
	if errors.As(err, &e); e.Details["kind"] != "bytes" || fmt.Sprint(e.Details["limit"]) != "100" {
		t.Fatalf("details %v", e.Details)
	}
	_, err = s.Write(ctx, withID("b", strings.Repeat("b", 41))) // a replace that grows past it
	wantCode(t, err, memgate.CodeQuotaExceeded)
	must(s.Write(ctx, withID("b", strings.Repeat("b", 39)))) // one that shrinks
	if st := must(s.Stats(ctx)); st.Bytes != 99 || st.Count != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// Concurrent writers never take a store past its quota.
func quotaUnderConcurrency(t *testing.T, open Open) {
	ctx := context.Background()
	s := open(t, storage.Options{MaxMemories: 10})
	var stored atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 4 {
				_, err := s.Write(ctx, write(fmt.Sprintf("writer %d memory %d", i, j)))
				switch memgate.ErrorCode(err) {
				case "":
					stored.Add(1)
				case memgate.CodeQuotaExceeded:
				default:
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if st := must(s.Stats(ctx)); st.Count != 10 || stored.Load() != 10 {
		t.Fatalf("stored %d, count %d", stored.Load(), st.Count)
	}
}

// A write of a live memory's text (by case, white space and Unicode
// normalisation) stores nothing and answers that memory, unless it asks to;
// concurrent identical writes store one.
func duplicates(t *testing.T, open Open) {
	ctx := context.Background()
	s := open(t, storage.Options{})
	first := must(s.Write(ctx, write("Deploys happen on Tuesdays.")))
	for _, text := range []string{"Deploys happen on Tuesdays.", "  deploys   HAPPEN on tuesdays. ", "Deploys happen on Tuesdays.\n"} {
		got := must(s.Write(ctx, write(text)))
		if got.Created || !got.Deduplicated || got.Memory.ID != first.Memory.ID || got.Memory.Version != first.Memory.Version {
			t.Fatalf("%q: %+v", text, got)
		}
	}
	cafe := must(s.Write(ctx, write("Caf\u00e9 at noon")))
	if got := must(s.Write(ctx, write("Cafe\u0301 at noon"))); !got.Deduplicated || got.Memory.ID != cafe.Memory.ID {
		t.Fatalf("NFD of a stored NFC text: %+v", got)
	}
	w := write("Deploys happen on Tuesdays.")
	w.AllowDuplicate = true
	if got := must(s.Write(ctx, w)); !got.Created || got.Deduplicated || got.Memory.ID == first.Memory.ID {
		t.Fatalf("allow_duplicate: %+v", got)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if _, err := s.Write(ctx, write("one of sixteen identical writes")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	res := must(s.Search(ctx, memgate.Query{Text: "sixteen identical writes", Limit: 100}))
	if len(res.Hits) != 1 {
		t.Fatalf("%d memories of sixteen identical writes", len(res.Hits))
	}
}

// An expired memory is gone for every reader at once, and the sweep
// deletes it; its id can be written anew.
func expiry(t *testing.T, open Open) {
	ctx, c := context.Background(), newClock()
	s := open(t, storage.Options{Now: c.now})
	w := withID("brief", "a brief memory about lanterns")
	w.TTL = time.Minute
	m := must(s.Write(ctx, w)).Memory
	if m.ExpiresAt == nil || !m.ExpiresAt.Equal(c.now().Add(time.Minute)) {
		t.Fatalf("expires_at %v", m.ExpiresAt)
	}
	must(s.Write(ctx, withID("kept", "a lasting memory about lanterns")))
	if n, _, err := s.Sweep(ctx, 0); err != nil || n != 0 {
		t.Fatalf("sweep before the expiry: %d %v", n, err)
	}
	c.add(time.Minute)
	_, err := s.Get(ctx, "brief")
	wantCode(t, err, memgate.CodeNotFound)
	if got := hitIDs(must(s.Search(ctx, memgate.Query{Text: "lanterns"}))); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("search %v", got)
	}
	for _, order := range []string{memgate.OrderUpdatedDesc, memgate.OrderCreatedAsc, memgate.OrderCreatedDesc} {
		if got := ids(must(s.List(ctx, memgate.ListQuery{Order: order})).Memories); !slices.Equal(got, []string{"kept"}) {
			t.Fatalf("list %s: %v", order, got)
		}
	}
	if st := must(s.Stats(ctx)); st.Count != 1 {
		t.Fatalf("count %d", st.Count)
	}
	wantCode(t, s.Delete(ctx, "brief", nil), memgate.CodeNotFound)
	if n, _, err := s.Sweep(ctx, 0); err != nil || n != 1 {
		t.Fatalf("sweep after the expiry: %d %v", n, err)
	}
	if got := must(s.Write(ctx, withID("brief", "written anew"))); !got.Created {
		t.Fatalf("an expired id written again: %+v", got)
	}
	past := c.now().Add(-time.Second)
	w = withID("late", "already over")
	w.ExpiresAt = &past
	_, err = s.Write(ctx, w)
	wantCode(t, err, memgate.CodeInvalidArgument)
}

// A forgotten memory waits in the trash for its retention: a restore brings
// it back as a new version, and the sweep purges it after.
func trash(t *testing.T, open Open) {
	ctx, c := context.Background(), newClock()
	s := open(t, storage.Options{Now: c.now, TrashRetention: time.Hour})
	m := must(s.Write(ctx, memgate.Write{ID: "t", Text: "a memory to forget", Title: "Forget me", Tags: []string{"x"}}))
	if err := s.Delete(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get(ctx, "t")
	wantCode(t, err, memgate.CodeNotFound)
	page := must(s.Trash(ctx, "", 10))
	if len(page.Memories) != 1 || page.Memories[0].Memory.Text != "a memory to forget" {
		t.Fatalf("trash %+v", page)
	}
	back := must(s.Restore(ctx, "t"))
	if back.Version <= m.Memory.Version || !back.CreatedAt.Equal(m.Memory.CreatedAt) || back.Title != "Forget me" {
		t.Fatalf("restored %+v, was %+v", back, m.Memory)
	}
	_, err = s.Restore(ctx, "t")
	wantCode(t, err, memgate.CodeNotFound)
	if err := s.Delete(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	must(s.Write(ctx, withID("t", "a new memory of that id")))
	_, err = s.Restore(ctx, "t")
	wantCode(t, err, memgate.CodeVersionConflict)
	c.add(time.Hour)
	if _, n, err := s.Sweep(ctx, time.Hour); err != nil || n != 1 {
		t.Fatalf("purged %d %v", n, err)
	}
	if page := must(s.Trash(ctx, "", 10)); len(page.Memories) != 0 {
		t.Fatalf("trash after the retention %+v", page)
	}
}

// A forgotten memory that expires is gone from the trash when it expires,
// and the sweep purges it then; one past the retention is gone before the
// sweep comes.
func trashMeetsExpiry(t *testing.T, open Open) {
	ctx, c := context.Background(), newClock()
	s := open(t, storage.Options{Now: c.now, TrashRetention: time.Hour})
	w := withID("brief", "a memory that expires in the trash")
	w.TTL = time.Minute
	must(s.Write(ctx, w))
	must(s.Write(ctx, withID("kept", "a memory kept past the retention")))
	for _, id := range []string{"brief", "kept"} {
		if err := s.Delete(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := must(s.Trash(ctx, "", 10)).Memories; len(got) != 2 {
		t.Fatalf("trash %v", got)
	}
	c.add(time.Minute)
	if got := must(s.Trash(ctx, "", 10)).Memories; len(got) != 1 || got[0].Memory.ID != "kept" {
		t.Fatalf("trash after the expiry %v", got)
	}
	_, err := s.Restore(ctx, "brief")
	wantCode(t, err, memgate.CodeNotFound)
	if _, n, err := s.Sweep(ctx, time.Hour); err != nil || n != 1 {
		t.Fatalf("the sweep purged %d %v", n, err)
	}
	c.add(time.Hour)
	if got := must(s.Trash(ctx, "", 10)).Memories; len(got) != 0 {
		t.Fatalf("trash past the retention, before the sweep %v", got)
	}
	_, err = s.Restore(ctx, "kept")
	wantCode(t, err, memgate.CodeNotFound)
	if _, n, err := s.Sweep(ctx, time.Hour); err != nil || n != 1 {
		t.Fatalf("the sweep purged %d %v", n, err)
	}
}

// Memories that expired count against no quota, swept or not.
func expiredLeaveTheQuota(t *testing.T, open Open) {
	ctx, c := context.Background(), newClock()
	s := open(t, storage.Options{Now: c.now, MaxMemories: 2, MaxBytes: 20})
	must(s.Write(ctx, withID("a", "ten bytes!")))
	w := withID("b", "ten bytes?")
	w.TTL = time.Second
	must(s.Write(ctx, w))
	_, err := s.Write(ctx, write("x"))
	wantCode(t, err, memgate.CodeQuotaExceeded)
	c.add(time.Second)
	must(s.Write(ctx, withID("c", "ten bytes.")))
	_, err = s.Write(ctx, write("y"))
	wantCode(t, err, memgate.CodeQuotaExceeded)
	if st := must(s.Stats(ctx)); st.Count != 2 || st.Bytes != 20 {
		t.Fatalf("stats %+v", st)
	}
}

// A candidate is no memory until approved; a rejected one is gone.
func candidates(t *testing.T, open Open) {
	ctx := context.Background()
	s := open(t, storage.Options{})
	c := must(s.Propose(ctx, memgate.Write{Text: "standups move to 9:30", Tags: []string{"process"}}))
	r := must(s.Propose(ctx, write("a proposal to reject")))
	if got := hitIDs(must(s.Search(ctx, memgate.Query{Text: "standups"}))); len(got) != 0 {
		t.Fatalf("a candidate is found: %v", got)
	}
	if got := ids(must(s.Candidates(ctx, "", 10)).Memories); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values([]string{c.ID, r.ID}))) {
		t.Fatalf("candidates %v", got)
	}
	m := must(s.Approve(ctx, c.ID))
	if m.Text != "standups move to 9:30" || m.Version < 1 {
		t.Fatalf("approved %+v", m)
	}
	if got := hitIDs(must(s.Search(ctx, memgate.Query{Text: "standups"}))); !slices.Equal(got, []string{m.ID}) {
		t.Fatalf("the approved memory: %v", got)
	}
	if err := s.Reject(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.Reject(ctx, r.ID), memgate.CodeNotFound)
	if got := must(s.Candidates(ctx, "", 10)).Memories; len(got) != 0 {
		t.Fatalf("candidates left %v", ids(got))
	}
}

// Search ranks by words, the best hit at 1, narrowed by tags, metadata and
// source kind, within its limit.
func search(t *testing.T, open Open) {
	ctx := context.Background()
	s := open(t, storage.Options{})
	for _, w := range []memgate.Write{
		{ID: "editor", Text: "Ana prefers Helix as her editor, with Vim keys.", Tags: []string{"ana", "tools"}, Metadata: map[string]any{"team": "core"}},
		{ID: "deploy", Text: "Deploys happen on Tuesdays after the design review.", Tags: []string{"process"}},
		{ID: "keys", Text: "Vim keys everywhere, Ana says, even in the browser.", Tags: []string{"ana"},
			Source: &memgate.Source{Kind: "conversation", Reference: "chat 12", Actor: "ana"}},
	} {
		must(s.Write(ctx, w))
	}
	res := must(s.Search(ctx, memgate.Query{Text: "Helix editor"}))
	if got := hitIDs(res); len(got) == 0 || got[0] != "editor" || res.Hits[0].Score != 1 {
		t.Fatalf("helix editor: %v %+v", got, res.Hits)
	}
	for _, c := range []struct {
		q    memgate.Query
		want []string
	}{
		{memgate.Query{Text: "vim keys", Tags: []string{"ana", "tools"}}, []string{"editor"}},
		{memgate.Query{Text: "vim keys", Tags: []string{"tools", "process"}, TagsMode: memgate.TagsAny}, []string{"editor"}},
		{memgate.Query{Text: "vim keys", Filter: map[string]any{"team": "core"}}, []string{"editor"}},
		{memgate.Query{Text: "vim keys", SourceKind: "conversation"}, []string{"keys"}},
		{memgate.Query{Text: "quantum chromodynamics"}, nil},
	} {
		if got := hitIDs(must(s.Search(ctx, c.q))); !slices.Equal(got, c.want) {
			t.Errorf("%+v: %v, want %v", c.q, got, c.want)
		}
	}
	if got := hitIDs(must(s.Search(ctx, memgate.Query{Text: "vim keys ana", Limit: 1}))); len(got) != 1 {
		t.Fatalf("limit 1: %v", got)
	}
}

// Pages of a listing cover every memory once, in each order.
func listPages(t *testing.T, open Open) {
	ctx, c := context.Background(), newClock()
	s := open(t, storage.Options{Now: c.now})
	for i := range 25 {
		c.add(time.Millisecond)
		must(s.Write(ctx, withID(fmt.Sprintf("m%02d", i), fmt.Sprintf("memory %d", i))))
	}
	for _, order := range []string{memgate.OrderCreatedAsc, memgate.OrderCreatedDesc} {
		var seen []string
		cursor := ""
		for range 10 {
			page := must(s.List(ctx, memgate.ListQuery{Order: order, Limit: 10, Cursor: cursor}))
			seen = append(seen, ids(page.Memories)...)
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if uniq := slices.Compact(slices.Sorted(slices.Values(seen))); len(seen) != 25 || len(uniq) != 25 {
			t.Fatalf("%s: %v", order, seen)
		}
		if order == memgate.OrderCreatedAsc && (seen[0] != "m00" || seen[24] != "m24") {
			t.Fatalf("created_asc: %v", seen)
		}
	}
}

// An export imported into an empty store holds the same memories; the
// conflict modes decide over an id already there.
func exportImport(t *testing.T, open Open) {
	ctx := context.Background()
	s := open(t, storage.Options{})
	must(s.Write(ctx, memgate.Write{ID: "a", Text: "alpha <&>", Title: "A", Tags: []string{"x"}, Metadata: map[string]any{"n": 1.5}}))
	must(s.Write(ctx, memgate.Write{ID: "b", Text: "beta", Source: &memgate.Source{Kind: "file", Reference: "notes.md", Actor: "me"}}))
	var buf bytes.Buffer
	if _, next, err := s.Export(ctx, &buf, "", memgate.MaxListLimit); err != nil || next != "" {
		t.Fatalf("export: %q %v", next, err)
	}
	other := open(t, storage.Options{})
	rep := must(other.Import(ctx, bytes.NewReader(buf.Bytes()), "fail"))
	if rep.Imported != 2 {
		t.Fatalf("import %+v", rep)
	}
	for _, id := range []string{"a", "b"} {
		was, now := must(s.Get(ctx, id)), must(other.Get(ctx, id))
		if was.Text != now.Text || was.Title != now.Title || !slices.Equal(was.Tags, now.Tags) ||
			fmt.Sprint(was.Metadata) != fmt.Sprint(now.Metadata) || fmt.Sprint(was.Source) != fmt.Sprint(now.Source) ||
			!was.CreatedAt.Equal(now.CreatedAt) {
			t.Fatalf("%s: %+v, was %+v", id, now, was)
		}
	}
	if rep := must(other.Import(ctx, bytes.NewReader(buf.Bytes()), "skip")); rep.Skipped != 2 || rep.Imported != 0 {
		t.Fatalf("skip %+v", rep)
	}
	must(other.Write(ctx, withID("a", "changed since")))
	if rep := must(other.Import(ctx, bytes.NewReader(buf.Bytes()), "overwrite")); rep.Superseded+rep.Imported == 0 {
		t.Fatalf("overwrite %+v", rep)
	}
	if got := must(other.Get(ctx, "a")); got.Text != "alpha <&>" {
		t.Fatalf("after overwrite %q", got.Text)
	}
	_, err := other.Import(ctx, bytes.NewReader(buf.Bytes()), "fail")
	if err == nil {
		t.Fatal("import over existing ids with fail")
	}
}
