package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/memgate/memgate"
)

// Invalid UTF-8 and lone surrogates are refused by every way in, never
// stored as U+FFFD.
func TestCommandsRefuseInvalidUTF8(t *testing.T) {
	dd := store(t)
	for _, in := range []string{`{"text":"t","id":"key\ud800"}`, `{"text":"t","id":"key\udbff"}`, "{\"text\":\"t\",\"id\":\"key\xff\"}"} {
		r := mg(t, env{}, in, args(dd, "invoke", "remember")...)
		if field := invokeFails(t, r, "invalid_argument"); field != "id" {
			t.Fatalf("invoke %q: field %q, want id", in, field)
		}
	}
	mg(t, env{}, "", args(dd, "remember", "--id", "key\xff", "t")...).fails(t, 1, "invalid_argument")
	mg(t, env{}, "text \xff", args(dd, "remember")...).fails(t, 1, "invalid_argument")
	mg(t, env{}, "", args(dd, "remember", "--meta", "k=\xff", "t")...).fails(t, 1, "invalid_argument")
	if n := mg(t, env{}, "", args(dd, "stats")...).ok(t)["count"]; n != float64(0) {
		t.Fatalf("stats after the refusals: count %v", n)
	}
}

// --max-response-bytes must hold the largest memory of --max-memory-bytes.
func TestMaxResponseBytesFlag(t *testing.T) {
	dd := store(t)
	min := memgate.MinResponseBytes(memgate.DefaultMaxTextBytes)
	mg(t, env{}, "", args(dd, "stats", "--max-response-bytes", strconv.Itoa(min))...).ok(t)
	mg(t, env{}, "", args(dd, "stats", "--max-response-bytes", strconv.Itoa(min-1))...).fails(t, 2, "--max-response-bytes")
	mg(t, env{"MEMGATE_MAX_RESPONSE_BYTES": strconv.Itoa(min - 1)}, "", args(dd, "stats")...).fails(t, 2, "--max-response-bytes")
	// A larger memory needs a larger bound.
	big := strconv.Itoa(1 << 20)
	r := mg(t, env{}, "", args(dd, "stats", "--max-memory-bytes", big)...)
	r.fails(t, 2, "--max-response-bytes")
	if !strings.Contains(r.stderr, strconv.Itoa(memgate.MinResponseBytes(1<<20))) {
		t.Fatalf("the refusal does not say the smallest bound: %q", r.stderr)
	}
	mg(t, env{}, "", args(dd, "stats", "--max-memory-bytes", big, "--max-response-bytes", strconv.Itoa(memgate.MinResponseBytes(1<<20)))...).ok(t)
}

// memgate export pages through answers that end early at the bound, and
// still writes every memory once.
func TestExportCommandFollowsShortPages(t *testing.T) {
	dd := store(t)
	bound := strconv.Itoa(memgate.MinResponseBytes(1024))
	flags := []string{"--max-memory-bytes", "1024", "--max-response-bytes", bound}
	var lines strings.Builder
	for i := range 100 {
		text, _ := json.Marshal(strings.Repeat("\x01", 1000))
		fmt.Fprintf(&lines, `{"id":"m%d","text":%s}`+"\n", i, text)
	}
	if rep := mg(t, env{}, lines.String(), args(dd, "import", "-", "--max-memory-bytes", "1024")...).ok(t); rep["imported"] != float64(100) {
		t.Fatalf("import: %v", rep)
	}
	// One page of export holds fewer than 100 such lines under this bound.
	page := mg(t, env{}, `{"limit":1000}`, args(dd, append([]string{"invoke", "export"}, flags...)...)...).ok(t)
	if n := page["count"].(float64); n >= 100 || n < 1 || page["next_cursor"] == nil {
		t.Fatalf("one export page under the bound: %v", page)
	}
	out := mg(t, env{}, "", args(dd, append([]string{"export"}, flags...)...)...)
	if out.code != 0 {
		t.Fatalf("export: %d %s", out.code, out.stderr)
	}
	got := strings.Split(strings.TrimSuffix(out.stdout, "\n"), "\n")
	if len(got) != 101 || got[0] != `{"memgate_export":1}` {
		t.Fatalf("export wrote %d lines", len(got))
	}
	seen := map[string]bool{}
	for _, l := range got[1:] {
		var m struct{ ID string }
		if err := json.Unmarshal([]byte(l), &m); err != nil || seen[m.ID] {
			t.Fatalf("line %q: %v (seen %v)", l[:40], err, seen[m.ID])
		}
		seen[m.ID] = true
	}
}

// memgate import stops at a memory.jsonl entity that breaks a rule, naming
// its line and field, and stores nothing of that batch.
func TestImportCommandRefusesWhatItCannotKeep(t *testing.T) {
	dd := store(t)
	for _, tc := range []struct{ in, want string }{
		{`{"type":"entity","name":"a","entityType":"t","observations":["ok"]}` + "\n" +
			`{"type":"entity","name":"b","entityType":"t","observations":["` + strings.Repeat("x", 11) + `"]}`, "line 2"},
		{`{"text":"a","created_at":"0001-01-01T00:00:00Z"}`, "line 1"},
		{`{"text":"a","TEXT":"b"}`, "line 1"},
		{`{"text":"a","metadata":{"k":1,"k":2}}`, "line 1"},
	} {
		r := mg(t, env{}, tc.in, args(dd, "import", "-", "--max-memory-bytes", "10")...)
		r.fails(t, 1, tc.want)
	}
	if n := mg(t, env{}, "", args(dd, "stats")...).ok(t)["count"]; n != float64(0) {
		t.Fatalf("the refused imports stored %v memories", n)
	}
}
