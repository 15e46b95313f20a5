package storage

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// decodeMetadata decodes a record's metadata ("" for none) into the map a
// memory carries, as json.Unmarshal does. The JSON is json.Marshal's of a
// map of flat values: keys of [A-Za-z0-9_.-], strings, numbers, booleans
// and null, in sorted order, without white space. What nearly every record
// holds — no escape in any string — is decoded here, each string a part of
// js (which is the record's copy, not the transaction's bytes): ten hits
// of a search decoded by encoding/json cost more than the rest of their
// records. Anything else goes to json.Unmarshal.
func decodeMetadata(js string) (map[string]any, error) {
	if js == "" {
		return map[string]any{}, nil
	}
	if md, ok := decodeFlatObject(js); ok {
		return md, nil
	}
	md := map[string]any{}
	if err := json.Unmarshal([]byte(js), &md); err != nil {
		return nil, err
	}
	return md, nil
}

// decodeFlatObject decodes js when it is an object of flat values without
// white space, escapes or repeated keys; false otherwise, for json.Unmarshal
// to decide.
func decodeFlatObject(js string) (map[string]any, bool) {
	if len(js) < 2 || js[0] != '{' || js[len(js)-1] != '}' {
		return nil, false
	}
	s := js[1 : len(js)-1]
	md := make(map[string]any, strings.Count(s, `":`))
	for s != "" {
		k, rest, ok := plainString(s)
		if !ok || rest == "" || rest[0] != ':' {
			return nil, false
		}
		if _, dup := md[k]; dup {
			return nil, false
		}
		var v any
		if v, rest, ok = flatValue(rest[1:]); !ok {
			return nil, false
		}
		md[k] = v
		if rest == "" {
			break
		}
		if rest[0] != ',' || len(rest) == 1 {
			return nil, false
		}
		s = rest[1:]
	}
	return md, true
}

// plainString reads the JSON string that s starts with, when it has no
// escape, no control character and no invalid UTF-8 (which json.Unmarshal
// would change), and returns its contents and what follows it.
func plainString(s string) (string, string, bool) {
	if s == "" || s[0] != '"' {
		return "", "", false
	}
	end := strings.IndexByte(s[1:], '"') + 1
	if end == 0 {
		return "", "", false
	}
	str := s[1:end]
	for i := 0; i < len(str); i++ {
		if c := str[i]; c < 0x20 || c == '\\' {
			return "", "", false
		}
	}
	if !utf8.ValidString(str) {
		return "", "", false
	}
	return str, s[end+1:], true
}

// flatValue reads the flat JSON value that s starts with, as
// json.Unmarshal decodes it into an interface: a plain string (see
// plainString), a float64, a bool or nil.
func flatValue(s string) (any, string, bool) {
	if s == "" {
		return nil, "", false
	}
	switch s[0] {
	case '"':
		return plainString(s)
	case 't':
		if strings.HasPrefix(s, "true") {
			return true, s[4:], true
		}
	case 'f':
		if strings.HasPrefix(s, "false") {
			return false, s[5:], true
		}
	case 'n':
		if strings.HasPrefix(s, "null") {
			return nil, s[4:], true
		}
	default:
		n := numberLen(s)
		if n == 0 {
			return nil, "", false
		}
		f, err := strconv.ParseFloat(s[:n], 64)
		if err != nil {
			return nil, "", false
		}
		return f, s[n:], true
	}
	return nil, "", false
}

// numberLen is the length of the JSON number s starts with (the grammar's
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?), 0 if none.
func numberLen(s string) int {
	i := 0
	digits := func() int {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - start
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return 0
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return 0
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0
		}
	}
	return i
}
