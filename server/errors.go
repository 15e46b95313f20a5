package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
)

// envelope is the structured content of a failed tool call.
type envelope struct {
	Error wireError `json:"error"`
}

type wireError struct {
	Code    memgate.Code   `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// wire returns what a client may see of e: an internal error keeps its code
// and the fixed message, nothing else.
func wire(e *memgate.Error) wireError {
	if e.Code == memgate.CodeInternal || e.Code == "" {
		return wireError{Code: memgate.CodeInternal, Message: memgate.InternalMessage}
	}
	return wireError{Code: e.Code, Message: e.Message, Details: e.Details}
}

// errorResult is the one place a memgate error becomes a tool result:
// isError, the envelope as structured content and the same JSON as text.
func errorResult(e *memgate.Error) *mcp.CallToolResult {
	b := marshal(envelope{Error: wire(e)})
	return &mcp.CallToolResult{
		IsError:           true,
		StructuredContent: json.RawMessage(b),
		Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
	}
}

// successResult returns a tool result whose structured content is v and
// whose first content is the same JSON as text.
func successResult(v any) *mcp.CallToolResult {
	b := marshal(v)
	return &mcp.CallToolResult{
		StructuredContent: json.RawMessage(b),
		Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
	}
}

// marshal encodes v without escaping <, > and &, so a memory's text reads
// the same in the JSON text content as in the memory. Everything marshalled
// here is made of plain values that always encode.
func marshal(v any) []byte {
	// Memories and hits, a thousand to a page, have an encoder of their own
	// that writes the same bytes (a search answer is assembled from its
	// hits' bytes: hitsResult).
	switch v := v.(type) {
	case memgate.Memory:
		return v.AppendJSON(make([]byte, 0, 256+len(v.Text)))
	case memgate.Hit:
		return v.AppendJSON(make([]byte, 0, 256+len(v.Text)))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("server: marshal: " + err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// rpcError is the one place a memgate error becomes a JSON-RPC error, for
// the requests that have no tool result to carry it (resources and prompts).
// What the request itself asked wrongly (bad arguments, a missing memory, a
// namespace the caller may not use, too much) is -32602; what the server
// could not do is -32603. The memgate code and details travel in data.
func rpcError(e *memgate.Error) *jsonrpc.Error {
	w := wire(e)
	code := int64(jsonrpc.CodeInternalError)
	switch w.Code {
	case memgate.CodeInvalidArgument, memgate.CodeNotFound, memgate.CodeForbidden, memgate.CodeTooLarge:
		code = jsonrpc.CodeInvalidParams
	}
	return &jsonrpc.Error{Code: code, Message: w.Message, Data: marshal(w)}
}

// invalidParams is a -32602 protocol error with a fixed, value-free message.
func invalidParams(msg string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
}

// scrubErrors is a receiving middleware of every SDK server: it lets no
// protocol error repeat what was sent. memgate's own errors (invalidParams,
// rpcError) carry fixed messages and, as data, only the memgate envelope;
// the SDK's name the unknown tool or prompt in their message and put an
// unmatched resource URI in data. An error is passed on unchanged only when
// it is a bare *jsonrpc.Error whose data is a memgate envelope, or that has
// no data and a message that quotes nothing; any other keeps its code and gets the fixed
// message of that code, without data.
func scrubErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		switch {
		case err == nil:
		case method == "initialize" && strings.HasPrefix(err.Error(), `duplicate "initialize"`):
			// The SDK's answer to a session's second initialize, which
			// has no code: the client's mistake, not the server's.
			err = errInitializedAlready
		default:
			err = scrubError(err)
		}
		return res, err
	}
}

// scrubError is scrubErrors' rule for one error.
func scrubError(err error) error {
	// memgate's envelope in data marks an error of ours, whose message is
	// safe whatever it holds ("the store's file is damaged"); without data,
	// a message that quotes nothing.
	if rpc, ok := err.(*jsonrpc.Error); ok && ownData(rpc.Data) &&
		(len(bytes.TrimSpace(rpc.Data)) > 0 || !strings.ContainsAny(rpc.Message, "\"'`")) {
		return rpc
	}
	code := int64(jsonrpc.CodeInternalError)
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		code = rpc.Code
	}
	msg, ok := fixedMessages[code]
	for _, prefix := range []string{"unknown tool", "unknown prompt"} {
		if rpc != nil && code == jsonrpc.CodeInvalidParams && strings.HasPrefix(rpc.Message, prefix+" ") {
			msg = "invalid params: " + prefix
		}
	}
	if !ok {
		code, msg = jsonrpc.CodeInternalError, fixedMessages[jsonrpc.CodeInternalError]
	}
	return &jsonrpc.Error{Code: code, Message: msg}
}

// fixedMessages are the messages of protocol errors that are not memgate's.
var fixedMessages = map[int64]string{
	jsonrpc.CodeParseError:     "parse error",
	jsonrpc.CodeInvalidRequest: "invalid request",
	jsonrpc.CodeMethodNotFound: "method not found",
	jsonrpc.CodeInvalidParams:  "invalid params: an unknown name or a malformed request",
	jsonrpc.CodeInternalError:  "internal error",
}

// ownData reports whether data is absent or a memgate envelope as rpcError
// makes it: an object of code (a memgate code), message and details.
func ownData(data json.RawMessage) bool {
	if len(bytes.TrimSpace(data)) == 0 {
		return true
	}
	members, err := memgate.StrictObject(data, []string{"code", "message", "details"})
	if err != nil {
		return false
	}
	var code memgate.Code
	return json.Unmarshal(members["code"], &code) == nil && slices.Contains(memgate.Codes, code)
}
