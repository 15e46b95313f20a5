package storage

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate"
)

// members lists the keys of a JSON object in order, duplicates kept, as an
// independent reading of data; ok is false when data is not one object.
func members(data []byte) (keys []string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
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
	if _, err := dec.Token(); err != nil {
		return nil, false
	}
	return keys, true
}

// FuzzImportLine checks the decoding of one import line: what it accepts
// has no key twice, matches its fields exactly, case included, and holds
// only valid UTF-8.
func FuzzImportLine(f *testing.F) {
	for _, s := range []string{
		`{"text":"a"}`, `{"TEXT":"a"}`, `{"text":"a","text":"b"}`, `{"text":"a","Text":"b"}`,
		`{"text":"a","metadata":{"k":1,"K":2}}`, `{"text":"a","metadata":{"k":1,"k":2}}`,
		`{"type":"entity","name":"a","Name":"b"}`, `{"type":"relation","from":"a","to":"b","relationType":"r"}`,
		`{"memgate_export":1}`, `{"id":"\ud800","text":"a"}`, `{"text":"a","created_at":"0001-01-01T00:00:00Z"}`,
	} {
		f.Add([]byte(s))
	}
	s := openTest(f)
	f.Fuzz(func(t *testing.T, line []byte) {
		o, err := strictObject(line, "line")
		keys, isObject := members(bytes.TrimSpace(line))
		if err != nil {
			if memgate.ErrorCode(err) != memgate.CodeInvalidArgument {
				t.Fatalf("strictObject: %v", err)
			}
			return
		}
		if !isObject || len(keys) != len(o) {
			t.Fatalf("%q accepted with keys %q, read as %d members", line, keys, len(o))
		}
		for _, k := range keys {
			if _, ok := o[k]; !ok {
				t.Fatalf("%q: key %q lost", line, k)
			}
		}
		if !memgate.ValidJSONText(line) {
			t.Fatalf("%q accepted with invalid UTF-8", line)
		}
		item, isGraph, err := s.parseLine(line, 1, newGraph())
		if err != nil {
			return
		}
		fields := exportFields
		switch {
		case isGraph && slices.Contains(keys, "memgate_export"):
			fields = []string{"memgate_export"}
		case isGraph && strings.Contains(string(o["type"]), "entity"):
			fields = entityFields
		case isGraph:
			fields = relationFields
		}
		for _, k := range keys {
			if !slices.Contains(fields, k) {
				t.Fatalf("%q accepted with key %q", line, k)
			}
		}
		if item != nil && (item.created < 0 || item.updated < 0) {
			t.Fatalf("%q accepted with a time before 1970", line)
		}
	})
}
