package storage

import (
	"bytes"
	"encoding/json"
	"io"
	"time"

	"github.com/memgate/memgate"
)

// The lines of an import are decoded strictly: keys match exactly, case
// included (Go's decoder would take "TEXT" for "text"), a key given twice
// is refused (Go's decoder keeps the last), and a string holding invalid
// UTF-8 or a lone surrogate escape is refused (Go's decoder would store
// U+FFFD).

// object is one JSON object's members by exact key.
type object map[string]json.RawMessage

// errNotObject is a line that is not one JSON object.
func errNotObject() error { return memgate.Invalid("line", "line is not a JSON object") }

// strictObject decodes data, which must be exactly one JSON object, into
// its members. field names the object in errors ("line" for a whole line).
func strictObject(data []byte, field string) (object, error) {
	notObject := func() error {
		if field == "line" {
			return errNotObject()
		}
		return memgate.Invalid(field, "%s must be an object", field)
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, notObject()
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil {
		return nil, notObject()
	}
	o := object{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, notObject()
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, notObject()
		}
		if _, dup := o[key]; dup {
			return nil, memgate.Invalid(field, "%s has a key more than once", field)
		}
		if !memgate.ValidJSONText(v) {
			return nil, badText(plainKey(key, field))
		}
		o[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, notObject()
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, notObject()
	}
	if !memgate.ValidJSONText(data) { // a key, then
		return nil, badText(field)
	}
	return o, nil
}

// badText refuses a field holding invalid UTF-8 or a lone surrogate.
func badText(field string) error {
	return memgate.Invalid(field, "%s must be valid UTF-8: no invalid bytes, no lone surrogate escapes", field)
}

// plainKey is key as the field an error names when it is short and plain
// (a field of the line), else the object's own name: an error never
// carries an arbitrary value that was sent.
func plainKey(key, object string) string {
	if object != "line" || key == "" || len(key) > 32 {
		return object
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_') {
			return object
		}
	}
	return key
}

// only refuses a member outside keys, as an unknown field of the line.
func (o object) only(what string, keys ...string) error {
	for k := range o {
		known := false
		for _, x := range keys {
			known = known || k == x
		}
		if !known {
			return memgate.Invalid("line", "%s has an unknown field; the fields are exact, lower case", what)
		}
	}
	return nil
}

// value returns member name, and false when it is absent or null.
func (o object) value(name string) (json.RawMessage, bool) {
	v, ok := o[name]
	if !ok || string(v) == "null" {
		return nil, false
	}
	return v, true
}

func (o object) str(name string) (string, bool, error) {
	v, ok := o.value(name)
	if !ok {
		return "", false, nil
	}
	var s string
	if v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", false, memgate.Invalid(name, "%s must be a string", name)
	}
	return s, true, nil
}

func (o object) strs(name string) ([]string, error) {
	v, ok := o.value(name)
	if !ok {
		return nil, nil
	}
	var raw []json.RawMessage
	if v[0] != '[' || json.Unmarshal(v, &raw) != nil {
		return nil, memgate.Invalid(name, "%s must be an array of strings", name)
	}
	out := make([]string, len(raw))
	for i, r := range raw {
		if len(r) == 0 || r[0] != '"' || json.Unmarshal(r, &out[i]) != nil {
			return nil, memgate.Invalid(name, "%s must be an array of strings", name)
		}
	}
	return out, nil
}

// integer returns member name as an integer from 0 up.
func (o object) integer(name string) (int64, error) {
	v, ok := o.value(name)
	if !ok {
		return 0, nil
	}
	var n int64
	if json.Unmarshal(v, &n) != nil || n < 0 {
		return 0, memgate.Invalid(name, "%s must be an integer from 0", name)
	}
	return n, nil
}

// flat returns member name as a flat object (string, number, boolean or
// null values), its keys strict as the line's.
func (o object) flat(name string) (map[string]any, error) {
	v, ok := o.value(name)
	if !ok {
		return nil, nil
	}
	members, err := strictObject(v, name)
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(members))
	for k, raw := range members {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var x any
		if err := dec.Decode(&x); err != nil {
			return nil, memgate.Invalid(name, "%s values must be a string, a number, a boolean or null", name)
		}
		out[k] = x // NormalizeMetadata refuses what is not flat
	}
	return out, nil
}

// timestamp returns member name as nanoseconds since the epoch (0: absent),
// refusing a time the store cannot order.
func (o object) timestamp(name string) (int64, error) {
	v, ok := o.value(name)
	if !ok {
		return 0, nil
	}
	var s string
	if v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return 0, memgate.Invalid(name, "%s must be an RFC 3339 time", name)
	}
	t, err := memgate.ParseTime(name, s)
	if err != nil {
		return 0, err
	}
	return t.UnixNano(), nil
}

// source returns member name as a memory's source (nil: absent): an object
// of kind, reference, actor and an optional observed_at, nothing else.
func (o object) source(name string) (*memgate.Source, error) {
	v, ok := o.value(name)
	if !ok {
		return nil, nil
	}
	so, err := strictObject(v, name)
	if err != nil {
		return nil, err
	}
	if err := so.only(name, "kind", "reference", "actor", "observed_at"); err != nil {
		return nil, err
	}
	var src memgate.Source
	for _, f := range []struct {
		key string
		to  *string
	}{{"kind", &src.Kind}, {"reference", &src.Reference}, {"actor", &src.Actor}} {
		if *f.to, _, err = so.str(f.key); err != nil {
			return nil, err
		}
	}
	observed, err := so.timestamp("observed_at")
	if err != nil {
		return nil, err
	}
	if observed != 0 {
		t := time.Unix(0, observed).UTC()
		src.ObservedAt = &t
	}
	return &src, nil
}
