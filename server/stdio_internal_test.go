package server

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/server/message"
)

// FuzzStdioLine: a line the connection passes to the SDK is read as the
// SDK's own decoder would read it (message.Read decodes it to what
// jsonrpc.DecodeMessage gives): every key exact and once, the same call or
// not, the same id, method and params; and a refusal never repeats the line.
func FuzzStdioLine(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"ID":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"METHOD":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","method":"x"}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":null}`,
		`{"jsonrpc":"2.0","id":"a","result":{}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			return
		}
		answer, call := checkLine(line)
		if answer != nil {
			if call {
				t.Fatal("a refused line counted as a call")
			}
			got, _ := answer.Error.(*jsonrpc.Error)
			if got == nil {
				t.Fatalf("a refusal without a JSON-RPC error: %v", answer.Error)
			}
			if !message.Refused(got) {
				t.Fatalf("the refusal %s is not a fixed message", message.Encode(answer))
			}
			return
		}
		if line[0] == '[' {
			return
		}
		members := map[string]int{}
		dec := json.NewDecoder(bytes.NewReader(line))
		if _, err := dec.Token(); err != nil {
			t.Fatalf("passed a line that is not JSON: %q", line)
		}
		for dec.More() {
			tok, _ := dec.Token()
			key := tok.(string)
			members[key]++
			if members[key] > 1 {
				t.Fatalf("passed a line with a key twice: %q", line)
			}
			for _, m := range message.Members {
				if key != m && strings.EqualFold(key, m) {
					t.Fatalf("passed a line with %q for %q: %q", key, m, line)
				}
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
		}
		msg, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			return // the SDK answers it itself
		}
		ours, refusal, _ := message.Read(line)
		if refusal != nil {
			t.Fatalf("Check passed a line Read refuses: %q", line)
		}
		if sdk, _ := jsonrpc.EncodeMessage(msg); func() bool { b, _ := jsonrpc.EncodeMessage(ours); return !bytes.Equal(b, sdk) }() {
			t.Fatalf("decoded otherwise than the SDK decodes it: %q", line)
		}
		if sr, ok := msg.(*jsonrpc.Request); ok {
			or, ok := ours.(*jsonrpc.Request)
			if !ok || or.ID != sr.ID || or.Method != sr.Method || !bytes.Equal(or.Params, sr.Params) || (or.Params == nil) != (sr.Params == nil) {
				t.Fatalf("decoded otherwise than the SDK decodes it: %q", line)
			}
		}
		req, isReq := msg.(*jsonrpc.Request)
		if sdkCall := isReq && req.IsCall(); sdkCall != call {
			t.Fatalf("the filter reads a call %v, the SDK %v: %q", call, sdkCall, line)
		}
		var raw struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal(line, &raw)
		if call {
			back, _ := json.Marshal(req.ID.Raw())
			var want, got any
			json.Unmarshal(raw.ID, &want)
			json.Unmarshal(back, &got)
			if string(bytes.TrimSpace(raw.ID)) != string(back) && !(isString(raw.ID) && got == want) {
				t.Fatalf("id %s comes back as %s", raw.ID, back)
			}
		}
	})
}

func isString(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '"'
}

// BenchmarkCheckMessage: what reading a remember call of 64 KiB of text
// exactly costs before the SDK decodes it again.
func BenchmarkCheckMessage(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"remember","arguments":{"text":"` +
		strings.Repeat("a plain sentence of memory text. ", 2000) + `","tags":["a","b"],"metadata":{"k":"v"}}}}`)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if refusal, call := message.Check(msg); refusal != nil || !call {
			b.Fatal("refused")
		}
	}
}

func BenchmarkCheckMessageSmall(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"query":"release notes","limit":10}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if refusal, call := message.Check(msg); refusal != nil || !call {
			b.Fatal("refused")
		}
	}
}

// TestAppendResponse: an answer is written byte for byte as
// jsonrpc.EncodeMessage writes it, whatever its id and result.
func TestAppendResponse(t *testing.T) {
	results := []string{`{}`, `{"content":[{"type":"text","text":"a \u003c b"}],"structuredContent":{"x":"<&>"}}`, `[1,2]`, ``}
	ids := []any{float64(0), float64(-7), float64(1 << 53), "", "abc", "a\"b", "<x>", "é", "a\\b"}
	for _, raw := range ids {
		id, err := jsonrpc.MakeID(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			for _, e := range []error{nil, &jsonrpc.Error{Code: -32602, Message: "invalid params"}} {
				resp := &jsonrpc.Response{ID: id, Result: json.RawMessage(r), Error: e}
				want, err := jsonrpc.EncodeMessage(resp)
				if err != nil {
					t.Fatal(err)
				}
				got, err := appendResponse([]byte("x"), resp)
				if err != nil || string(got) != "x"+string(want) {
					t.Errorf("id %v, result %q, error %v: %s, want %s (%v)", raw, r, e, got[1:], want, err)
				}
			}
		}
	}
}

// TestAppendToolResult: a result encodeOnce encodes is json.Marshal's
// bytes, which are what the SDK writes, whatever its text holds.
func TestAppendToolResult(t *testing.T) {
	texts := []string{"", "plain", `quote " and \ backslash`, "<b>&amp;</b>", "line\nbreak\ttab\r\b\f\x00\x1f",
		"\u2028\u2029", "é ü 日本", "bad \xff utf-8", "\x7f del"}
	for _, text := range texts {
		for _, isError := range []bool{false, true} {
			sc := marshal(map[string]string{"text": text, "<k>": "&"})
			r := &mcp.CallToolResult{IsError: isError, StructuredContent: json.RawMessage(sc),
				Content: []mcp.Content{&mcp.TextContent{Text: string(sc)}, &mcp.TextContent{Text: text}}}
			want, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := appendToolResult(nil, r)
			if !ok || string(got) != string(want) {
				t.Errorf("text %q: %s\nwant %s", text, got, want)
			}
		}
	}
	if b, _ := json.Marshal(encodedPlaceholder); string(b) != string(placeholderJSON) {
		t.Errorf("the placeholder encodes as %s, not %s", b, placeholderJSON)
	}
	for _, r := range []*mcp.CallToolResult{
		{StructuredContent: map[string]any{"a": 1}},
		{StructuredContent: json.RawMessage(`{}`), Content: []mcp.Content{&mcp.ImageContent{Data: []byte("x")}}},
		{StructuredContent: json.RawMessage(`{}`), Meta: mcp.Meta{"k": "v"}},
	} {
		if _, ok := appendToolResult(nil, r); ok {
			t.Errorf("encoded a result of another shape: %+v", r)
		}
	}
}
