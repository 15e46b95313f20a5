package storage

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/memgate/memgate/internal/synthetic"
)

// unmarshalMetadata is what a record's metadata decoded to before
// decodeMetadata: json.Unmarshal into an empty map.
func unmarshalMetadata(js string) (map[string]any, error) {
	md := map[string]any{}
	if js == "" {
		return md, nil
	}
	err := json.Unmarshal([]byte(js), &md)
	return md, err
}

// checkMetadata fails unless decodeMetadata decodes js as json.Unmarshal
// does, or refuses it as json.Unmarshal does.
func checkMetadata(t *testing.T, js string) {
	t.Helper()
	want, wantErr := unmarshalMetadata(js)
	got, err := decodeMetadata(js)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("decodeMetadata(%q): error %v, json.Unmarshal's %v", js, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeMetadata(%q) = %#v, json.Unmarshal gives %#v", js, got, want)
	}
}

var metadataStrings = []string{
	"", "plain", "noun.attribute", `quote " and \ backslash`, "<html> & 'single'", "\x00\x01\x1f\x7f",
	"\b\f\n\r\t", "line\u2028para\u2029", "café 日本 😀", "\xff\xfe invalid", "\xed\xa0\x80", "tail \\",
	"}", "{", ",", ":", `":"`, "true", "null", "1e5",
}

// Metadata as records hold it (json.Marshal of the flat values memgate
// stores) decodes as json.Unmarshal decodes it: strings of every kind,
// numbers of every size, booleans, null, and the keys sorted.
func TestDecodeMetadataIsJSONUnmarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	values := []any{nil, true, false, 0.0, -0.0, 1.0, -1.5, 1e21, 1e-7, 123456789.125, math.MaxFloat64,
		math.SmallestNonzeroFloat64, 5e-324, -2.5e-300, 42.0, 1e20}
	for _, s := range metadataStrings {
		values = append(values, s)
	}
	str := func() string { return synthetic.Hostile(r, 12) }
	for i := range 5000 {
		md := map[string]any{}
		for range r.IntN(8) {
			var v any
			switch r.IntN(5) {
			case 0:
				v = values[r.IntN(len(values))]
			case 1:
				v = str()
			case 2:
				v = r.NormFloat64() * math.Pow(10, float64(r.IntN(600)-300))
			case 3:
				v = float64(r.Int64N(1<<53) - 1<<52)
			default:
				v = r.IntN(2) == 0
			}
			key := []string{"pos", "lex", "team", "a.b", "x-y", "k_1", str()}[r.IntN(7)]
			md[key] = v
		}
		b, err := json.Marshal(md)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			checkMetadata(t, string(b))
		}
		if i%2 == 1 || len(md) == 0 {
			checkMetadata(t, "") // no metadata: an empty map
		}
	}
	for _, js := range []string{
		`{}`, `{"a":1}`, `{"a":1,"a":2}`, `{"a":"x","b":"y"}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`,
		`{"a":1e}`, `{"a":1e+}`, `{"a":1E5}`, `{"a":-0}`, `{"a":1e400}`, `{"a":tru}`, `{"a":truex}`, `{"a":nul}`,
		`{"a":"\u003c"}`, `{"a":"\"}`, `{"a":"x",}`, `{,}`, `{"a" :1}`, `{ "a":1}`, `{"a":1 }`, `null`, `[]`,
		`{"a":{}}`, `{"a":[1]}`, "{\"a\":\"\x01\"}", "{\"a\":\"\xff\"}", `{"a":"x"`, `"a"`, `{"a":1}x`, `{"a"}`,
		`{"":1}`, `{"a":"}"}`, `{"a":",","b":":"}`,
	} {
		checkMetadata(t, js)
	}
}

func FuzzDecodeMetadata(f *testing.F) {
	for _, s := range []string{`{"lex":"noun.attribute","pos":"noun"}`, `{"a":1.5e-7,"b":true,"c":null}`, `{"a":"\u003c"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, js string) { checkMetadata(t, js) })
}
