package storage

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/memgate/memgate"
)

// importFails imports input and checks it stopped with code, naming field
// and line.
func importFails(t *testing.T, s *Store, input string, code memgate.Code, field string, line int) {
	t.Helper()
	_, err := s.Import(context.Background(), strings.NewReader(input), "")
	wantCode(t, err, code, field)
	if e := err.(*memgate.Error); e.Details["line"] != line {
		t.Fatalf("details.line = %v, want %d", e.Details["line"], line)
	}
}

func TestImportKeysAreExact(t *testing.T) {
	s := openTest(t)
	ok := `{"text":"ok"}` + "\n"
	for _, tc := range []struct{ name, input, field string }{
		{"a key in upper case", `{"TEXT":"a"}`, "line"},
		{"a key in mixed case", `{"text":"a","Title":"b"}`, "line"},
		{"a key twice", `{"text":"a","text":"b"}`, "line"},
		{"a key twice, in another case", `{"text":"a","Text":"b"}`, "line"},
		{"a metadata key twice", `{"text":"a","metadata":{"k":1,"k":2}}`, "metadata"},
		{"a header key twice", `{"memgate_export":1,"memgate_export":1}`, "line"},
		{"a header with more", `{"memgate_export":1,"text":"a"}`, "line"},
		{"an entity key in upper case", `{"type":"entity","NAME":"x"}`, "line"},
		{"an entity name twice", `{"type":"entity","name":"a","name":"b"}`, "line"},
		{"a type twice", `{"type":"entity","type":"relation","name":"a"}`, "line"},
		{"a relation key in another case", `{"type":"relation","from":"a","to":"b","relationtype":"r"}`, "line"},
		{"a string after the object", `{"text":"a"} "b"`, "line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			importFails(t, s, ok+tc.input, memgate.CodeInvalidArgument, tc.field, 2)
		})
	}
	if st, _ := s.Stats(context.Background()); st.Count != 0 {
		t.Fatalf("the refused imports stored %d memories", st.Count)
	}
}

func TestImportRefusesInvalidUTF8(t *testing.T) {
	s := openTest(t)
	for _, tc := range []struct{ input, field string }{
		{`{"id":"key\ud800","text":"a"}`, "id"},
		{`{"id":"key\udbff","text":"a"}`, "id"},
		{"{\"id\":\"key\xff\",\"text\":\"a\"}", "id"},
		{`{"text":"a\udc00"}`, "text"},
		{`{"text":"a","tags":["\ud800"]}`, "tags"},
		{`{"text":"a","metadata":{"k":"\ud800"}}`, "metadata"},
		{`{"text":"a","metadata":{"\ud800":1}}`, "metadata"},
		{`{"text":"a","key\ud800":1}`, "line"},
		{`{"type":"entity","name":"a\ud800","observations":[]}`, "name"},
		{`{"type":"entity","name":"a","observations":["\ud800"]}`, "observations"},
	} {
		importFails(t, s, tc.input, memgate.CodeInvalidArgument, tc.field, 1)
	}
	rep, err := s.Import(context.Background(), strings.NewReader(`{"id":"key\ud83d\ude00","text":"a"}`), "")
	if err != nil || rep.Imported != 1 {
		t.Fatalf("a surrogate pair: %+v %v", rep, err)
	}
	if _, err := s.Get(context.Background(), "key\U0001F600"); err != nil {
		t.Fatal(err)
	}
}

func TestImportTimestampsTheStoreCanOrder(t *testing.T) {
	s := openTest(t)
	for _, ts := range []string{"0001-01-01T00:00:00Z", "1754-08-30T22:43:41Z", "1969-12-31T23:59:59Z",
		"1970-01-01T00:00:00Z", "2262-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "10000-01-01T00:00:00Z", "yesterday"} {
		for _, field := range []string{"created_at", "updated_at"} {
			importFails(t, s, fmt.Sprintf(`{"text":"a",%q:%q}`, field, ts), memgate.CodeInvalidArgument, field, 1)
		}
	}
	importFails(t, s, `{"text":"a","created_at":"2020-01-02T00:00:00Z","updated_at":"2020-01-01T23:59:59Z"}`,
		memgate.CodeInvalidArgument, "updated_at", 1)
	for i, ts := range []string{"1970-01-01T00:00:00.000000001Z", "2261-12-31T23:59:59.999999999Z", "2000-01-01T01:00:00+01:00"} {
		in := fmt.Sprintf(`{"id":"m%d","text":"a","created_at":%q,"updated_at":%q}`, i, ts, ts)
		if _, err := s.Import(context.Background(), strings.NewReader(in), ""); err != nil {
			t.Fatalf("%s: %v", ts, err)
		}
		m, err := s.Get(context.Background(), fmt.Sprint("m", i))
		if err != nil || m.CreatedAt.Format("2006-01-02T15:04:05.999999999Z07:00") != strings.Replace(ts, "01:00:00+01:00", "00:00:00Z", 1) {
			t.Fatalf("%s came back as %v (%v)", ts, m.CreatedAt, err)
		}
	}
	// The edges sort where they belong, oldest first.
	page, _ := s.List(context.Background(), memgate.ListQuery{Order: memgate.OrderCreatedAsc})
	var got []string
	for _, m := range page.Memories {
		got = append(got, m.ID)
	}
	if strings.Join(got, ",") != "m0,m2,m1" {
		t.Fatalf("created_asc order: %v", got)
	}
}

func TestImportAppliesTheLimits(t *testing.T) {
	s := openTest(t, func(o *Options) { o.MaxTextBytes = 10 })
	ctx := context.Background()
	if _, err := s.Import(ctx, strings.NewReader(`{"text":"0123456789"}`), ""); err != nil {
		t.Fatalf("a text at the limit: %v", err)
	}
	importFails(t, s, `{"text":"0123456789X"}`, memgate.CodeTooLarge, "text", 1)
	// A knowledge-graph entity: its observations and relations are its text.
	entity := func(name, obs string) string {
		return fmt.Sprintf(`{"type":"entity","name":%q,"entityType":"t","observations":[%q]}`, name, obs)
	}
	if _, err := s.Import(ctx, strings.NewReader(entity("e1", "0123456789")), ""); err != nil {
		t.Fatalf("an entity at the limit: %v", err)
	}
	importFails(t, s, `{"text":"ok"}`+"\n"+entity("e2", "0123456789X"), memgate.CodeTooLarge, "observations", 2)
	importFails(t, s, entity("e3", "012345")+"\n"+`{"type":"relation","from":"e3","to":"e1","relationType":"r"}`,
		memgate.CodeTooLarge, "observations", 1)
	for _, tc := range []struct{ name, input, field string }{
		{"an entity type too long for metadata", fmt.Sprintf(`{"type":"entity","name":"x","entityType":%q,"observations":[]}`, strings.Repeat("a", 9000)), "entityType"},
		{"an entity type of the wrong type", `{"type":"entity","name":"x","entityType":1,"observations":[]}`, "entityType"},
		{"observations of the wrong type", `{"type":"entity","name":"x","observations":"a"}`, "observations"},
		{"an entity without a name", `{"type":"entity","observations":["a"]}`, "name"},
		{"a name too long", fmt.Sprintf(`{"type":"entity","name":%q}`, strings.Repeat("n", 257)), "name"},
		{"a relation without from", `{"type":"relation","to":"b","relationType":"r"}`, "from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			importFails(t, s, `{"text":"ok"}`+"\n"+tc.input, memgate.CodeInvalidArgument, tc.field, 2)
		})
	}
	// A relation from no entity stops the import at its line.
	importFails(t, s, entity("e4", "a")+"\n"+`{"type":"relation","from":"nobody","to":"e4","relationType":"r"}`,
		memgate.CodeInvalidArgument, "from", 2)
	for _, id := range []string{"e2", "e3", "e4", "x", "nobody"} {
		if _, err := s.Get(ctx, id); memgate.ErrorCode(err) != memgate.CodeNotFound {
			t.Fatalf("%s was imported by a refused import: %v", id, err)
		}
	}
}

// An export taken in pages while writes go on restores every memory at its
// newest version, at least as of the moment the export began.
func TestExportDuringWritesRestoresTheNewest(t *testing.T) {
	for _, policy := range []string{ImportSkip, ImportOverwrite, ImportFail} {
		t.Run(policy, func(t *testing.T) {
			src := clockStore(t)
			ctx := context.Background()
			for i := range 30 {
				put(t, src, memgate.Write{ID: fmt.Sprint("m", i), Text: fmt.Sprint("first ", i)})
			}
			var all bytes.Buffer
			n, next, err := src.Export(ctx, &all, "", 10)
			if err != nil || n != 10 || next == "" {
				t.Fatalf("page 1: %d %q %v", n, next, err)
			}
			// One memory of page 1 and one of page 2 are replaced, one of
			// page 3 is forgotten, one is created.
			put(t, src, memgate.Write{ID: "m3", Text: "newer 3"})
			put(t, src, memgate.Write{ID: "m15", Text: "newer 15"})
			if err := src.Delete(ctx, "m25", nil); err != nil {
				t.Fatal(err)
			}
			put(t, src, memgate.Write{ID: "new", Text: "created during the export"})
			put(t, src, memgate.Write{ID: "m3", Text: "newest 3"})
			for next != "" {
				if _, next, err = src.Export(ctx, &all, next, 10); err != nil {
					t.Fatal(err)
				}
			}
			if c := strings.Count(all.String(), `"id":"m3"`); c != 2 {
				t.Fatalf("m3 is in the export %d times, want twice (old and new)", c)
			}
			dst := openTest(t)
			rep, err := dst.Import(ctx, bytes.NewReader(all.Bytes()), policy)
			if err != nil {
				t.Fatalf("import: %v", err)
			}
			if rep.Imported != 30 || rep.Superseded != 1 {
				t.Fatalf("report %+v, want 30 imported and 1 superseded", rep)
			}
			for i := range 30 {
				id := fmt.Sprint("m", i)
				if i == 25 {
					continue // forgotten during the export: it may come back
				}
				want, _ := src.Get(ctx, id)
				got, err := dst.Get(ctx, id)
				if err != nil || got.Text != want.Text || !got.UpdatedAt.Equal(want.UpdatedAt) {
					t.Fatalf("%s: got %q, want %q (%v)", id, got.Text, want.Text, err)
				}
			}
			if st, _ := dst.Stats(ctx); st.Count != 30 {
				t.Fatalf("the restored store holds %d memories, want 30 (no duplicates)", st.Count)
			}
		})
	}
}

// Lines of one id keep the newest, also across batches and whatever order
// they come in.
func TestImportKeepsTheNewestLineOfAnID(t *testing.T) {
	line := func(id string, version int, text string) string {
		return fmt.Sprintf(`{"id":%q,"text":%q,"version":%d,"updated_at":"2026-01-01T00:00:%02dZ"}`, id, text, version, version%60)
	}
	var b strings.Builder
	b.WriteString(line("a", 5, "a5") + "\n" + line("b", 2, "b2") + "\n" + line("b", 1, "b1") + "\n")
	for i := range importBatch + 5 { // a batch commits in between
		b.WriteString(line(fmt.Sprint("f", i), 1, "filler") + "\n")
	}
	b.WriteString(line("a", 7, "a7") + "\n" + line("a", 6, "a6") + "\n" + line("b", 3, "b3") + "\n")
	for _, policy := range []string{ImportSkip, ImportOverwrite, ImportFail} {
		t.Run(policy, func(t *testing.T) {
			s := openTest(t)
			ctx := context.Background()
			rep, err := s.Import(ctx, strings.NewReader(b.String()), policy)
			if err != nil || rep.Imported != 2+importBatch+5 || rep.Superseded != 4 {
				t.Fatalf("import: %+v %v", rep, err)
			}
			for id, want := range map[string]string{"a": "a7", "b": "b3"} {
				if m, err := s.Get(ctx, id); err != nil || m.Text != want {
					t.Fatalf("%s = %q, want %q (%v)", id, m.Text, want, err)
				}
			}
		})
	}
	// With skip, a memory the store held before stays, newer lines or not.
	s := openTest(t)
	put(t, s, memgate.Write{ID: "a", Text: "mine"})
	rep, err := s.Import(context.Background(), strings.NewReader(b.String()), ImportSkip)
	if m, _ := s.Get(context.Background(), "a"); err != nil || m.Text != "mine" || rep.Skipped != 3 {
		t.Fatalf("skip kept %q, report %+v (%v)", m.Text, rep, err)
	}
}

// ListQuery.Take ends a page before the memory it refuses, on every path a
// listing takes (plain or narrowed, in update or creation order), with a
// cursor that starts the next page at that memory.
func TestListTakeEndsThePage(t *testing.T) {
	s := clockStore(t)
	ctx := context.Background()
	for i := range 20 {
		put(t, s, memgate.Write{ID: fmt.Sprint("m", i), Text: fmt.Sprint("take ", i), Tags: []string{"x"}})
	}
	for _, q := range []memgate.ListQuery{
		{}, {Order: memgate.OrderCreatedAsc}, {Order: memgate.OrderCreatedDesc},
		{Tags: []string{"x"}}, {Tags: []string{"x"}, Order: memgate.OrderCreatedAsc}, {Tags: []string{"x"}, Order: memgate.OrderCreatedDesc},
	} {
		name := fmt.Sprintf("%s tags %v", q.Order, q.Tags)
		q.Limit = 100
		all, err := s.List(ctx, q)
		if err != nil || len(all.Memories) != 20 {
			t.Fatalf("%s: %d %v", name, len(all.Memories), err)
		}
		for _, stop := range []int{0, 1, 5, 19} {
			q := q
			asked := 0
			q.Take = func(i int, m memgate.Memory) bool { asked++; return i < stop }
			page, err := s.List(ctx, q)
			want := max(stop, 1) // the first always joins
			if err != nil || len(page.Memories) != want || page.NextCursor == "" || asked != want+1 {
				t.Fatalf("%s, stop at %d: %d memories, cursor %q, asked %d (%v)", name, stop, len(page.Memories), page.NextCursor, asked, err)
			}
			q.Take, q.Cursor = nil, page.NextCursor
			rest, err := s.List(ctx, q)
			if err != nil || len(rest.Memories) != 20-want || rest.Memories[0].ID != all.Memories[want].ID {
				t.Fatalf("%s, stop at %d: the next page has %d memories (%v)", name, stop, len(rest.Memories), err)
			}
		}
	}
}

// The largest memory a store takes, escaped all through by its export (a
// control character is six bytes there), imports back.
func TestTheLargestMemoryExportsAndImportsBack(t *testing.T) {
	big := func(o *Options) { o.MaxTextBytes = 1 << 20 }
	s := openTest(t, big)
	ctx := context.Background()
	text := strings.Repeat("\x01", 1<<20)
	if _, _, err := s.Put(ctx, memgate.Write{ID: "ctl", Text: text}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, _, err := s.Export(ctx, &buf, "", 0); err != nil {
		t.Fatal(err)
	}
	if buf.Len() < 6<<20 {
		t.Fatalf("the export is %d bytes", buf.Len())
	}
	other := openTest(t, big)
	if rep, err := other.Import(ctx, &buf, ""); err != nil || rep.Imported != 1 {
		t.Fatalf("import %+v %v", rep, err)
	}
	if m, err := other.Get(ctx, "ctl"); err != nil || m.Text != text {
		t.Fatalf("get %v", err)
	}
}
