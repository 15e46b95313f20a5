package memgate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
)

// Decoding outside input. encoding/json matches an object's keys to struct
// fields ignoring case, and keeps the last of two equal keys: so "ID" fills
// an id field, and {"namespaces": [...], "NAMESPACES": null} decodes as if
// no namespaces were given. The MCP SDK matches keys exactly. Every decoder
// of what a caller or a file sends goes through StrictObject or
// CheckUniqueKeys first, so two readers of one message can never see two
// different messages in it.

// Errors of StrictObject and CheckUniqueKeys. Their messages never repeat
// the input.
var (
	ErrJSONSyntax   = errors.New("not one well-formed JSON value")
	ErrNotObject    = errors.New("not a JSON object")
	ErrDuplicateKey = errors.New("an object holds the same key twice")
	ErrUnknownKey   = errors.New("an object holds a key that is not one of its fields")
)

// A KeyError names the key that broke a rule: ErrDuplicateKey or
// ErrUnknownKey. Its message leaves the key out (it is what was sent); a
// caller that names it, say as a field, checks it first.
type KeyError struct {
	Key string
	Err error
}

func (e *KeyError) Error() string { return e.Err.Error() }
func (e *KeyError) Unwrap() error { return e.Err }

// CheckUniqueKeys reports whether data is exactly one JSON value in which no
// object, at any depth, holds the same key twice (keys compared after
// unescaping, case included: "id" and "ID" are two keys).
func CheckUniqueKeys(data []byte) error {
	// The token walk checks the syntax as it goes: no separate pass.
	type frame struct {
		keys    map[string]struct{} // nil for an array
		wantKey bool
	}
	var stack []frame
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	values := 0
	// done records that a value ended: the object around it expects a key.
	done := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].keys != nil {
				stack[n-1].wantKey = true
			}
		} else {
			values++
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return ErrJSONSyntax
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				stack = append(stack, frame{keys: map[string]struct{}{}, wantKey: true})
			case '[':
				stack = append(stack, frame{})
			default:
				stack = stack[:len(stack)-1]
				done()
			}
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].keys != nil && stack[n-1].wantKey {
			key, _ := tok.(string)
			if _, dup := stack[n-1].keys[key]; dup {
				return &KeyError{Key: key, Err: ErrDuplicateKey}
			}
			stack[n-1].keys[key] = struct{}{}
			stack[n-1].wantKey = false
			continue
		}
		done()
	}
	if values != 1 || len(stack) != 0 {
		return ErrJSONSyntax
	}
	return nil
}

// StrictObject splits data, one JSON object, into its members, undecoded.
// Unlike json.Unmarshal it refuses a key given twice anywhere in data
// (ErrDuplicateKey) and, when known is not nil, a member whose key is not
// exactly one of known (ErrUnknownKey): "ID" is not "id". Data that is not
// one JSON value is ErrJSONSyntax; a value that is not an object,
// ErrNotObject.
func StrictObject(data []byte, known []string) (map[string]json.RawMessage, error) {
	if err := CheckUniqueKeys(data); err != nil {
		return nil, err
	}
	if data = bytes.TrimSpace(data); data[0] != '{' {
		return nil, ErrNotObject
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return nil, ErrJSONSyntax
	}
	if known != nil {
		for key := range members {
			if !slices.Contains(known, key) {
				return nil, &KeyError{Key: key, Err: ErrUnknownKey}
			}
		}
	}
	return members, nil
}
