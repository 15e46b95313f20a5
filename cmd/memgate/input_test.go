package main

import (
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
