package memgate_test

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/internal/synthetic"
)

// stdJSON is what encoding/json writes for v with HTML escaping off: what
// AppendJSON must write, byte for byte.
func stdJSON(t testing.TB, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// The hand-written encoder knows every field: a field added to Memory or
// Hit without it would be missing from every answer.
func TestAppendJSONKnowsEveryField(t *testing.T) {
	wantMemory := []string{"ID", "Text", "Bytes", "Title", "Tags", "Metadata", "CreatedAt", "UpdatedAt", "Version",
		"ExpiresAt", "Source", "Namespace"}
	wantHit := []string{"Memory", "Score", "LexicalScore", "SemanticScore"}
	wantReceipt := []string{"RetrievalMode", "EmbeddingModel", "EmbeddingVersion", "SemanticFallback", "Candidates",
		"Truncated", "Namespaces"}
	for _, c := range []struct {
		v    any
		want []string
	}{{memgate.Memory{}, wantMemory}, {memgate.Hit{}, wantHit}, {memgate.Receipt{}, wantReceipt}} {
		typ := reflect.TypeOf(c.v)
		var got []string
		for i := range typ.NumField() {
			got = append(got, typ.Field(i).Name)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s has fields %v; AppendJSON writes %v: teach it the new ones", typ.Name(), got, c.want)
		}
	}
}

var nastyStrings = []string{
	"", "plain", `quote " and \ backslash`, "<html> & 'single'", "\x00\x01\x1f\x7f",
	"\b\f\n\r\t", "line\u2028para\u2029", "café 日本 😀", "\xff\xfe invalid", "\xed\xa0\x80",
	"tail \\", strings.Repeat("é", 100),
}

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	semantic := 0.25
	base := time.Date(2026, 12, 2, 3, 4, 5, 123456789, time.UTC)
	cases := []memgate.Memory{
		{},
		{ID: "a", Text: "b", Bytes: 1, Tags: []string{}, Metadata: map[string]any{}, CreatedAt: base, UpdatedAt: base, Version: 7},
		{ID: "x", Title: "t", Tags: []string{"a", "b:c"}, Metadata: map[string]any{
			"s": "v<>&", "n": 1.5, "z": 0.0, "big": 1e21, "small": 1e-7, "neg": -3.0, "int": 42.0,
			"t": true, "f": false, "nil": nil, "e": 1.25e-9, "huge": math.MaxFloat64,
		}, CreatedAt: time.Unix(0, 0).UTC(), UpdatedAt: base.Add(time.Hour), Version: math.MaxInt64},
		{ID: "odd", Metadata: map[string]any{"int": 3, "list": []any{1, "x"}}, CreatedAt: base.Truncate(time.Second), UpdatedAt: base.Truncate(time.Millisecond)},
		{ID: "later", ExpiresAt: &base, Source: &memgate.Source{Kind: "url", Reference: "https://x/<a>", Actor: "é"}, Namespace: "team"},
		{ID: "seen", Source: &memgate.Source{Kind: "person", Reference: "r", Actor: "a\n", ObservedAt: &base}},
	}
	for _, s := range nastyStrings {
		cases = append(cases, memgate.Memory{ID: s, Text: s, Title: s, Tags: []string{s}, Metadata: map[string]any{s: s},
			Source: &memgate.Source{Kind: s, Reference: s, Actor: s}, Namespace: s})
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		cases = append(cases, randomMemory(r))
	}
	for i, m := range cases {
		if got, want := m.AppendJSON(nil), stdJSON(t, m); !bytes.Equal(got, want) {
			t.Fatalf("memory %d:\n got %s\nwant %s", i, got, want)
		}
		for _, sem := range []*float64{nil, &semantic} {
			h := memgate.Hit{Memory: m, Score: r.Float64(), LexicalScore: r.ExpFloat64() * 1e-7, SemanticScore: sem}
			if got, want := h.AppendJSON([]byte("prefix")), append([]byte("prefix"), stdJSON(t, h)...); !bytes.Equal(got, want) {
				t.Fatalf("hit %d:\n got %s\nwant %s", i, got, want)
			}
		}
	}
}

func TestReceiptAppendJSONMatchesEncodingJSON(t *testing.T) {
	cases := []memgate.Receipt{
		{},
		{RetrievalMode: memgate.RetrievalLexical, Candidates: 4180},
		{RetrievalMode: memgate.RetrievalHybrid, EmbeddingModel: "m", EmbeddingVersion: "v1", Candidates: -1, Truncated: true,
			Namespaces: []string{"proj", "global"}},
		{RetrievalMode: memgate.RetrievalLexical, SemanticFallback: "embedder_unavailable", Namespaces: []string{}},
	}
	for _, s := range nastyStrings {
		cases = append(cases, memgate.Receipt{RetrievalMode: s, EmbeddingModel: s, EmbeddingVersion: s, SemanticFallback: s,
			Namespaces: []string{s, s}})
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		m := randomMemory(r)
		rc := memgate.Receipt{RetrievalMode: m.ID, Candidates: r.IntN(1 << 20), Truncated: r.IntN(2) == 0}
		if r.IntN(2) == 0 {
			rc.EmbeddingModel, rc.EmbeddingVersion = m.Text, m.Title
		}
		if r.IntN(3) == 0 {
			rc.SemanticFallback = m.Text
		}
		rc.Namespaces = m.Tags
		cases = append(cases, rc)
	}
	for i, rc := range cases {
		if got, want := rc.AppendJSON([]byte("x")), append([]byte("x"), stdJSON(t, rc)...); !bytes.Equal(got, want) {
			t.Fatalf("receipt %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func randomMemory(r *rand.Rand) memgate.Memory {
	str := func() string { return synthetic.Hostile(r, 20) }
	m := memgate.Memory{ID: str(), Text: str(), Bytes: r.IntN(1 << 16), Title: str(), Version: r.Int64(),
		CreatedAt: time.Unix(0, r.Int64N(1<<62)).UTC(), UpdatedAt: time.Unix(r.Int64N(1<<33), 0).UTC()}
	if r.IntN(4) > 0 {
		m.Tags = []string{}
		for range r.IntN(5) {
			m.Tags = append(m.Tags, str())
		}
	}
	if r.IntN(4) > 0 {
		m.Metadata = map[string]any{}
		for range r.IntN(6) {
			var v any
			switch r.IntN(4) {
			case 0:
				v = str()
			case 1:
				v = r.NormFloat64() * math.Pow(10, float64(r.IntN(60)-30))
			case 2:
				v = r.IntN(2) == 0
			}
			m.Metadata[str()] = v
		}
	}
	return m
}

func FuzzAppendJSON(f *testing.F) {
	for _, s := range nastyStrings {
		f.Add(s, 1.5)
	}
	f.Fuzz(func(t *testing.T, s string, x float64) {
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return
		}
		m := memgate.Memory{ID: s, Text: s, Title: s, Tags: []string{s}, Metadata: map[string]any{s: x, "k": s}}
		if got, want := m.AppendJSON(nil), stdJSON(t, m); !bytes.Equal(got, want) {
			t.Fatalf("got %s\nwant %s", got, want)
		}
	})
}

func BenchmarkAppendJSON(b *testing.B) {
	tags := make([]string, 30)
	for i := range tags {
		tags[i] = "team-" + strings.Repeat("x", i%7)
	}
	m := memgate.Memory{ID: "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", Text: strings.Repeat("a gloss of some words; ", 8),
		Tags: tags, Metadata: map[string]any{"pos": "noun", "lex": "lex05"}, CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC(), Version: 12345}
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = m.AppendJSON(buf[:0])
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			stdJSON(b, m)
		}
	})
}
