package server

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
	"unsafe"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
)

// Every answer is bounded by Options.MaxResponseBytes (--max-response-bytes).
// A tool result carries its data twice: as structuredContent and as the
// same JSON inside content[0].text, a JSON string. The SDK writes both with
// Go's encoder, which escapes < > & as \u003c; in the text copy every " and
// \ of the JSON gains a backslash. A memory of control characters thus
// costs about 13 bytes on the wire per text byte (\u0001, then \\u0001).
// Each item is encoded once, its cost counted from those bytes, and the
// bytes reused for the answer.

// answerOverhead is what an answer holds besides its items, in both copies:
// the JSON-RPC envelope, the result's keys, a next_cursor, the receipt, the
// framing of an HTTP event stream. The request id, which the caller chose,
// comes on top: the transports bound a request.
const answerOverhead = 2 << 10

// itemBudget is how many bytes the items of one answer may cost.
func (s *Server) itemBudget() int { return s.maxReply - answerOverhead }

// escapedLen returns the length of b written as the contents of a JSON
// string by the SDK's encoder: quotes and backslashes gain a backslash,
// control characters, < > &, U+2028, U+2029 and invalid bytes become
// escapes of up to six bytes.
func escapedLen(b []byte) int {
	n := len(b)
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
				n++
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 5
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 5 // \ufffd for one byte
		case r == '\u2028' || r == '\u2029':
			n += 3
		}
		i += size
	}
	return n
}

// rawLen returns the length of JSON e as the SDK writes it for
// structuredContent: e itself, with < > & written \u003c.
func rawLen(e []byte) int {
	n := len(e)
	for _, c := range e {
		if c == '<' || c == '>' || c == '&' {
			n += 5
		}
	}
	return n
}

// wireCost is what JSON value e costs in a tool result: once as structured
// content, once inside the text copy. It is rawLen(e) + escapedLen(e) in
// one pass over valid UTF-8, the only kind an encoder gives.
func wireCost(e []byte) int {
	if !utf8.Valid(e) {
		return rawLen(e) + escapedLen(e)
	}
	n := 2 * len(e)
	for i, c := range e {
		switch extra := wireExtra[c]; {
		case extra != 0:
			n += int(extra)
		case c == 0xE2 && i+2 < len(e) && e[i+1] == 0x80 && (e[i+2] == 0xA8 || e[i+2] == 0xA9):
			n += 3 // U+2028, U+2029
		}
	}
	return n
}

// wireExtra is what an ASCII byte of a JSON value costs beyond its two
// copies (see escapedLen and rawLen).
var wireExtra = func() (t [256]uint8) {
	for c := range utf8.RuneSelf {
		switch {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			t[c] = 1
		case c == '<' || c == '>' || c == '&':
			t[c] = 10
		case c < 0x20:
			t[c] = 5
		}
	}
	return t
}()

// items gathers the encoded items of one answer while they fit in its
// budget: the first always joins.
type items struct {
	budget int
	enc    [][]byte
	used   []int // used[i]: the cost of the first i items
}

func newItems(budget int) *items { return &items{budget: budget, used: []int{0}} }

// take encodes v as the item at index i (dropping any from i on: a store may
// start a page over) and reports whether it fits.
func (it *items) take(i int, v any) bool {
	if i > len(it.enc) {
		i = len(it.enc)
	}
	it.enc, it.used = it.enc[:i], it.used[:i+1]
	e := marshal(v)
	cost := wireCost(e) + 2 // the comma before it, in both copies
	if i > 0 && it.used[i]+cost > it.budget {
		return false
	}
	it.enc = append(it.enc, e)
	it.used = append(it.used, it.used[i]+cost)
	return true
}

// array writes the items as a JSON array.
func (it *items) array(b *bytes.Buffer) {
	b.WriteByte('[')
	for i, e := range it.enc {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(e)
	}
	b.WriteByte(']')
}

// pageResult is the result of list: the page's memories, encoded once while
// they were taken, and its cursor.
func pageResult(it *items, next string) *mcp.CallToolResult {
	var b bytes.Buffer
	size := 64 + len(next)
	for _, e := range it.enc {
		size += len(e) + 1
	}
	b.Grow(size)
	b.WriteString(`{"memories":`)
	it.array(&b)
	if next != "" {
		b.WriteString(`,"next_cursor":`)
		b.Write(marshal(next))
	}
	b.WriteByte('}')
	return rawResult(b.Bytes())
}

// rawResult is successResult of JSON that is already encoded.
func rawResult(js []byte) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		StructuredContent: json.RawMessage(js),
		Content:           []mcp.Content{&mcp.TextContent{Text: string(js)}},
	}
}

// hitsResult is the result of search: the hits of r that fit in budget,
// the first always, and the receipt, which says when some were left out.
// The receipt counts against the budget: it may list the namespaces
// searched. The answer is written into one buffer as it goes, each hit's
// cost counted from its bytes there: a search answer is most of what a
// search allocates, and a buffer grown piece by piece is copied again at
// every growth.
func hitsResult(r memgate.Result, budget int) *mcp.CallToolResult {
	receipt := r.Receipt
	receipt.Truncated = true
	size := 64
	for _, h := range r.Hits {
		size += hitSize(h)
	}
	b := make([]byte, 0, size)
	b = receipt.AppendJSON(b)
	budget -= wireCost(b)
	b = append(b[:0], `{"hits":[`...)
	used := 0
	for i, h := range r.Hits {
		at := len(b)
		if i > 0 {
			b = append(b, ',')
		}
		start := len(b)
		b = h.AppendJSON(b)
		cost := wireCost(b[start:]) + 2 // the comma before it, in both copies
		if i > 0 && used+cost > budget {
			b = b[:at]
			r.Receipt.Truncated = true
			break
		}
		used += cost
	}
	b = append(b, `],"receipt":`...)
	b = r.Receipt.AppendJSON(b)
	return sharedResult(append(b, '}'))
}

// hitSize is about what h's JSON takes: its strings, and room for the
// keys, times, scores and escapes around them.
func hitSize(h memgate.Hit) int {
	n := 320 + len(h.ID) + len(h.Text) + len(h.Title) + len(h.Namespace)
	for _, t := range h.Tags {
		n += len(t) + 3
	}
	for k, v := range h.Metadata {
		n += len(k) + 8
		if s, ok := v.(string); ok {
			n += len(s)
		} else {
			n += 24
		}
	}
	if h.Source != nil {
		n += 96 + len(h.Source.Kind) + len(h.Source.Reference) + len(h.Source.Actor)
	}
	return n + n/16
}

// sharedResult is rawResult without the copy of js for the text content:
// the text is js itself, which must not change after (nothing writes to an
// answer's bytes once it is built). A search answer is the largest a call
// makes, and both copies of it are read, never written, by whoever
// encodes the result.
func sharedResult(js []byte) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		StructuredContent: json.RawMessage(js),
		Content:           []mcp.Content{&mcp.TextContent{Text: unsafe.String(unsafe.SliceData(js), len(js))}},
	}
}

// promptCost is what memory m costs embedded in a prompt: its text once, as
// a JSON string, its id twice (the URI, percent-encoded, and _meta), its
// title and tags, and the keys of the resource around them.
func promptCost(m memgate.Memory) int {
	n := escapedLen([]byte(m.Text)) + escapedLen([]byte(m.ID)) + 3*len(m.ID) + escapedLen([]byte(m.Title)) + 256
	for _, t := range m.Tags {
		n += escapedLen([]byte(t)) + 3
	}
	return n
}

// memoryBudget admits the memories of a prompt while they fit in budget:
// the first always.
type memoryBudget struct {
	budget int
	used   []int // used[i]: the cost of the first i memories
}

func newMemoryBudget(budget int) *memoryBudget { return &memoryBudget{budget: budget, used: []int{0}} }

// take reports whether m, the memory at index i (a store may start a page
// over), fits.
func (b *memoryBudget) take(i int, m memgate.Memory) bool {
	i = min(i, len(b.used)-1)
	b.used = b.used[:i+1]
	c := promptCost(m)
	if i > 0 && b.used[i]+c > b.budget {
		return false
	}
	b.used = append(b.used, b.used[i]+c)
	return true
}
