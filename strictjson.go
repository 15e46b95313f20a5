package memgate

import (
	"encoding/json"
	"errors"
	"fmt"
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
	// ErrJSONTooDeep is ErrJSONSyntax for JSON nested past MaxJSONDepth.
	ErrJSONTooDeep = fmt.Errorf("%w: arrays and objects nested deeper than %d", ErrJSONSyntax, MaxJSONDepth)
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
// unescaping, case included: "id" and "ID" are two keys), nested at most
// MaxJSONDepth deep.
func CheckUniqueKeys(data []byte) error {
	sc := jsonScanner{data: data}
	return sc.document(nil)
}

// StrictObject splits data, one JSON object, into its members, undecoded.
// Unlike json.Unmarshal it refuses a key given twice anywhere in data
// (ErrDuplicateKey) and, when known is not nil, a member whose key is not
// exactly one of known (ErrUnknownKey): "ID" is not "id". Data that is not
// one JSON value is ErrJSONSyntax; a value that is not an object,
// ErrNotObject.
func StrictObject(data []byte, known []string) (map[string]json.RawMessage, error) {
	members := map[string]json.RawMessage{}
	sc := jsonScanner{data: data}
	if err := sc.document(members); err != nil {
		return nil, err
	}
	if sc.top != '{' {
		return nil, ErrNotObject
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

// MaxJSONDepth is the deepest nesting of arrays and objects accepted (the
// MCP SDK's own bound).
const MaxJSONDepth = 1000

// jsonScanner checks JSON in one pass, as json.Valid does, and the keys of
// every object on the way.
type jsonScanner struct {
	data []byte
	i    int
	top  byte // the first byte of the document's value
}

// document scans one value and nothing after it but white space; the
// members of a top-level object go to members when it is not nil.
func (s *jsonScanner) document(members map[string]json.RawMessage) error {
	s.space()
	if s.i < len(s.data) {
		s.top = s.data[s.i]
	}
	if err := s.value(0, members); err != nil {
		return err
	}
	s.space()
	if s.i != len(s.data) {
		return ErrJSONSyntax
	}
	return nil
}

func (s *jsonScanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScanner) value(depth int, members map[string]json.RawMessage) error {
	if s.i >= len(s.data) {
		return ErrJSONSyntax
	}
	switch c := s.data[s.i]; {
	case c == '{':
		return s.object(depth+1, members)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		_, err := s.str(false)
		return err
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if s.i+len(lit) <= len(s.data) && string(s.data[s.i:s.i+len(lit)]) == lit {
				s.i += len(lit)
				return nil
			}
		}
		return ErrJSONSyntax
	}
}

func (s *jsonScanner) object(depth int, members map[string]json.RawMessage) error {
	if depth > MaxJSONDepth {
		return ErrJSONTooDeep
	}
	s.i++ // {
	var keys []string
	var set map[string]struct{}
	s.space()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		s.space()
		if s.i >= len(s.data) || s.data[s.i] != '"' {
			return ErrJSONSyntax
		}
		key, err := s.str(true)
		if err != nil {
			return err
		}
		// Small objects compare in a list, large ones in a set.
		if set == nil && len(keys) < 16 {
			if slices.Contains(keys, key) {
				return &KeyError{Key: key, Err: ErrDuplicateKey}
			}
			keys = append(keys, key)
		} else {
			if set == nil {
				set = make(map[string]struct{}, 2*len(keys))
				for _, k := range keys {
					set[k] = struct{}{}
				}
			}
			if _, dup := set[key]; dup {
				return &KeyError{Key: key, Err: ErrDuplicateKey}
			}
			set[key] = struct{}{}
		}
		s.space()
		if s.i >= len(s.data) || s.data[s.i] != ':' {
			return ErrJSONSyntax
		}
		s.i++
		s.space()
		start := s.i
		if err := s.value(depth, nil); err != nil {
			return err
		}
		if members != nil {
			members[key] = json.RawMessage(s.data[start:s.i])
		}
		s.space()
		if s.i >= len(s.data) {
			return ErrJSONSyntax
		}
		switch s.data[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return ErrJSONSyntax
		}
	}
}

func (s *jsonScanner) array(depth int) error {
	if depth > MaxJSONDepth {
		return ErrJSONTooDeep
	}
	s.i++ // [
	s.space()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		s.space()
		if err := s.value(depth, nil); err != nil {
			return err
		}
		s.space()
		if s.i >= len(s.data) {
			return ErrJSONSyntax
		}
		switch s.data[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return ErrJSONSyntax
		}
	}
}

// str scans a string and, when decode is set, returns its value as
// encoding/json decodes it (an escape or a byte that is not plain ASCII is
// decoded by encoding/json itself, so that two keys are the same exactly
// when it would read them so: "\xff" and "\xfe" both become U+FFFD).
func (s *jsonScanner) str(decode bool) (string, error) {
	start := s.i
	s.i++ // "
	plain := true
	for s.i < len(s.data) {
		c := s.data[s.i]
		switch {
		case c == '"':
			s.i++
			raw := s.data[start:s.i]
			if !decode {
				return "", nil
			}
			if plain {
				return string(raw[1 : len(raw)-1]), nil
			}
			var v string
			if err := json.Unmarshal(raw, &v); err != nil {
				return "", ErrJSONSyntax
			}
			return v, nil
		case c < 0x20:
			return "", ErrJSONSyntax
		case c == '\\':
			plain = false
			if s.i+1 >= len(s.data) {
				return "", ErrJSONSyntax
			}
			switch s.data[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.data) {
					return "", ErrJSONSyntax
				}
				for _, h := range s.data[s.i+2 : s.i+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return "", ErrJSONSyntax
					}
				}
				s.i += 6
			default:
				return "", ErrJSONSyntax
			}
		default:
			if c >= 0x80 {
				plain = false
			}
			s.i++
		}
	}
	return "", ErrJSONSyntax
}

// number scans a JSON number: -? int frac? exp?.
func (s *jsonScanner) number() error {
	digits := func() int {
		n := 0
		for s.i < len(s.data) && '0' <= s.data[s.i] && s.data[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.data[s.i] == '-' {
		s.i++
	}
	if s.i < len(s.data) && s.data[s.i] == '0' {
		s.i++
	} else if digits() == 0 {
		return ErrJSONSyntax
	}
	if s.i < len(s.data) && s.data[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return ErrJSONSyntax
		}
	}
	if s.i < len(s.data) && (s.data[s.i] == 'e' || s.data[s.i] == 'E') {
		s.i++
		if s.i < len(s.data) && (s.data[s.i] == '+' || s.data[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return ErrJSONSyntax
		}
	}
	return nil
}
