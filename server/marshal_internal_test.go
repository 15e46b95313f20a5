package server

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/memgate/memgate"
)

// marshal writes memories and hits with their own encoder, and hitsResult
// assembles a search answer from those bytes: the same bytes as
// encoding/json without HTML escaping.
func TestMarshalWritesWhatEncodingJSONWrites(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	m := memgate.Memory{ID: "a<b>", Text: "x & \"y\"\n\u2028", Bytes: 9, Title: "t", Tags: []string{"k"},
		Metadata: map[string]any{"n": 2.5, "s": "<v>"}, CreatedAt: at, UpdatedAt: at, Version: 3}
	sem := 0.5
	hits := []memgate.Hit{{Memory: m, Score: 1, LexicalScore: 3.25}, {Memory: wireMemory(memgate.Memory{ID: "b"}), Score: 0.1, SemanticScore: &sem}}
	for _, v := range []any{m, wireMemory(memgate.Memory{}), hits[0], hits[1]} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		if got := marshal(v); !bytes.Equal(got, bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
			t.Errorf("%T:\n got %s\nwant %s", v, got, want.Bytes())
		}
	}
}

// wireCost's one pass counts what rawLen and escapedLen count.
func TestWireCostIsRawAndEscapedLength(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	alphabet := []string{"a", "<", ">", "&", `"`, `\`, "\n", "\x01", "\x7f", "é", "\u2028", "\u2029", "\xe2\x80", "\xff", "日"}
	for range 5000 {
		var b []byte
		for range r.IntN(40) {
			b = append(b, alphabet[r.IntN(len(alphabet))]...)
		}
		if got, want := wireCost(b), rawLen(b)+escapedLen(b); got != want {
			t.Fatalf("wireCost(%q) = %d, rawLen+escapedLen = %d", b, got, want)
		}
	}
}

// A search answer that fits is what encoding/json writes of the result.
func TestHitsResultIsTheEncodedResult(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	m := wireMemory(memgate.Memory{ID: "a", Text: "<b> & \"c\"", Bytes: 9, Tags: []string{"k"}, CreatedAt: at, UpdatedAt: at, Version: 1})
	for _, r := range []memgate.Result{
		{Hits: []memgate.Hit{{Memory: m, Score: 1, LexicalScore: 2.5}, {Memory: m, Score: 0.5, LexicalScore: 1.25}},
			Receipt: memgate.Receipt{RetrievalMode: memgate.RetrievalLexical, Candidates: 2}},
		{Hits: []memgate.Hit{}, Receipt: memgate.Receipt{RetrievalMode: memgate.RetrievalLexical}},
	} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
		got := hitsResult(r, 1<<20).StructuredContent.(json.RawMessage)
		if !bytes.Equal(got, bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
			t.Errorf("hitsResult:\n got %s\nwant %s", got, want.Bytes())
		}
	}
}
