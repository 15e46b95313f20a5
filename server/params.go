package server

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/memgate/memgate"
)

// A tool's arguments are declared once, as a list of params: each names one
// argument, says whether a call must give it, holds its schema as tools/list
// shows it, and decodes its value into the tool's typed input T. The tool's
// input schema, the names decodeArgs accepts and the decoder are all derived
// from that list, and a tool's work sees only its T: an argument cannot be
// listed without being decoded, nor decoded without being listed.
//
// A param checks the JSON type and the bounds its schema states; a rule of
// a memory is memgate's (Write.Normalize, ValidateID, NormalizeTags…), which
// a param or the tool applies once.

// param is one argument of a tool whose typed input is T.
type param[T any] struct {
	name     string
	required bool
	schema   *jsonschema.Schema
	// decode puts value v, given and not null, into in; its error names
	// the argument.
	decode func(in *T, v json.RawMessage) error
}

// params is a tool's arguments, in the order tools/list shows them and in
// which a call's are checked.
type params[T any] []param[T]

func (ps params[T]) names() []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.name
	}
	return out
}

// props returns the input schema's properties, and the names a call must give.
func (ps params[T]) props() (props []prop, required []string) {
	for _, p := range ps {
		props = append(props, prop{p.name, p.schema})
		if p.required {
			required = append(required, p.name)
		}
	}
	return props, required
}

// decode returns the typed input of arguments a (whose names decodeArgs
// has checked). Null counts as absent.
func (ps params[T]) decode(a args) (T, error) {
	var in T
	for _, p := range ps {
		v, ok := a.value(p.name)
		if !ok {
			if p.required {
				return in, memgate.Invalid(p.name, "%s is required", p.name)
			}
			continue
		}
		if err := p.decode(&in, v); err != nil {
			return in, err
		}
	}
	return in, nil
}

// required marks p as an argument every call must give.
func required[T any](p param[T]) param[T] {
	p.required = true
	return p
}

// The kinds of argument. Where a bound is the server's own (a range, a list
// of values), it is given once and both the schema and the decoder state
// it; where it is a rule of a memory, the schema comes from memgate
// (schemaOf) and set applies the rule.

// str declares a string argument; set may refuse the value.
func str[T any](name string, schema *jsonschema.Schema, set func(in *T, s string) error) param[T] {
	return param[T]{name: name, schema: schema, decode: func(in *T, v json.RawMessage) error {
		s, err := decodeString(name, v)
		if err != nil {
			return err
		}
		return set(in, s)
	}}
}

// oneOf declares a string argument that must be one of values, the first
// of which is the default.
func oneOf[T any](name, desc string, values []string, set func(in *T, s string)) param[T] {
	enum := make([]any, len(values))
	for i, v := range values {
		enum[i] = v
	}
	schema := &jsonschema.Schema{Type: "string", Enum: enum, Default: rawJSON(values[0]), Description: desc}
	return str(name, schema, func(in *T, s string) error {
		for _, v := range values {
			if s == v {
				set(in, s)
				return nil
			}
		}
		return memgate.Invalid(name, "%s must be one of: %s", name, strings.Join(values, ", "))
	})
}

// boolean declares a boolean argument, false when left out.
func boolean[T any](name, desc string, set func(in *T, b bool)) param[T] {
	schema := &jsonschema.Schema{Type: "boolean", Default: rawJSON(false), Description: desc}
	return param[T]{name: name, schema: schema, decode: func(in *T, v json.RawMessage) error {
		b, err := decodeBool(name, v)
		if err == nil {
			set(in, b)
		}
		return err
	}}
}

// integer declares an integer argument from min to max.
func integer[T any](name, desc string, min, max int64, set func(in *T, n int64)) param[T] {
	schema := &jsonschema.Schema{Type: "integer", Description: desc,
		Minimum: ptr(float64(min)), Maximum: ptr(float64(max))}
	return param[T]{name: name, schema: schema, decode: func(in *T, v json.RawMessage) error {
		n, err := decodeInteger(name, v, min, max)
		if err == nil {
			set(in, n)
		}
		return err
	}}
}

// limit declares the size of a page or an answer: an integer from 1 to
// max, def when left out (which the store or the tool applies).
func limit[T any](desc string, max, def int, set func(in *T, n int)) param[T] {
	p := integer("limit", desc, 1, int64(max), func(in *T, n int64) { set(in, int(n)) })
	p.schema.Default = rawJSON(def)
	return p
}

// list declares an array of strings, of at most as many items as its
// schema's maxItems; set may refuse the items.
func list[T any](name string, schema *jsonschema.Schema, set func(in *T, items []string) error) param[T] {
	maxItems := *schema.MaxItems
	return param[T]{name: name, schema: schema, decode: func(in *T, v json.RawMessage) error {
		items, err := decodeStrings(name, v, maxItems)
		if err != nil {
			return err
		}
		return set(in, items)
	}}
}

// flatObject declares an object of flat values (strings, numbers, booleans,
// null); set may refuse it.
func flatObject[T any](name string, schema *jsonschema.Schema, set func(in *T, m map[string]any) error) param[T] {
	return param[T]{name: name, schema: schema, decode: func(in *T, v json.RawMessage) error {
		m, err := decodeFlatObject(name, v)
		if err != nil {
			return err
		}
		return set(in, m)
	}}
}

// Arguments several tools share.

// tagsParam declares tags that narrow a search or a listing.
func tagsParam[T any](desc string, tags func(in *T) *[]string) param[T] {
	return list("tags", schemaOf(memgate.TagsSchema(), desc), func(in *T, items []string) (err error) {
		*tags(in), err = memgate.NormalizeTags("tags", items)
		return err
	})
}

// filterParam declares a metadata filter.
func filterParam[T any](filter func(in *T) *map[string]any) param[T] {
	return flatObject("filter", schemaOf(memgate.MetadataSchema(),
		"Only memories whose metadata has each of these key/value pairs."),
		func(in *T, m map[string]any) (err error) {
			*filter(in), err = memgate.NormalizeMetadata("filter", m)
			return err
		})
}

// cursorParam declares the cursor of a paged tool. A cursor longer than any
// this server returns is refused here; the store judges the others.
func cursorParam[T any](cursor func(in *T) *string) param[T] {
	schema := &jsonschema.Schema{Type: "string", MaxLength: ptr(maxCursorBytes),
		Description: "next_cursor of the previous page; leave it out for the first page."}
	return str("cursor", schema, func(in *T, c string) error {
		if len(c) > maxCursorBytes {
			return memgate.Invalid("cursor", "cursor is not one this listing returned; start again without it")
		}
		*cursor(in) = c
		return nil
	})
}

// idParam declares the id of the memory a tool reads or forgets.
func idParam[T any](desc string, id func(in *T) *string) param[T] {
	return required(str("id", schemaOf(memgate.IDSchema(), desc), func(in *T, s string) error {
		*id(in) = s
		return memgate.ValidateID("id", s)
	}))
}

// namespaceParams declares the namespace argument every tool takes when
// Options.NamespaceArg is set, and nothing otherwise.
func (s *Server) namespaceParams() params[string] {
	if !s.opts.NamespaceArg {
		return nil
	}
	return params[string]{str("namespace", schemaOf(memgate.NamespaceSchema(),
		"Namespace (store) to use instead of this server's own: 1–64 characters of a-z, 0-9, _ and -."),
		func(ns *string, v string) error {
			if _, err := memgate.ParseNamespace("namespace", v); err != nil {
				return err
			}
			*ns = v
			return nil
		})}
}

// when declares an RFC 3339 time argument.
func when[T any](name, desc string, set func(in *T, t time.Time)) param[T] {
	schema := &jsonschema.Schema{Type: "string", Format: "date-time", Description: desc}
	return param[T]{name: name, schema: schema, decode: func(in *T, v json.RawMessage) error {
		t, err := decodeTime(name, v)
		if err == nil {
			set(in, t)
		}
		return err
	}}
}

// source declares a memory's source object.
func source[T any](name, desc string, set func(in *T, src memgate.Source)) param[T] {
	return param[T]{name: name, schema: schemaOf(memgate.SourceSchema(), desc), decode: func(in *T, v json.RawMessage) error {
		src, err := decodeSource(name, v)
		if err == nil {
			set(in, src)
		}
		return err
	}}
}
