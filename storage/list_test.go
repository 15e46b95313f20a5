package storage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate"
)

// clockStore opens a store whose clock ticks one second per write, so
// created_at and updated_at differ between memories.
func clockStore(t *testing.T) *Store {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tick := 0
	return openTest(t, func(o *Options) {
		o.Now = func() time.Time { tick++; return base.Add(time.Duration(tick) * time.Second) }
	})
}

func listAll(t *testing.T, s *Store, q memgate.ListQuery) []string {
	t.Helper()
	var out []string
	for pages := 0; ; pages++ {
		page, err := s.List(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Memories {
			out = append(out, m.ID)
		}
		if page.NextCursor == "" {
			return out
		}
		if len(page.Memories) != q.Limit && q.Limit != 0 {
			t.Fatalf("a page before the last has %d memories, want %d", len(page.Memories), q.Limit)
		}
		q.Cursor = page.NextCursor
		if pages > 1000 {
			t.Fatal("paging does not end")
		}
	}
}

func TestListOrdersAndPages(t *testing.T) {
	s := clockStore(t)
	for i := range 7 {
		put(t, s, memgate.Write{ID: fmt.Sprint("m", i), Text: "x", Tags: []string{fmt.Sprint("p", i%2)}, Metadata: map[string]any{"odd": i%2 == 1}})
	}
	put(t, s, memgate.Write{ID: "m2", Text: "updated"}) // m2 moves to the top of updated_desc
	cases := []struct {
		name string
		q    memgate.ListQuery
		want string
	}{
		{"updated_desc is the default", memgate.ListQuery{Limit: 3}, "m2,m6,m5,m4,m3,m1,m0"},
		{"created_asc keeps creation order across a replace", memgate.ListQuery{Order: memgate.OrderCreatedAsc, Limit: 2}, "m0,m1,m2,m3,m4,m5,m6"},
		{"created_desc", memgate.ListQuery{Order: memgate.OrderCreatedDesc, Limit: 4}, "m6,m5,m4,m3,m2,m1,m0"},
		{"one page holds all", memgate.ListQuery{Limit: 1000}, "m2,m6,m5,m4,m3,m1,m0"},
		{"tags narrow", memgate.ListQuery{Tags: []string{"p1"}, Limit: 1}, "m5,m3,m1"},
		{"filter narrows", memgate.ListQuery{Filter: map[string]any{"odd": false}, Order: memgate.OrderCreatedAsc, Limit: 2}, "m0,m4,m6"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(listAll(t, s, tc.q), ","); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestListArguments(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	put(t, s, memgate.Write{Text: "x"})
	for _, tc := range []struct {
		name  string
		q     memgate.ListQuery
		field string
	}{
		{"limit 1001 is refused", memgate.ListQuery{Limit: 1001}, "limit"},
		{"a bad order is refused", memgate.ListQuery{Order: "random"}, "order"},
		{"a forged cursor is refused", memgate.ListQuery{Cursor: "not-a-cursor"}, "cursor"},
		{"a cursor of another order is refused", memgate.ListQuery{Cursor: encodeCursor(cursorUpdated, u64(1)), Order: memgate.OrderCreatedAsc}, "cursor"},
		{"an ascending cursor is refused for a descending listing", memgate.ListQuery{Cursor: encodeCursor(cursorCreated, make([]byte, 16)), Order: memgate.OrderCreatedDesc}, "cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.List(ctx, tc.q)
			wantCode(t, err, memgate.CodeInvalidArgument, tc.field)
		})
	}
	page, err := s.List(ctx, memgate.ListQuery{Limit: 1000})
	if err != nil || len(page.Memories) != 1 || page.NextCursor != "" {
		t.Fatalf("limit 1000: %v %v", page, err)
	}
}

// A memory written while a client pages through is seen at most once.
func TestListCursorIsStableUnderWrites(t *testing.T) {
	s := clockStore(t)
	for i := range 10 {
		put(t, s, memgate.Write{ID: fmt.Sprint("m", i), Text: "x"})
	}
	page, err := s.List(context.Background(), memgate.ListQuery{Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, memgate.Write{ID: "m0", Text: "moved"})
	put(t, s, memgate.Write{ID: "new", Text: "new"})
	seen := map[string]int{}
	for _, m := range page.Memories {
		seen[m.ID]++
	}
	for _, id := range listAll(t, s, memgate.ListQuery{Limit: 4, Cursor: page.NextCursor}) {
		seen[id]++
	}
	for id, n := range seen {
		if n > 1 {
			t.Fatalf("%s listed %d times", id, n)
		}
	}
	if len(seen) != 9 { // m0 moved above the cursor, "new" came after it
		t.Fatalf("saw %d memories, want 9: %v", len(seen), seen)
	}
}

func TestExportImportRoundTrip(t *testing.T) {
	src := clockStore(t)
	ctx := context.Background()
	for i := range 25 {
		put(t, src, memgate.Write{ID: fmt.Sprint("m", i), Text: fmt.Sprintf(" text %d \n", i), Title: "T", Tags: []string{"a"}, Metadata: map[string]any{"i": i}})
	}
	var all bytes.Buffer
	cursor, pages := "", 0
	for {
		n, next, err := src.Export(ctx, &all, cursor, 10)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if next == "" {
			if n != 5 {
				t.Fatalf("last page has %d memories, want 5", n)
			}
			break
		}
		cursor = next
	}
	if pages != 3 || !strings.HasPrefix(all.String(), `{"memgate_export":1}`+"\n") {
		t.Fatalf("pages %d, export starts %q", pages, all.String()[:40])
	}
	dst := openTest(t)
	rep, err := dst.Import(ctx, bytes.NewReader(all.Bytes()), "")
	if err != nil || rep.Imported != 25 {
		t.Fatalf("import: %+v %v", rep, err)
	}
	for i := range 25 {
		want, _ := src.Get(ctx, fmt.Sprint("m", i))
		got, err := dst.Get(ctx, fmt.Sprint("m", i))
		if err != nil || got.Text != want.Text || got.Title != want.Title || !got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) || got.Metadata["i"] != want.Metadata["i"] {
			t.Fatalf("m%d: got %+v want %+v (%v)", i, got, want, err)
		}
	}
	res, _ := dst.Search(ctx, memgate.Query{Text: "text", Limit: 100})
	if len(res.Hits) != 25 {
		t.Fatalf("imported memories are not indexed: %d hits", len(res.Hits))
	}

	rep, err = dst.Import(ctx, bytes.NewReader(all.Bytes()), ImportSkip)
	if err != nil || rep.Imported != 0 || rep.Skipped != 25 {
		t.Fatalf("skip: %+v %v", rep, err)
	}
	rep, err = dst.Import(ctx, strings.NewReader(`{"id":"m1","text":"new"}`+"\n"+`{"id":"m2","text":"new"}`), ImportOverwrite)
	if err != nil || rep.Imported != 2 {
		t.Fatalf("overwrite: %+v %v", rep, err)
	}
	if m, _ := dst.Get(ctx, "m1"); m.Text != "new" {
		t.Fatalf("overwrite kept %q", m.Text)
	}
	_, err = dst.Import(ctx, strings.NewReader(`{"id":"fresh","text":"a"}`+"\n"+`{"id":"m3","text":"b"}`), ImportFail)
	wantCode(t, err, memgate.CodeVersionConflict, "")
	if _, err := dst.Get(ctx, "fresh"); memgate.ErrorCode(err) != memgate.CodeNotFound {
		t.Fatalf("a failed batch left a memory behind: %v", err)
	}
}

func TestImportRefusesBadLines(t *testing.T) {
	s := openTest(t)
	for _, tc := range []struct{ name, input, field string }{
		{"not JSON", "{nope", "line"},
		{"an unknown field", `{"text":"a","colour":"red"}`, "line"},
		{"no text", `{"id":"a"}`, "text"},
		{"a newer export format", `{"memgate_export":99}`, "memgate_export"},
		{"a bad tag", `{"text":"a","tags":["a b"]}`, "tags"},
		{"a bad graph type", `{"type":"node","name":"x"}`, "type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Import(context.Background(), strings.NewReader(`{"text":"ok"}`+"\n"+tc.input), "")
			wantCode(t, err, memgate.CodeInvalidArgument, tc.field)
			if e := err.(*memgate.Error); e.Details["line"] != 2 {
				t.Fatalf("details.line = %v, want 2", e.Details["line"])
			}
		})
	}
	_, err := s.Import(context.Background(), strings.NewReader("{}"), "merge")
	wantCode(t, err, memgate.CodeInvalidArgument, "on_conflict")
}

func TestImportKnowledgeGraph(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	graph := strings.Join([]string{
		`{"type":"relation","from":"Ada","to":"Analytical Engine","relationType":"wrote programs for"}`,
		`{"type":"entity","name":"Ada","entityType":"person","observations":["Mathematician","Wrote the first published algorithm"]}`,
		`{"type":"entity","name":"Analytical Engine","entityType":"machine design","observations":[]}`,
	}, "\n")
	rep, err := s.Import(ctx, strings.NewReader(graph), "")
	if err != nil || rep.Imported != 2 {
		t.Fatalf("import: %+v %v", rep, err)
	}
	ada, err := s.Get(ctx, "Ada")
	if err != nil {
		t.Fatal(err)
	}
	want := "Mathematician\nWrote the first published algorithm\nwrote programs for: Analytical Engine"
	if ada.Text != want || ada.Title != "Ada" || strings.Join(ada.Tags, ",") != "person" {
		t.Fatalf("Ada = %+v", ada)
	}
	engine, _ := s.Get(ctx, "Analytical Engine")
	if engine.Text != "Analytical Engine" || strings.Join(engine.Tags, ",") != "machine-design" {
		t.Fatalf("engine = %+v", engine)
	}
	res, _ := s.Search(ctx, memgate.Query{Text: "algorithm", Tags: []string{"person"}})
	if len(res.Hits) != 1 {
		t.Fatalf("imported entity not searchable: %v", ids(res.Hits))
	}
}

func TestBackupIsAConsistentStore(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	for i := range 50 {
		put(t, s, memgate.Write{ID: fmt.Sprint(i), Text: fmt.Sprint("backup item ", i)})
	}
	path := t.TempDir() + "/copy.db"
	if _, err := s.BackupFile(ctx, path); err != nil {
		t.Fatal(err)
	}
	put(t, s, memgate.Write{ID: "after", Text: "written after the backup"})
	c, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, _ := c.Stats(ctx)
	if st.Count != 50 {
		t.Fatalf("backup holds %d memories, want 50", st.Count)
	}
	res, _ := c.Search(ctx, memgate.Query{Text: "backup", Limit: 100})
	if len(res.Hits) != 50 {
		t.Fatalf("backup's index finds %d, want 50", len(res.Hits))
	}
}

func TestStatsCountsBytes(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	put(t, s, memgate.Write{ID: "a", Text: "héllo"})  // 6 bytes
	put(t, s, memgate.Write{ID: "b", Text: "wörld!"}) // 7 bytes
	put(t, s, memgate.Write{ID: "a", Text: "hi"})
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Count != 2 || st.Bytes != 9 {
		t.Fatalf("stats = %+v, want count 2, bytes 9", st)
	}
	if fi, err := os.Stat(s.Path()); err != nil || st.StoreBytes != fi.Size() {
		t.Fatalf("store_bytes = %d, the file holds %v (%v)", st.StoreBytes, fi.Size(), err)
	}
}

// A page ends early when Take refuses a memory, in every listing path (the
// whole walk, a narrowed one in update order, a few narrowed in creation
// order), and the next page starts at the memory refused.
func TestListTakeEndsEveryKindOfPageEarly(t *testing.T) {
	s := clockStore(t)
	for i := range 7 {
		put(t, s, memgate.Write{ID: fmt.Sprint("m", i), Text: "x", Tags: []string{fmt.Sprint("p", i%2)}})
	}
	cases := []struct {
		name string
		q    memgate.ListQuery
		want string
	}{
		{"the whole walk", memgate.ListQuery{}, "m6,m5|m4,m3|m2,m1|m0"},
		{"narrowed in update order", memgate.ListQuery{Tags: []string{"p0"}}, "m6,m4|m2,m0"},
		{"narrowed in creation order", memgate.ListQuery{Tags: []string{"p1"}, Order: memgate.OrderCreatedAsc}, "m1,m3|m5"},
		{"narrowed in creation order, descending", memgate.ListQuery{Tags: []string{"p1"}, Order: memgate.OrderCreatedDesc}, "m5,m3|m1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.Limit = 1000
			q.Take = func(i int, _ memgate.Memory) bool { return i < 2 }
			var pages []string
			for range 10 {
				page, err := s.List(context.Background(), q)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, m := range page.Memories {
					ids = append(ids, m.ID)
				}
				pages = append(pages, strings.Join(ids, ","))
				if page.NextCursor == "" {
					break
				}
				q.Cursor = page.NextCursor
			}
			if got := strings.Join(pages, "|"); got != tc.want {
				t.Fatalf("pages %s, want %s", got, tc.want)
			}
		})
	}
}
