package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/memgate/memgate"
)

// corpusHits are ten hits of the shape S3's search answers: a text of about
// 176 bytes, an id of a UUID's length, two tags and two metadata keys.
func corpusHits() memgate.Result {
	at := time.Date(2026, 12, 2, 3, 4, 5, 123456789, time.UTC)
	words := strings.Fields("a deep-seated natural tendency of someone to resist change; (usually followed by `to') " +
		"having the necessary means or skill or know-how or authority to do something")
	r := memgate.Result{Receipt: memgate.Receipt{RetrievalMode: memgate.RetrievalLexical, Candidates: 4180}}
	for i := range 10 {
		text := strings.Join(append(words[i:], words[:i]...), " ")
		m := memgate.Memory{ID: fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i*7919), Text: text, Bytes: len(text),
			Tags: []string{"noun", "noun.attribute"}, Metadata: map[string]any{"pos": "noun", "lex": "noun.attribute"},
			CreatedAt: at, UpdatedAt: at, Version: int64(1000 + i)}
		r.Hits = append(r.Hits, memgate.Hit{Memory: m, Score: 1 / float64(i+1), LexicalScore: 11.5 / float64(i+1)})
	}
	return r
}

// BenchmarkSearchAnswer is what the server does with a search's ten hits
// over stdio: the answer (hitsResult), then the JSON-RPC response with the
// tool result encoded once inside it, into a buffer used again for every
// answer (stdioConn.encode).
func BenchmarkSearchAnswer(b *testing.B) {
	r := corpusHits()
	id, _ := jsonrpc.MakeID(float64(7))
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		res := hitsResult(r, memgate.DefaultMaxResponseBytes-answerOverhead)
		line, _ := appendResponseHead(buf[:0], id)
		line, ok := appendToolResult(line, res)
		if !ok {
			b.Fatal("not encoded")
		}
		buf = append(line, '}', '\n')
	}
	b.ReportMetric(float64(len(buf)), "bytes")
}
