package server

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/memgate/memgate"
)

// objectKeys lists the keys of a JSON object in order, duplicates kept, as
// an independent reading of raw.
func objectKeys(raw []byte) (keys []string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		keys = append(keys, tok.(string))
	}
	return keys, true
}

// FuzzDecodeArgs checks that tool arguments are matched exactly: what
// decodeArgs accepts names only allowed fields, case included, none twice,
// and holds only valid UTF-8; and that a key in another case than the
// field's is refused.
func FuzzDecodeArgs(f *testing.F) {
	allowed := []string{"text", "id", "tags", "metadata"}
	for _, s := range []string{
		`{"text":"a"}`, `{"TEXT":"a"}`, `{"Text":"a"}`, `{"text":"a","text":"b"}`, `{"text":"a","Text":"b"}`,
		`{"metadata":{"k":1,"k":2}}`, `{"id":"key\ud800"}`, "{\"id\":\"key\xff\"}", `{"tags":["\udbff"]}`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := decodeArgs(raw, allowed)
		if err != nil {
			return
		}
		keys, isObject := objectKeys(bytes.TrimSpace(raw))
		if !isObject {
			if len(a) != 0 {
				t.Fatalf("%q is no object, and decoded to %v", raw, a)
			}
			return
		}
		seen := map[string]bool{}
		for _, k := range keys {
			if !slices.Contains(allowed, k) || seen[k] {
				t.Fatalf("%q accepted with key %q", raw, k)
			}
			seen[k] = true
			if _, ok := a[k]; !ok {
				t.Fatalf("%q: key %q lost", raw, k)
			}
		}
		if !memgate.ValidJSONText(raw) {
			t.Fatalf("%q accepted with invalid UTF-8 or a lone surrogate", raw)
		}
		// The field's name in another case is another, unknown, argument.
		for k, v := range a {
			for _, other := range []string{upper(k), string(k[0]-32) + k[1:]} {
				variant, _ := json.Marshal(map[string]json.RawMessage{other: v})
				if _, err := decodeArgs(variant, allowed); memgate.ErrorCode(err) != memgate.CodeInvalidArgument {
					t.Fatalf("%s accepted", variant)
				}
			}
		}
	})
}

func upper(s string) string { return string(bytes.ToUpper([]byte(s))) }

// FuzzPlainArgs checks that what plainArgs reads without encoding/json is
// what readArgs reads: the same fields and bytes, and no error readArgs
// would give.
func FuzzPlainArgs(f *testing.F) {
	allowed := []string{"query", "limit", "tags", "text"}
	for _, s := range []string{
		`{"query":"a b c","limit":10}`, ` { "query" : "x" , "limit" : -1.5e3 } `, `{}`, `{"limit":null,"query":true}`,
		`{"query":"a","query":"b"}`, `{"Query":"a"}`, `{"query":"\u0041"}`, "{\"query\":\"\xff\"}", `{"limit":01}`,
		`{"limit":1.}`, `{"query":"a",}`, `{"query":"a"}x`, `{"tags":["a"]}`, `{"query":falsey}`, "{\"query\":\"a\tb\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, ok := plainArgs(raw, allowed)
		if !ok {
			return
		}
		want, err := readArgs(raw, allowed)
		if err != nil {
			t.Fatalf("plainArgs read %q, which readArgs refuses: %v", raw, err)
		}
		if len(a) != len(want) {
			t.Fatalf("plainArgs read %q as %v, readArgs as %v", raw, a, want)
		}
		for k, v := range want {
			if !bytes.Equal(a[k], v) {
				t.Fatalf("plainArgs read %q as %v, readArgs as %v", raw, a, want)
			}
		}
	})
}

// A search's arguments are read without encoding/json, and anything
// plainArgs declines still reaches readArgs' verdict.
func TestPlainArgsReadsTheUsualArguments(t *testing.T) {
	allowed := []string{"query", "limit", "tags"}
	for _, c := range []struct {
		raw   string
		plain bool
	}{
		{`{"query":"rocket engine","limit":10}`, true},
		{` {"query" : "café <x>", "limit":null} `, true},
		{`{}`, true},
		{`{"query":"a","tags":["x"]}`, false},
		{`{"query":"a\"b"}`, false},
		{`{"query":"a","query":"b"}`, false},
		{`{"nope":1}`, false},
	} {
		_, ok := plainArgs([]byte(c.raw), allowed)
		if ok != c.plain {
			t.Errorf("plainArgs(%s): %v, want %v", c.raw, ok, c.plain)
		}
		got, err := decodeArgs(json.RawMessage(c.raw), allowed)
		want, wantErr := readArgs(bytes.TrimSpace([]byte(c.raw)), allowed)
		if (err == nil) != (wantErr == nil) || len(got) != len(want) {
			t.Errorf("decodeArgs(%s) = %v, %v; readArgs: %v, %v", c.raw, got, err, want, wantErr)
		}
	}
}
