package memgate_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/memgate/memgate"
)

func TestValidJSONText(t *testing.T) {
	for _, c := range []struct {
		in   string
		want bool
	}{
		{`{"id":"key"}`, true},
		{`{"id":"caf\u00e9 \ud83d\ude00"}`, true},
		{`{"id":"\\ud800"}`, true}, // an escaped backslash, then text
		{`{"id":"\ud83d\ude00\ud83d\ude00"}`, true},
		{`{"id":"key\ud800"}`, false},
		{`{"id":"key\udbff"}`, false},
		{`{"id":"key\udc00"}`, false},
		{`{"id":"key\ud800\u0041"}`, false},
		{`{"id":"key\ud800x"}`, false},
		{`{"id":"key\ud800"`, false},
		{`{"id":"key\uDBFF\uDFFF"}`, true},
		{"{\"id\":\"key\xff\"}", false},
		{"{\"id\":\"key\xed\xa0\x80\"}", false}, // a surrogate written as raw UTF-8
		{`{"key\ud800":1}`, false},
		{`{"id":"\u12"}`, true}, // malformed: left to the decoder
	} {
		if got := memgate.ValidJSONText([]byte(c.in)); got != c.want {
			t.Errorf("ValidJSONText(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// FuzzValidJSONText checks that a JSON string ValidJSONText accepts
// decodes without a replacement character that was not sent as one, and
// that one it refuses holds a fault.
func FuzzValidJSONText(f *testing.F) {
	for _, s := range []string{`"a"`, `"\ud800"`, `"\ud83d\ude00"`, "\"\xff\"", `"\ufffd"`, `"\\\ud800"`, `"\udbff\udfff"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var s string
		if json.Unmarshal(b, &s) != nil {
			return
		}
		sentFFFD := bytes.Contains(b, []byte("\xef\xbf\xbd")) || bytes.Contains(bytes.ToLower(b), []byte("fffd"))
		if memgate.ValidJSONText(b) {
			if strings.ContainsRune(s, utf8.RuneError) && !sentFFFD {
				t.Fatalf("%q passed, and decodes with a replacement character", b)
			}
			return
		}
		if !strings.ContainsRune(s, utf8.RuneError) {
			t.Fatalf("%q refused, and decodes without a replacement character", b)
		}
	})
}
