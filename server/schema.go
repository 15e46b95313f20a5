package server

import (
	"encoding/json"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/memgate/memgate"
)

// Bounds the specification leaves to the server. They are stated in the
// input schemas like every other bound.
const (
	// maxCursorBytes bounds a cursor argument; real cursors are far shorter.
	maxCursorBytes = 512
	// MaxExportLimit and DefaultExportLimit bound one page of the export tool.
	MaxExportLimit     = 1000
	DefaultExportLimit = 100
	// maxVersion is the largest version a client can send: the largest
	// integer a JSON number carries exactly in every client language.
	maxVersion = 1<<53 - 1
)

func ptr[T any](v T) *T { return &v }

func falseSchema() *jsonschema.Schema { return &jsonschema.Schema{Not: &jsonschema.Schema{}} }

func rawJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// object returns an object schema with properties in the given order.
// Names in required must be among them.
func object(desc string, required []string, props ...prop) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "object", Description: desc, Properties: map[string]*jsonschema.Schema{},
		Required: required}
	for _, p := range props {
		s.Properties[p.name] = p.schema
		s.PropertyOrder = append(s.PropertyOrder, p.name)
	}
	return s
}

type prop struct {
	name   string
	schema *jsonschema.Schema
}

// input returns a tool's input schema: no arguments beyond props.
func input(required []string, props ...prop) *jsonschema.Schema {
	s := object("", required, props...)
	s.AdditionalProperties = falseSchema()
	return s
}

// schemaOf returns a rule of memgate's as a JSON Schema, described by desc.
func schemaOf(r memgate.Schema, desc string) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: r.Type, Types: r.Types, Description: desc, Pattern: r.Pattern}
	bound := func(n int) *int {
		if n == 0 {
			return nil
		}
		return ptr(n)
	}
	s.MinLength, s.MaxLength = bound(r.MinLength), bound(r.MaxLength)
	s.MaxItems, s.MaxProperties = bound(r.MaxItems), bound(r.MaxProperties)
	for _, sub := range []struct {
		from *memgate.Schema
		to   **jsonschema.Schema
	}{{r.Items, &s.Items}, {r.PropertyNames, &s.PropertyNames}, {r.AdditionalProperties, &s.AdditionalProperties}} {
		if sub.from != nil {
			*sub.to = schemaOf(*sub.from, "")
		}
	}
	s.Format, s.Required = r.Format, r.Required
	if len(r.Properties) > 0 {
		s.Properties = map[string]*jsonschema.Schema{}
		for _, p := range r.Properties {
			s.Properties[p.Name] = schemaOf(p.Schema, "")
			s.PropertyOrder = append(s.PropertyOrder, p.Name)
		}
	}
	if r.Closed {
		s.AdditionalProperties = falseSchema()
	}
	return s
}

func flatValues() *jsonschema.Schema {
	return schemaOf(*memgate.MetadataSchema().AdditionalProperties, "")
}

// Output schemas. Each admits its success shape or the error envelope.

func output(success *jsonschema.Schema) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", AnyOf: []*jsonschema.Schema{success, errorEnvelopeSchema()}}
}

func errorEnvelopeSchema() *jsonschema.Schema {
	codes := make([]any, len(memgate.Codes))
	for i, c := range memgate.Codes {
		codes[i] = string(c)
	}
	return object("The call failed; error.code says why.", []string{"error"},
		prop{"error", object("", []string{"code", "message"},
			prop{"code", &jsonschema.Schema{Type: "string", Enum: codes}},
			prop{"message", &jsonschema.Schema{Type: "string"}},
			prop{"details", &jsonschema.Schema{Type: "object",
				Description: "Hints such as the field at fault (field), the kind of secret (kind) or " +
					"the current version (current_version)."}},
		)})
}

func memoryProps() []prop {
	str := func() *jsonschema.Schema { return &jsonschema.Schema{Type: "string"} }
	integer := func() *jsonschema.Schema { return &jsonschema.Schema{Type: "integer"} }
	when := func() *jsonschema.Schema { return &jsonschema.Schema{Type: "string", Format: "date-time"} }
	return []prop{
		{"id", str()},
		{"text", str()},
		{"bytes", integer()},
		{"title", str()},
		{"tags", &jsonschema.Schema{Type: "array", Items: str()}},
		{"metadata", &jsonschema.Schema{Type: "object", AdditionalProperties: flatValues()}},
		{"created_at", when()},
		{"updated_at", when()},
		{"version", integer()},
		{"expires_at", when()},
		{"source", schemaOf(memgate.SourceSchema(), "")},
		{"namespace", str()},
	}
}

var memoryRequired = []string{"id", "text", "bytes", "tags", "metadata", "created_at", "updated_at", "version"}

func memorySchema() *jsonschema.Schema { return object("", memoryRequired, memoryProps()...) }

func hitSchema() *jsonschema.Schema {
	num := func() *jsonschema.Schema { return &jsonschema.Schema{Type: "number"} }
	props := append(memoryProps(),
		prop{"score", num()}, prop{"lexical_score", num()}, prop{"semantic_score", num()})
	return object("", slices.Concat(memoryRequired, []string{"score", "lexical_score"}), props...)
}

func receiptSchema() *jsonschema.Schema {
	str := func() *jsonschema.Schema { return &jsonschema.Schema{Type: "string"} }
	return object("", []string{"retrieval_mode"},
		prop{"retrieval_mode", &jsonschema.Schema{Type: "string",
			Enum: []any{memgate.RetrievalLexical, memgate.RetrievalHybrid}}},
		prop{"embedding_model", str()},
		prop{"embedding_version", str()},
		prop{"semantic_fallback", str()},
		prop{"candidates", &jsonschema.Schema{Type: "integer"}},
		prop{"truncated", &jsonschema.Schema{Type: "boolean"}},
		prop{"namespaces", &jsonschema.Schema{Type: "array", Items: str()}},
	)
}

func rememberOutput() *jsonschema.Schema {
	return output(object("", []string{"memory", "created"},
		prop{"memory", memorySchema()}, prop{"created", &jsonschema.Schema{Type: "boolean"}},
		prop{"deduplicated", &jsonschema.Schema{Type: "boolean",
			Description: "true when a live memory already had this text: it is returned and nothing is stored"}},
		prop{"candidate", &jsonschema.Schema{Type: "boolean",
			Description: "true in candidate mode: the memory waits for approval (memgate candidates approve ID)"}}))
}

func getOutput() *jsonschema.Schema {
	return output(object("", []string{"memory"}, prop{"memory", memorySchema()}))
}

func searchOutput() *jsonschema.Schema {
	return output(object("", []string{"hits", "receipt"},
		prop{"hits", &jsonschema.Schema{Type: "array", Items: hitSchema()}},
		prop{"receipt", receiptSchema()}))
}

func listOutput() *jsonschema.Schema {
	return output(object("", []string{"memories"},
		prop{"memories", &jsonschema.Schema{Type: "array", Items: memorySchema()}},
		prop{"next_cursor", &jsonschema.Schema{Type: "string"}}))
}

func forgetOutput() *jsonschema.Schema {
	return output(object("", []string{"id", "forgotten"},
		prop{"id", &jsonschema.Schema{Type: "string"}},
		prop{"forgotten", &jsonschema.Schema{Type: "boolean", Enum: []any{true}}}))
}

func statsOutput(hybrid bool) *jsonschema.Schema {
	integer := func() *jsonschema.Schema { return &jsonschema.Schema{Type: "integer"} }
	var limits []prop
	for _, name := range limitNames {
		limits = append(limits, prop{name, integer()})
	}
	props := []prop{
		{"namespace", &jsonschema.Schema{Type: "string"}},
		{"count", integer()},
		{"bytes", integer()},
		{"store_bytes", integer()},
		{"recall", &jsonschema.Schema{Type: "string"}},
	}
	if hybrid {
		props = append(props, prop{"embedded", integer()})
	}
	props = append(props,
		prop{"write_mode", &jsonschema.Schema{Type: "string", Enum: []any{WriteFull, WriteReadOnly, WriteCandidate}}},
		prop{"limits", object("", limitNames, limits...)})
	return output(object("", []string{"namespace", "count", "bytes", "store_bytes", "recall", "write_mode", "limits"}, props...))
}

func exportOutput() *jsonschema.Schema {
	return output(object("", []string{"count"},
		prop{"count", &jsonschema.Schema{Type: "integer"}},
		prop{"next_cursor", &jsonschema.Schema{Type: "string"}}))
}
