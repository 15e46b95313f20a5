package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
)

// sample returns a value that schema admits and that is not what leaving
// the argument out means: the last of an enum (the first is the default),
// the largest integer, true.
func sample(t *testing.T, name string, schema *jsonschema.Schema) json.RawMessage {
	t.Helper()
	if len(schema.Enum) > 0 {
		return rawJSON(schema.Enum[len(schema.Enum)-1])
	}
	switch {
	case schema.Type == "string" && schema.Format == "date-time":
		return rawJSON("2100-01-02T03:04:05Z")
	case schema.Type == "object" && schema.Properties != nil:
		obj := map[string]json.RawMessage{}
		for _, k := range schema.Required {
			obj[k] = sample(t, name+"."+k, schema.Properties[k])
		}
		return rawJSON(obj)
	}
	switch schema.Type {
	case "string":
		return rawJSON("a")
	case "integer":
		return rawJSON(int64(*schema.Maximum))
	case "boolean":
		return rawJSON(true)
	case "array":
		return rawJSON([]string{"a"})
	case "object":
		return rawJSON(map[string]string{"k": "v"})
	}
	t.Fatalf("%s: no sample of type %q", name, schema.Type)
	return nil
}

// wrongType returns a value of another JSON type than schema's.
func wrongType(schema *jsonschema.Schema) json.RawMessage {
	if schema.Type == "string" {
		return json.RawMessage(`5`)
	}
	return json.RawMessage(`"x"`)
}

// decodeCall runs arguments as a call does, up to the typed input.
func decodeCall(td toolDef, arguments map[string]json.RawMessage) (any, string, error) {
	a, err := decodeArgs(rawJSON(arguments), td.names)
	if err != nil {
		return nil, "", err
	}
	return td.decode(a)
}

// fieldOf returns the code and details.field of err.
func fieldOf(err error) (memgate.Code, string) {
	var e *memgate.Error
	if !errors.As(err, &e) {
		return memgate.ErrorCode(err), ""
	}
	field, _ := e.Details["field"].(string)
	return e.Code, field
}

// TestEveryDeclaredArgumentReachesTheInput walks every tool's params, as
// tools/list shows them: each argument the schema lists is accepted by the
// schema and by the decoder, changes the tool's typed input (or the
// namespace), and is refused, naming it, when of another type or, for an
// integer, one past either end of its range; a required one is refused
// when left out.
func TestEveryDeclaredArgumentReachesTheInput(t *testing.T) {
	for _, namespaced := range []bool{false, true} {
		s, err := New(Options{NamespaceArg: namespaced, Lease: func(context.Context, memgate.Namespace) (Store, func(), error) {
			return nil, nil, errors.New("no store here")
		}})
		if err != nil {
			t.Fatal(err)
		}
		for _, td := range s.tools() {
			t.Run(fmt.Sprintf("%s namespaced=%v", td.tool.Name, namespaced), func(t *testing.T) {
				schema := td.tool.InputSchema.(*jsonschema.Schema)
				if !slices.Equal(td.names, schema.PropertyOrder) || len(td.names) != len(schema.Properties) {
					t.Fatalf("arguments %v, schema lists %v", td.names, schema.PropertyOrder)
				}
				if namespaced != slices.Contains(td.names, "namespace") {
					t.Fatalf("namespace argument: %v", td.names)
				}
				resolved, err := schema.Resolve(nil)
				if err != nil {
					t.Fatal(err)
				}
				base := map[string]json.RawMessage{}
				for _, name := range schema.Required {
					base[name] = sample(t, name, schema.Properties[name])
				}
				in0, ns0, err := decodeCall(td, base)
				if err != nil {
					t.Fatalf("the required arguments alone: %v", err)
				}
				if len(base) > 0 && reflect.ValueOf(in0).IsZero() {
					t.Fatalf("the required arguments %v leave the input empty", schema.Required)
				}
				for _, name := range schema.Required {
					without := maps.Clone(base)
					delete(without, name)
					if _, _, err := decodeCall(td, without); !isInvalid(err, name) {
						t.Errorf("without required %s: %v", name, err)
					}
				}
				for _, name := range td.names {
					prop := schema.Properties[name]
					with := maps.Clone(base)
					with[name] = sample(t, name, prop)
					if err := resolved.Validate(asValue(t, with)); err != nil {
						t.Errorf("%s: the schema refuses its own sample %s: %v", name, with[name], err)
					}
					in, ns, err := decodeCall(td, with)
					if err != nil {
						t.Errorf("%s: %s refused: %v", name, with[name], err)
						continue
					}
					if !slices.Contains(schema.Required, name) && reflect.DeepEqual(in, in0) && ns == ns0 {
						t.Errorf("%s is declared, and %s never reaches the input %#v", name, with[name], in)
					}
					with[name] = wrongType(prop)
					if _, _, err := decodeCall(td, with); !isInvalid(err, name) {
						t.Errorf("%s of the wrong type %s: %v", name, with[name], err)
					}
					if prop.Type != "integer" {
						continue
					}
					for _, n := range []float64{*prop.Minimum, *prop.Maximum, *prop.Minimum - 1, *prop.Maximum + 1} {
						with[name] = rawJSON(int64(n))
						inRange := n >= *prop.Minimum && n <= *prop.Maximum
						schemaSays := resolved.Validate(asValue(t, with)) == nil
						_, _, err := decodeCall(td, with)
						if schemaSays != inRange || (err == nil) != inRange || !inRange && !isInvalid(err, name) {
							t.Errorf("%s %d: schema admits it %v, decoder says %v", name, int64(n), schemaSays, err)
						}
					}
				}
			})
		}
	}
}

// TestUndeclaredArgumentsAreRefused: an argument no param declares is
// refused by every tool, naming it, on the whole path of a call; and even
// slipped past decodeArgs, it cannot reach a tool's input.
func TestUndeclaredArgumentsAreRefused(t *testing.T) {
	s, err := New(Options{NamespaceArg: true, Lease: func(context.Context, memgate.Namespace) (Store, func(), error) {
		return nil, nil, errors.New("no store here")
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, td := range s.tools() {
		schema := td.tool.InputSchema.(*jsonschema.Schema)
		arguments := map[string]json.RawMessage{}
		for _, name := range schema.Required {
			arguments[name] = sample(t, name, schema.Properties[name])
		}
		in0, _, err := decodeCall(td, arguments)
		if err != nil {
			t.Fatal(err)
		}
		// An undeclared name, and each declared one in capitals.
		extras := []string{"undeclared"}
		for _, name := range td.names {
			extras = append(extras, upper(name))
		}
		for _, extra := range extras {
			with := maps.Clone(arguments)
			with[extra] = json.RawMessage(`"a"`)
			req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Arguments: rawJSON(with)}}
			if _, _, err := s.prepare(td, req); !isInvalid(err, extra) {
				t.Errorf("%s with %s: %v", td.tool.Name, extra, err)
			}
			a := args(with)
			in, _, err := td.decode(a)
			if err != nil || !reflect.DeepEqual(in, in0) {
				t.Errorf("%s: %s reached the input: %#v, %v", td.tool.Name, extra, in, err)
			}
		}
	}
}

func isInvalid(err error, field string) bool {
	code, f := fieldOf(err)
	return code == memgate.CodeInvalidArgument && f == field
}

func asValue(t *testing.T, arguments map[string]json.RawMessage) *any {
	t.Helper()
	var v any
	if err := json.Unmarshal(rawJSON(arguments), &v); err != nil {
		t.Fatal(err)
	}
	return &v
}
