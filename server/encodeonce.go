package server

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/memgate/memgate"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool's result is JSON twice over before the SDK sees it (the structured
// content, and the same JSON as text), and the SDK encodes it with
// encoding/json, which compacts every layer again: the text content, the
// structured content, the whole result; a 10 KB search answer is scanned
// three times after it was written. Over stdio memgate writes the answer
// itself, so there the result is encoded once, here, by the outermost
// middleware of the stdio server, and the SDK is handed a placeholder whose
// answer the connection replaces with those bytes (stdioConn.Write). The
// bytes are the SDK's own: json.Marshal of the result, checked by
// TestAppendToolResult. A result of any other shape, or of a session whose
// revision gives results a resultType (2026-07-28), goes through the SDK.

// revisionResultType is the first protocol revision whose tool results
// carry a resultType, which the SDK sets.
const revisionResultType = "2026-07-28"

// encodedPlaceholder is what the SDK encodes in place of a result encoded
// by encodeOnce; placeholderJSON is its encoding.
var (
	encodedPlaceholder = &mcp.CallToolResult{Content: []mcp.Content{}}
	placeholderJSON    = []byte(`{"content":[]}`)
)

// stdioConnKey marks the context of the requests a stdioConn serves.
type stdioConnKey struct{}

// encodeOnce is the outermost middleware of the stdio server: see above.
func encodeOnce(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		c, _ := ctx.Value(stdioConnKey{}).(*stdioConn)
		if c == nil || !c.encode(method, req, res) {
			return res, err
		}
		return encodedPlaceholder, nil
	}
}

// EncodeResult returns the result of a tools/call as json.Marshal writes
// it, which is what the SDK writes, for a transport that writes answers
// itself; it hands the SDK EncodedPlaceholder instead and puts these bytes
// where the SDK's answer has PlaceholderJSON. ok is false for a result of
// another shape, another method, or a session whose revision gives results
// a resultType (2026-07-28): those go through the SDK.
func EncodeResult(method string, req mcp.Request, res mcp.Result) (encoded []byte, ok bool) {
	return appendResult(nil, method, req, res)
}

// appendResult is EncodeResult appending to dst.
func appendResult(dst []byte, method string, req mcp.Request, res mcp.Result) ([]byte, bool) {
	if method != "tools/call" {
		return nil, false
	}
	call, _ := req.(*mcp.CallToolRequest)
	r, _ := res.(*mcp.CallToolResult)
	if call == nil || call.Extra == nil || r == nil || call.Session == nil {
		return nil, false
	}
	if p := call.Session.InitializeParams(); p == nil || p.ProtocolVersion >= revisionResultType {
		return nil, false
	}
	return appendToolResult(dst, r)
}

// EncodedPlaceholder is the result a transport that writes answers itself
// hands the SDK in place of one EncodeResult encoded; PlaceholderJSON is
// how the SDK encodes it.
func EncodedPlaceholder() *mcp.CallToolResult { return encodedPlaceholder }

// PlaceholderJSON returns the SDK's encoding of EncodedPlaceholder.
func PlaceholderJSON() []byte { return slices.Clone(placeholderJSON) }

// appendToolResult appends r as json.Marshal writes it, when r is of the
// shape memgate's tools give: text contents and structured content that is
// compact JSON (memgate's encoders write no white space), no _meta, no
// input requests. ok is false for any other.
func appendToolResult(b []byte, r *mcp.CallToolResult) (_ []byte, ok bool) {
	if r.Meta != nil || r.InputRequests != nil || r.RequestState != "" || r.NeedsInput() {
		return nil, false
	}
	sc, isRaw := r.StructuredContent.(json.RawMessage)
	if !isRaw || len(sc) == 0 || sc[0] != '{' {
		return nil, false
	}
	// The text copy is sc again with every quote escaped: room for both
	// at once, so that the answer is not copied at every growth.
	b = slices.Grow(b, 2*len(sc)+len(sc)/4+64)
	b = append(b, `{"content":[`...)
	for i, c := range r.Content {
		t, isText := c.(*mcp.TextContent)
		if !isText || t == nil || t.Meta != nil || t.Annotations != nil {
			return nil, false
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"text","text":`...)
		b = memgate.AppendHTMLString(b, t.Text)
		b = append(b, '}')
	}
	b = append(b, `],"structuredContent":`...)
	b = appendHTMLEscaped(b, sc)
	if r.IsError {
		b = append(b, `,"isError":true`...)
	}
	return append(b, '}'), true
}

const lowerHex = "0123456789abcdef"

// appendHTMLEscaped appends compact JSON js as json.Marshal writes a
// json.RawMessage: < > & and U+2028, U+2029 (which appear only inside its
// strings) escaped, the rest as it is.
func appendHTMLEscaped(dst, js []byte) []byte {
	start := 0
	for i := 0; i < len(js); i++ {
		switch c := js[i]; {
		case c == '<' || c == '>' || c == '&':
			dst = append(dst, js[start:i]...)
			dst = append(dst, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xF])
			start = i + 1
		case c == 0xE2 && i+2 < len(js) && js[i+1] == 0x80 && (js[i+2] == 0xA8 || js[i+2] == 0xA9):
			dst = append(dst, js[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', lowerHex[(js[i+2]-0xA0)&0xF])
			i += 2
			start = i + 1
		}
	}
	return append(dst, js[start:]...)
}
