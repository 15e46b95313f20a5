package memgate_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/memgate/memgate"
)

func TestCheckUniqueKeys(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     error
	}{
		{"an object with distinct keys passes", `{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}`, nil},
		{"keys that differ only in case are two keys", `{"id":1,"ID":2}`, nil},
		{"a scalar passes", `7`, nil},
		{"a key twice is refused", `{"a":1,"a":2}`, memgate.ErrDuplicateKey},
		{"a key twice in a nested object is refused", `{"x":[{"a":1,"b":2,"a":3}]}`, memgate.ErrDuplicateKey},
		{"a key written twice with escapes is refused", `{"id":1,"\u0069d":2}`, memgate.ErrDuplicateKey},
		{"a string value equal to a key is no key", `{"a":"a","b":"a"}`, nil},
		{"two values are refused", `{} {}`, memgate.ErrJSONSyntax},
		{"nothing is refused", ``, memgate.ErrJSONSyntax},
		{"broken JSON is refused", `{"a":}`, memgate.ErrJSONSyntax},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := memgate.CheckUniqueKeys([]byte(c.in)); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("CheckUniqueKeys(%s) = %v, want %v", c.in, err, c.want)
			}
		})
	}
}

func TestStrictObject(t *testing.T) {
	known := []string{"namespaces", "scopes"}
	m, err := memgate.StrictObject([]byte(`{"namespaces":["a"],"scopes":null}`), known)
	if err != nil || string(m["namespaces"]) != `["a"]` || string(m["scopes"]) != "null" || len(m) != 2 {
		t.Fatalf("StrictObject = %v, %v", m, err)
	}
	for _, c := range []struct {
		name, in string
		want     error
		key      string
	}{
		{"a key in other case is unknown", `{"namespaces":["a"],"NAMESPACES":null}`, memgate.ErrUnknownKey, "NAMESPACES"},
		{"a key twice is refused", `{"scopes":[],"scopes":null}`, memgate.ErrDuplicateKey, "scopes"},
		{"an array is not an object", `[{"scopes":[]}]`, memgate.ErrNotObject, ""},
		{"a string is not an object", `"scopes"`, memgate.ErrNotObject, ""},
		{"trailing data is refused", `{"scopes":[]}x`, memgate.ErrJSONSyntax, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := memgate.StrictObject([]byte(c.in), known)
			if !errors.Is(err, c.want) {
				t.Fatalf("StrictObject(%s) = %v, want %v", c.in, err, c.want)
			}
			var ke *memgate.KeyError
			if c.key != "" && (!errors.As(err, &ke) || ke.Key != c.key) {
				t.Fatalf("StrictObject(%s) names %v, want key %q", c.in, err, c.key)
			}
			if c.key != "" && strings.Contains(err.Error(), c.key) {
				t.Fatalf("the message %q repeats the key", err)
			}
		})
	}
	if m, err := memgate.StrictObject([]byte(`{"ANY":1}`), nil); err != nil || len(m) != 1 {
		t.Fatalf("with no known keys every key passes: %v %v", m, err)
	}
}

// FuzzStrictObject checks StrictObject against a plain decode: what it
// accepts decodes to the same members, with every key distinct and exact.
func FuzzStrictObject(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1,"a":2}`, `[1 2]`, `{"a":1}}`, `1 2`, "\"\x01\"", `{"a":[1,]}`, `{"a":{"b":1,"b":2}}`, `{"A":1,"a":2}`, `{"\u0061":1,"a":1}`, `[1,{"a":1}]`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if memgate.CheckUniqueKeys(data) == nil && !json.Valid(data) {
			t.Fatalf("CheckUniqueKeys accepted %q, which is not JSON", data)
		}
		m, err := memgate.StrictObject(data, nil)
		if err != nil {
			return
		}
		var plain map[string]json.RawMessage
		if json.Unmarshal(data, &plain) != nil || len(plain) != len(m) {
			t.Fatalf("accepted %q, which decodes to %d members, not %d", data, len(plain), len(m))
		}
		// No key was given twice: counting keys token by token agrees.
		dec := json.NewDecoder(strings.NewReader(string(data)))
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
		n := 0
		for dec.More() {
			if _, err := dec.Token(); err != nil {
				t.Fatal(err)
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != len(m) {
			t.Fatalf("accepted %q with %d keys for %d members: a key given twice", data, n, len(m))
		}
	})
}

// referenceUniqueKeys is CheckUniqueKeys written the slow, obvious way:
// json.Valid, then encoding/json's own tokens.
func referenceUniqueKeys(data []byte) bool {
	if !json.Valid(data) {
		return false
	}
	type frame struct {
		keys    map[string]bool
		wantKey bool
	}
	var stack []frame
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return true // io.EOF: json.Valid saw one whole value
		}
		n := len(stack)
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				stack = append(stack, frame{keys: map[string]bool{}, wantKey: true})
			case '[':
				stack = append(stack, frame{})
			default:
				stack = stack[:n-1]
				if n > 1 && stack[n-2].keys != nil {
					stack[n-2].wantKey = true
				}
			}
			continue
		}
		if n > 0 && stack[n-1].keys != nil {
			if stack[n-1].wantKey {
				key := tok.(string)
				if stack[n-1].keys[key] {
					return false
				}
				stack[n-1].keys[key] = true
				stack[n-1].wantKey = false
			} else {
				stack[n-1].wantKey = true
			}
		}
	}
}

// FuzzCheckUniqueKeys: the one-pass scanner agrees with encoding/json on
// what is JSON and with a token walk on which keys repeat.
func FuzzCheckUniqueKeys(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":[1,{"c":2,"c":3}]}}`, `{"\xff":1,"\xfe":2}`, `{"\u0061":1,"a":2}`,
		`[1,2,{"x":"y"}]`, `-0.5e+3`, `{"a":"\ud800"}`, `{}{`, `"\u00"`, `01`, `[1,]`, ` true `, `nul`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := memgate.CheckUniqueKeys(data) == nil
		if want := referenceUniqueKeys(data); got != want {
			t.Fatalf("CheckUniqueKeys(%q) accepts: %v, the reference: %v", data, got, want)
		}
	})
}

// Nesting is accepted to MaxJSONDepth arrays and objects and refused one
// past it, as too deep (still not a value StrictObject takes).
func TestStrictObjectDepthAtTheBound(t *testing.T) {
	nested := func(depth int) []byte { // an object holding depth-1 arrays
		return []byte(`{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`)
	}
	if _, err := memgate.StrictObject(nested(memgate.MaxJSONDepth), nil); err != nil {
		t.Fatalf("depth %d: %v", memgate.MaxJSONDepth, err)
	}
	_, err := memgate.StrictObject(nested(memgate.MaxJSONDepth+1), nil)
	if !errors.Is(err, memgate.ErrJSONTooDeep) || !errors.Is(err, memgate.ErrJSONSyntax) {
		t.Fatalf("depth %d: %v", memgate.MaxJSONDepth+1, err)
	}
}
