// Package message checks JSON-RPC messages before the MCP SDK reads them,
// the same way for stdio (package server) and HTTP (package gateway): what
// the SDK would silently change or drop is refused with an answer. It also
// holds the errors of a JSON-RPC batch whose answers pass the response
// bound, which both transports send.
package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
)

// Both transports check every JSON-RPC message before the SDK sees it, the
// same way, so that what the SDK would silently change or drop is refused
// with an answer instead:
//
//   - keys are matched exactly and only once (memgate.StrictObject): a
//     member named like a JSON-RPC one in other case ("ID", "Method"), or
//     a key given twice, makes the message invalid, where one reader would
//     see a call and another a notification;
//   - an id is a string, or an integer that a float64 holds exactly: the
//     SDK reads numbers as float64 and truncates, so 1.5 and 2^63 would come
//     back as other ids;
//   - tools/call, resources/read and prompts/get need their params object
//     (memgate's contract for a malformed call is -32602; the SDK answers
//     -32600 or a plain-text 400).
//
// Refusals are fixed messages: none repeats what was sent.

// Members are the members of a JSON-RPC 2.0 message.
var Members = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// maxExactID is the largest integer id a float64 holds exactly (2^53).
const maxExactID = 1 << 53

var (
	errNotJSON = &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "parse error: a message is not JSON"}
	errTooDeep = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: fmt.Sprintf("invalid request: a message nests arrays and objects deeper than %d", memgate.MaxJSONDepth)}
	errInvalidMessage = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: "invalid request: not a JSON-RPC 2.0 message"}
	errInvalidID = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: "invalid request: an id is a string or an integer of at most 2^53"}
	errNeedsParams = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
		Message: "invalid params: this method needs its params object"}
	errUnknownMethod = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}
	errCallNeedsID   = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: "invalid request: a call needs an id that is a string or an integer"}
	errBadParams = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
		Message: "invalid params: the params do not have this method's fields and types, each once"}
)

// Refused reports whether e is one of the fixed refusals of Check,
// SplitBatch and CheckBatch: a fixed message and no data, so that no
// refusal repeats what was sent.
func Refused(e *jsonrpc.Error) bool {
	for _, f := range []*jsonrpc.Error{errNotJSON, errTooDeep, errInvalidMessage, errInvalidID, errCallNeedsID, errNeedsParams, errBadParams,
		errUnknownMethod, errBatchTooLong, errBatchEmpty, errBatchMessage, errBatchSyntax, errBatchInitialize, errBatchRepeatsID, ErrBatchRevision} {
		if e != nil && e.Code == f.Code && e.Message == f.Message && e.Data == nil {
			return true
		}
	}
	return false
}

// Check returns the error response to one JSON-RPC message that
// memgate refuses before the SDK sees it (nil to pass it on), and whether
// the message is a call, which the SDK will answer.
func Check(msg []byte) (*jsonrpc.Response, bool) {
	_, refusal, call := check(msg, false)
	return refusal, call
}

// Read is Check for a transport that hands the SDK decoded messages: a
// message it lets through comes back decoded as the SDK's
// jsonrpc.DecodeMessage would decode it, from the same one parse, its
// params a slice of msg (which the caller must not change afterwards).
func Read(msg []byte) (jsonrpc.Message, *jsonrpc.Response, bool) {
	return check(msg, true)
}

func check(msg []byte, decode bool) (jsonrpc.Message, *jsonrpc.Response, bool) {
	members, err := memgate.StrictObject(msg, nil)
	switch {
	case errors.Is(err, memgate.ErrJSONTooDeep):
		return nil, &jsonrpc.Response{Error: errTooDeep}, false
	case errors.Is(err, memgate.ErrJSONSyntax):
		return nil, &jsonrpc.Response{Error: errNotJSON}, false
	}
	// A key given twice inside a member, not among the message's own
	// members: the message is one message all the same, and its answer
	// names its id.
	nested := false
	if errors.Is(err, memgate.ErrDuplicateKey) {
		if m, ok := ownMembers(msg); ok {
			members, err, nested = m, nil, true
		}
	}
	if err != nil {
		return nil, &jsonrpc.Response{Error: errInvalidMessage}, false
	}
	id, idErr := messageID(members["id"])
	refuse := func(e *jsonrpc.Error) (jsonrpc.Message, *jsonrpc.Response, bool) {
		return nil, &jsonrpc.Response{ID: id, Error: e}, false
	}
	if idErr != nil {
		return nil, &jsonrpc.Response{Error: errInvalidID}, false
	}
	for key := range members {
		for _, m := range Members {
			if key != m && strings.EqualFold(key, m) {
				return refuse(errInvalidMessage)
			}
		}
	}
	if v := members["jsonrpc"]; string(v) != `"2.0"` {
		var version string
		if json.Unmarshal(v, &version) != nil || version != "2.0" {
			return refuse(errInvalidMessage)
		}
	}
	raw, hasMethod := members["method"]
	var method string
	if hasMethod {
		if plain(raw) {
			method = string(raw[1 : len(raw)-1])
		} else if json.Unmarshal(raw, &method) != nil {
			return refuse(errInvalidMessage)
		}
	}
	switch {
	case !hasMethod && !id.IsValid():
		return refuse(errInvalidMessage)
	case hasMethod && !id.IsValid() && serverMethods[method]:
		// A call without an id (absent or null) is no notification: the
		// SDK refuses it in plain text, or, inside a batch, after the
		// calls before it have run.
		return refuse(errCallNeedsID)
	case hasMethod && id.IsValid() && !serverMethods[method]:
		return refuse(errUnknownMethod)
	case hasMethod && id.IsValid() && needsParams[method] != nil && !paramsObject(members["params"]):
		return refuse(errNeedsParams)
	case hasMethod && id.IsValid() && needsParams[method] != nil && !paramsFit(members["params"], needsParams[method]()):
		return refuse(errBadParams)
	}
	call := hasMethod && id.IsValid()
	switch {
	case nested && !call:
		return refuse(errInvalidMessage)
	case nested && (method != "tools/call" || !twiceInArgumentsAlone(members["params"])):
		return refuse(errBadParams)
	}
	// A tool's arguments with a key given twice go on: the tool refuses
	// them itself, as invalid_argument naming the argument.
	if !decode {
		return nil, nil, call
	}
	if !hasMethod || !plain(raw) || (len(members["id"]) > 0 && members["id"][0] == '"' && !plain(members["id"])) {
		// A response, or a string the SDK's decoder might read otherwise
		// than encoding/json (escapes, bytes past ASCII): its own decoding.
		m, err := jsonrpc.DecodeMessage(msg)
		if err != nil {
			return refuse(errInvalidMessage)
		}
		return m, nil, call
	}
	return &jsonrpc.Request{ID: id, Method: method, Params: params(members["params"])}, nil, call
}

// ownMembers splits msg, one JSON object, into its members when none of
// its own keys is given twice (a key inside a member may be): false
// otherwise.
func ownMembers(msg []byte) (map[string]json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(msg))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	members := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		key, isKey := t.(string)
		if err != nil || !isKey {
			return nil, false
		}
		var v json.RawMessage
		if _, twice := members[key]; twice || dec.Decode(&v) != nil {
			return nil, false
		}
		members[key] = v
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err == nil {
		return nil, false // more after the object
	}
	return members, true
}

// twiceInArgumentsAlone reports whether the keys given twice in the params
// of a tools/call are all inside its arguments.
func twiceInArgumentsAlone(params json.RawMessage) bool {
	p, ok := ownMembers(params)
	if !ok {
		return false
	}
	for key, v := range p {
		if key != "arguments" && memgate.CheckUniqueKeys(v) != nil {
			return false
		}
	}
	return true
}

// params is a request's params as the SDK's decoder gives them: absent is
// nil, anything else the value's bytes.
func params(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	return raw
}

// plain reports whether raw is a JSON string of printable ASCII without
// escapes, which every decoder reads as its bytes between the quotes.
func plain(raw []byte) bool {
	return len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' && PlainString(string(raw[1:len(raw)-1]))
}

// PlainString reports whether s is printable ASCII without a quote, a
// backslash or one of < > &: a JSON string of s is s between quotes, for
// every decoder and for encoding/json with or without HTML escaping.
func PlainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// messageID reads an id: absent or null (no id), a string, or an integer
// literal within ±2^53.
func messageID(raw json.RawMessage) (jsonrpc.ID, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return jsonrpc.ID{}, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return jsonrpc.ID{}, err
		}
		return jsonrpc.MakeID(s)
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n > maxExactID || n < -maxExactID {
		return jsonrpc.ID{}, errInvalidID
	}
	return jsonrpc.MakeID(float64(n))
}

// serverMethods are the calls the SDK's server (v1.8.0) answers. Any other
// the SDK would refuse with a message that repeats its name.
var serverMethods = map[string]bool{
	"initialize": true, "ping": true, "tools/list": true, "tools/call": true,
	"resources/list": true, "resources/read": true, "resources/templates/list": true,
	"resources/subscribe": true, "resources/unsubscribe": true, "prompts/list": true, "prompts/get": true,
	"completion/complete": true, "logging/setLevel": true, "server/discover": true, "subscriptions/listen": true,
}

// needsParams lists the methods whose call is malformed without params,
// each with the SDK's type of its params.
var needsParams = map[string]func() any{
	"tools/call":     func() any { return new(mcp.CallToolParamsRaw) },
	"resources/read": func() any { return new(mcp.ReadResourceParams) },
	"prompts/get":    func() any { return new(mcp.GetPromptParams) },
}

// paramsFit reports whether params decode into v (Check has already
// refused a key given twice). The SDK's own decoding error would repeat the
// params, memory text and all.
func paramsFit(params json.RawMessage, v any) bool {
	return json.Unmarshal(params, v) == nil
}

func paramsObject(p json.RawMessage) bool {
	p = bytes.TrimSpace(p)
	return len(p) > 0 && p[0] == '{'
}

// Encode is the JSON of a refusal Check made.
func Encode(r *jsonrpc.Response) []byte {
	b, err := jsonrpc.EncodeMessage(r)
	if err != nil {
		// A response of a fixed message and a checked id always encodes.
		panic("server: encode response: " + err.Error())
	}
	return b
}

// MaxBatch is the most messages a JSON-RPC batch (2025-03-26) may hold.
const MaxBatch = 32

var (
	errBatchTooLong = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: "invalid request: a batch holds at most 32 messages"}
	errBatchEmpty = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: "invalid request: an empty batch"}
	errBatchMessage = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: "invalid request: a message of the batch is malformed"}
	errBatchSyntax = &jsonrpc.Error{Code: jsonrpc.CodeParseError,
		Message: "parse error: a batch is not JSON"}
	errBatchInitialize = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: "invalid request: initialize cannot be part of a batch"}
	errBatchRepeatsID = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: "invalid request: a batch repeats an id"}
	// ErrBatchRevision refuses a batch in a session of a revision without
	// batches (2025-06-18 and later).
	ErrBatchRevision = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: "invalid request: batches are not part of protocol revisions 2025-06-18 and later"}
)

// SplitBatch returns the messages of a batch, or the error that refuses the
// batch whole: not JSON, empty, longer than MaxBatch, holding a message
// Check refuses, holding initialize (which, the 2025-03-26 revision says,
// is never part of one), or two calls of one id (whose answers a client
// could not tell apart).
func SplitBatch(body []byte) ([]json.RawMessage, *jsonrpc.Error) {
	if err := memgate.CheckUniqueKeys(body); errors.Is(err, memgate.ErrJSONSyntax) {
		return nil, errBatchSyntax
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(body, &msgs); err != nil {
		return nil, errBatchSyntax
	}
	switch {
	case len(msgs) == 0:
		return nil, errBatchEmpty
	case len(msgs) > MaxBatch:
		return nil, errBatchTooLong
	}
	ids := make(map[any]bool, len(msgs))
	for _, m := range msgs {
		refusal, isCall := Check(m)
		if refusal != nil {
			return nil, errBatchMessage
		}
		var call struct {
			Method string `json:"method"`
			ID     any    `json:"id"` // a string or an exact integer: Check let it through
		}
		if json.Unmarshal(m, &call) != nil {
			return nil, errBatchMessage
		}
		if call.Method == "initialize" {
			return nil, errBatchInitialize
		}
		if isCall {
			if ids[call.ID] {
				return nil, errBatchRepeatsID
			}
			ids[call.ID] = true
		}
	}
	return msgs, nil
}

// ReadBatch is SplitBatch with each message decoded, as Read decodes it.
func ReadBatch(body []byte) ([]jsonrpc.Message, *jsonrpc.Error) {
	raws, err := SplitBatch(body)
	if err != nil {
		return nil, err
	}
	msgs := make([]jsonrpc.Message, 0, len(raws))
	for _, raw := range raws {
		m, refusal, _ := Read(raw)
		if refusal != nil {
			return nil, errBatchMessage
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// CheckBatch is SplitBatch's verdict alone.
func CheckBatch(body []byte) *jsonrpc.Error {
	_, err := SplitBatch(body)
	return err
}

// The errors of the calls of a batch whose answers pass the response
// bound: the one whose answer did not fit, which ran, and those after it,
// which did not. (Implementation-defined server errors, -32000.)
var (
	ErrBatchRan = &jsonrpc.Error{Code: -32000,
		Message: "the answer passes the response bound of its batch; the call ran, send it alone to see its answer"}
	ErrBatchNotRun = &jsonrpc.Error{Code: -32000,
		Message: "not run: the answers of its batch passed the response bound; send it again in a smaller batch"}
)

// BatchError is the error answer to the call of a batch with id.
func BatchError(id json.RawMessage, e *jsonrpc.Error) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *jsonrpc.Error  `json:"error"`
	}{"2.0", id, e})
	return b
}
