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
