package search

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// sentence is a typical memory: 176 bytes of English.
const sentence = "The deployment pipeline failed again because the staging database migrations were running concurrently with the nightly backup job, so we moved backups to 03:00 UTC on Fridays."

// paragraph is 4 KiB of notes mixing prose, identifiers and paths.
var paragraph = func() string {
	parts := []string{
		sentence,
		"Decided to keep parseHTTPRequest in src/server/http.go and move the retry logic into pkg.retry.Backoff, since the gateway's connection pool already handles idle eviction.",
		"User prefers concise answers, British spelling, and tabs over spaces; she is working on the memgate_v2 migration and wants snake_case JSON keys everywhere.",
		"Benchmarks on 2024-01-15 showed p99 latency of 12ms for recall with 10k memories, dominated by BM25 scoring over posting lists rather than bbolt reads.",
		"Remember that the CI runners use Go 1.26 with GOFLAGS=-buildvcs=false, and that integration tests need the TypeScript SDK installed with npm ci before running.",
	}
	var b strings.Builder
	for i := 0; b.Len() < 4096; i++ {
		b.WriteString(parts[i%len(parts)])
		b.WriteByte(' ')
	}
	return b.String()[:4096]
}()

var texts = []struct {
	name string
	text string
}{
	{"sentence176B", sentence},
	{"paragraph4KiB", paragraph},
}

func BenchmarkAppendTerms(b *testing.B) {
	for _, bb := range texts {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bb.text)))
			var dst []string
			for b.Loop() {
				dst = AppendTerms(dst[:0], bb.text)
			}
		})
	}
}

// BenchmarkTermCounts is the write path: its allocations are the map it
// returns.
func BenchmarkTermCounts(b *testing.B) {
	for _, bb := range texts {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bb.text)))
			for b.Loop() {
				TermCounts(bb.text)
			}
		})
	}
}

// BenchmarkStemmer shows what the stem cache saves over running Snowball on
// every word of a sentence.
func BenchmarkStemmer(b *testing.B) {
	ws := strings.Fields(strings.ToLower(strings.Trim(sentence, ".")))
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		bufs := make([][]byte, len(ws))
		for i, w := range ws {
			bufs[i] = []byte(w)
		}
		for b.Loop() {
			for _, w := range bufs {
				termOf(w)
			}
		}
	})
	b.Run("uncached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, w := range ws {
				stem(w)
			}
		}
	})
}

func BenchmarkBM25Score(b *testing.B) {
	b.ReportAllocs()
	p := DefaultBM25
	idf := p.IDF(37, 10000)
	var sum float64
	for b.Loop() {
		for tf := 1; tf <= 8; tf++ {
			sum += p.Score(idf, tf, 40+tf, 52.5)
		}
	}
	if sum == 0 {
		b.Fatal("no score")
	}
}

func BenchmarkTopKPush10k(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	scores := make([]float64, 10000)
	for i := range scores {
		scores[i] = r.Float64() * 20
	}
	top := NewTopK(20)
	b.ReportAllocs()
	for b.Loop() {
		top.Reset(20)
		for doc, s := range scores {
			top.Push(uint64(doc), s)
		}
	}
}

func TestBenchmarkTextsHaveTheSizesTheyClaim(t *testing.T) {
	if len(sentence) != 176 || len(paragraph) != 4096 {
		t.Fatalf("sentence is %d bytes and paragraph %d, want 176 and 4096", len(sentence), len(paragraph))
	}
}
