package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/memgate/memgate"
)

// args holds one call's arguments, split into top-level fields but not yet
// decoded further: a tool's params decode them (params.go). A field that is
// present with the value null counts as absent: several hosts send null for
// an optional argument they leave out.
type args map[string]json.RawMessage

// errNotObject answers tools/call arguments that are not a JSON object: the
// request itself is malformed, so it is a protocol error, not a tool error.
var errNotObject = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
	Message: "invalid params: tools/call arguments must be a JSON object"}

// decodeArgs splits raw into its fields. Arguments that are missing or null
// are an empty object; any other value that is not an object is errNotObject.
// A field outside allowed, or given twice, is invalid_argument; so is one
// holding a string that is not valid UTF-8 or has a lone surrogate escape,
// which Go's decoder would turn into U+FFFD. Keys are matched exactly, case
// included.
func decodeArgs(raw json.RawMessage, allowed []string) (args, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return args{}, nil
	}
	if raw[0] != '{' {
		return nil, errNotObject
	}
	if a, ok := plainArgs(raw, allowed); ok {
		return a, nil
	}
	return readArgs(raw, allowed)
}

// readArgs is decodeArgs of an object, with encoding/json.
func readArgs(raw json.RawMessage, allowed []string) (args, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, errNotObject
	}
	a := args{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errNotObject
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, errNotObject
		}
		if !contains(allowed, key) {
			return nil, memgate.Invalid(fieldName(key), "unknown argument; this tool takes only the arguments its input schema lists")
		}
		if !memgate.ValidJSONText(v) {
			return nil, badText(textField(key, v))
		}
		if _, dup := a[key]; dup {
			return nil, memgate.Invalid(key, "%s is given more than once", key)
		}
		a[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, errNotObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errNotObject
	}
	if !memgate.ValidJSONText(raw) { // a key, then
		return nil, badText("arguments")
	}
	return a, nil
}

// plainArgs is decodeArgs of the arguments most calls send, read without
// encoding/json: an object of allowed keys, none twice, whose values are
// strings without escapes (of valid UTF-8), numbers, booleans or null — a
// search's query and limit. false for anything else (nested values,
// escapes, a key that is not allowed, any fault), which readArgs reads and
// judges.
func plainArgs(raw []byte, allowed []string) (args, bool) {
	i := jsonSpace(raw, 0)
	if i == len(raw) || raw[i] != '{' {
		return nil, false
	}
	a := args{}
	i = jsonSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return a, jsonSpace(raw, i+1) == len(raw)
	}
	for {
		end, ok := plainStringEnd(raw, i)
		if !ok {
			return nil, false
		}
		key := raw[i+1 : end-1]
		if !containsBytes(allowed, key) {
			return nil, false
		}
		if _, dup := a[string(key)]; dup {
			return nil, false
		}
		i = jsonSpace(raw, end)
		if i == len(raw) || raw[i] != ':' {
			return nil, false
		}
		i = jsonSpace(raw, i+1)
		if end, ok = plainValueEnd(raw, i); !ok {
			return nil, false
		}
		a[string(key)] = json.RawMessage(raw[i:end])
		i = jsonSpace(raw, end)
		if i == len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = jsonSpace(raw, i+1)
		case '}':
			return a, jsonSpace(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
}

func containsBytes(list []string, b []byte) bool {
	for _, s := range list {
		if s == string(b) {
			return true
		}
	}
	return false
}

// jsonSpace returns the index of the first byte of b from i on that is not
// JSON white space.
func jsonSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainStringEnd returns the index after the JSON string at b[i] when it
// has no escape and no control character and is valid UTF-8.
func plainStringEnd(b []byte, i int) (int, bool) {
	if i == len(b) || b[i] != '"' {
		return 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, utf8.Valid(b[i+1 : j])
		case c == '\\' || c < 0x20:
			return 0, false
		}
	}
	return 0, false
}

// plainValueEnd returns the index after the value at b[i] when it is a
// plain string (plainStringEnd), a number, true, false or null.
func plainValueEnd(b []byte, i int) (int, bool) {
	if i == len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return plainStringEnd(b, i)
	case 't', 'f', 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(b[i:], []byte(lit)) {
				return i + len(lit), true
			}
		}
		return 0, false
	}
	// A number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
	j := i
	digits := func() int {
		start := j
		for j < len(b) && '0' <= b[j] && b[j] <= '9' {
			j++
		}
		return j - start
	}
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case digits() == 0:
		return 0, false
	}
	if j < len(b) && b[j] == '.' {
		j++
		if digits() == 0 {
			return 0, false
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if digits() == 0 {
			return 0, false
		}
	}
	return j, true
}

// textField names where argument key, whose value v holds bad text, holds
// it: the field of a source (source.reference, …), whose names are fixed;
// key itself for anything else.
func textField(key string, v json.RawMessage) string {
	if key != "source" {
		return key
	}
	members, err := memgate.StrictObject(v, nil)
	if err != nil {
		return key
	}
	for _, f := range []string{"kind", "reference", "actor", "observed_at"} {
		if m, ok := members[f]; ok && !memgate.ValidJSONText(m) {
			return key + "." + f
		}
	}
	return key
}

// badText refuses a field that holds invalid UTF-8 or a lone surrogate.
func badText(field string) error {
	return memgate.Invalid(field, "%s must be valid UTF-8: no invalid bytes, no lone surrogate escapes (\\ud800-\\udfff)", field)
}

// fieldName returns an unknown argument's name for details.field when it is
// short and plain, and "arguments" otherwise, so the error never carries an
// arbitrary value a caller sent as a key.
func fieldName(key string) string {
	if key == "" || len(key) > 64 {
		return "arguments"
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return "arguments"
		}
	}
	return key
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// value returns the raw value of field name, and false when it is absent or
// null.
func (a args) value(name string) (json.RawMessage, bool) {
	v, ok := a[name]
	if !ok || string(v) == "null" {
		return nil, false
	}
	return v, true
}

// The decoders of one argument's value: v is given and not null. Each
// checks the JSON type and the bounds it is given, and names the argument
// in its error.

// decodeString decodes a string.
func decodeString(name string, v json.RawMessage) (string, error) {
	if v[0] != '"' {
		return "", memgate.Invalid(name, "%s must be a string", name)
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", memgate.Invalid(name, "%s must be a string", name)
	}
	return s, nil
}

// decodeBool decodes a boolean.
func decodeBool(name string, v json.RawMessage) (bool, error) {
	switch string(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, memgate.Invalid(name, "%s must be true or false", name)
}

// decodeInteger decodes an integer in [min, max]. A number with a zero
// fraction (10.0, 1e1) is an integer, as JSON Schema has it; digits are read
// exactly, so no large value is rounded into range.
func decodeInteger(name string, v json.RawMessage, min, max int64) (int64, error) {
	if c := v[0]; c != '-' && (c < '0' || c > '9') {
		return 0, memgate.Invalid(name, "%s must be an integer", name)
	}
	// The errors are made only when needed: this is on every call's path.
	outOfRange := func() error { return memgate.Invalid(name, "%s must be an integer from %d to %d", name, min, max) }
	s := string(v)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, outOfRange()
		}
		f, ferr := strconv.ParseFloat(s, 64)
		switch {
		case ferr != nil && !errors.Is(ferr, strconv.ErrRange):
			return 0, memgate.Invalid(name, "%s must be an integer", name)
		case math.IsInf(f, 0) || math.Abs(f) >= 1<<63:
			return 0, outOfRange()
		case f != math.Trunc(f):
			return 0, memgate.Invalid(name, "%s must be an integer", name)
		}
		n = int64(f)
	}
	if n < min || n > max {
		return 0, outOfRange()
	}
	return n, nil
}

// decodeStrings decodes an array of at most maxItems strings.
func decodeStrings(name string, v json.RawMessage, maxItems int) ([]string, error) {
	notList := func() error { return memgate.Invalid(name, "%s must be an array of strings", name) }
	if v[0] != '[' {
		return nil, notList()
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil {
		return nil, notList()
	}
	if len(items) > maxItems {
		return nil, memgate.Invalid(name, "%s may hold at most %d items", name, maxItems)
	}
	out := make([]string, len(items))
	for i, item := range items {
		if len(item) == 0 || item[0] != '"' || json.Unmarshal(item, &out[i]) != nil {
			return nil, notList()
		}
	}
	return out, nil
}

// decodeFlatObject decodes an object whose values are strings, numbers,
// booleans or null, and whose keys do not repeat. Numbers become float64, as
// memgate stores them. The rules on keys and size are
// memgate.NormalizeMetadata's, for the caller to apply.
func decodeFlatObject(name string, v json.RawMessage) (map[string]any, error) {
	notObject := func() error { return memgate.Invalid(name, "%s must be an object", name) }
	notFlat := func() error {
		return memgate.Invalid(name, "%s values must be a string, a number, a boolean or null", name)
	}
	if v[0] != '{' {
		return nil, notObject()
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, notObject()
	}
	out := map[string]any{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, notObject()
		}
		key, _ := tok.(string)
		if _, dup := out[key]; dup {
			return nil, memgate.Invalid(name, "%s has a key more than once", name)
		}
		val, err := dec.Token()
		if err != nil {
			return nil, notObject()
		}
		switch x := val.(type) {
		case json.Delim:
			return nil, notFlat()
		case string:
			if !utf8.ValidString(x) {
				return nil, notFlat()
			}
			out[key] = x
		case json.Number:
			f, err := x.Float64()
			if err != nil {
				return nil, notFlat()
			}
			out[key] = f
		default: // bool or nil
			out[key] = x
		}
	}
	return out, nil
}

// decodeTime decodes an RFC 3339 time (a string), in UTC.
func decodeTime(name string, v json.RawMessage) (time.Time, error) {
	s, err := decodeString(name, v)
	if err != nil {
		return time.Time{}, err
	}
	return memgate.ParseTime(name, s)
}

// decodeSource decodes a memory's source: an object of kind, reference,
// actor and an optional observed_at, nothing else; its rules are
// memgate.NormalizeSource's.
func decodeSource(name string, v json.RawMessage) (memgate.Source, error) {
	var src memgate.Source
	members, err := memgate.StrictObject(v, []string{"kind", "reference", "actor", "observed_at"})
	if err != nil {
		var ke *memgate.KeyError
		if errors.As(err, &ke) && errors.Is(err, memgate.ErrUnknownKey) {
			return src, memgate.Invalid(name, "%s holds only kind, reference, actor and observed_at", name)
		}
		return src, memgate.Invalid(name, "%s must be an object of kind, reference, actor and observed_at", name)
	}
	for _, f := range []struct {
		key string
		to  *string
	}{{"kind", &src.Kind}, {"reference", &src.Reference}, {"actor", &src.Actor}} {
		raw, ok := members[f.key]
		if !ok || string(raw) == "null" {
			return src, memgate.Invalid(name+"."+f.key, "%s.%s is required", name, f.key)
		}
		if *f.to, err = decodeString(name+"."+f.key, raw); err != nil {
			return src, err
		}
	}
	if raw, ok := members["observed_at"]; ok && string(raw) != "null" {
		t, err := decodeTime(name+".observed_at", raw)
		if err != nil {
			return src, err
		}
		src.ObservedAt = &t
	}
	return memgate.NormalizeSource(name, src)
}
