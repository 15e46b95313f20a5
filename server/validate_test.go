package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
)

// argCase is one call in the validation table. An empty code means the call
// must succeed. blind marks the cases a JSON Schema cannot decide (bytes
// rather than characters, the size of metadata as JSON, repeated keys,
// null for an optional argument, rules across arguments): every other case
// must get the same verdict from the tool's input schema as from the tool.
type argCase struct {
	name  string
	tool  string
	args  string
	code  string
	field string
	blind bool
}

func limitCases(t *testing.T) []argCase {
	rep := strings.Repeat
	text := func(v any) string { return js(t, v) }
	tags := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("t%d", i)
		}
		return out
	}
	keys := func(n int) map[string]any {
		out := map[string]any{}
		for i := range n {
			out[fmt.Sprintf("k%d", i)] = i
		}
		return out
	}
	const inv = "invalid_argument"
	maxText := memgate.DefaultMaxTextBytes
	return []argCase{
		// text
		{name: "text at the byte limit passes", tool: "remember", args: text(map[string]any{"text": rep("a", maxText)})},
		{name: "text one byte over is too_large", tool: "remember", args: text(map[string]any{"text": rep("a", maxText+1)}), code: "too_large", field: "text"},
		{name: "text over in bytes but not in characters is too_large", tool: "remember", args: text(map[string]any{"text": rep("é", maxText/2) + "a"}), code: "too_large", field: "text", blind: true},
		{name: "missing text", tool: "remember", args: `{}`, code: inv, field: "text"},
		{name: "empty text", tool: "remember", args: `{"text":""}`, code: inv, field: "text", blind: true},
		{name: "text of the wrong type", tool: "remember", args: `{"text":5}`, code: inv, field: "text"},
		{name: "text null", tool: "remember", args: `{"text":null}`, code: inv, field: "text"},
		{name: "allow_empty keeps empty text", tool: "remember", args: `{"text":"","allow_empty":true}`},
		{name: "allow_empty of the wrong type", tool: "remember", args: `{"text":"a","allow_empty":"yes"}`, code: inv, field: "allow_empty"},

		// id
		{name: "id at 256 bytes passes", tool: "remember", args: text(map[string]any{"text": "a", "id": rep("i", 256)})},
		{name: "id at 257 bytes fails", tool: "remember", args: text(map[string]any{"text": "a", "id": rep("i", 257)}), code: inv, field: "id"},
		{name: "id of 256 bytes in 128 characters passes", tool: "remember", args: text(map[string]any{"text": "a", "id": rep("é", 128)})},
		{name: "id of 257 bytes in 129 characters fails", tool: "remember", args: text(map[string]any{"text": "a", "id": rep("é", 128) + "i"}), code: inv, field: "id", blind: true},
		{name: "empty id fails", tool: "remember", args: `{"text":"a","id":""}`, code: inv, field: "id"},
		{name: "id with a control character fails", tool: "remember", args: `{"text":"a","id":"a\u0007b"}`, code: inv, field: "id"},
		{name: "get with a 257-byte id fails", tool: "get", args: text(map[string]any{"id": rep("i", 257)}), code: inv, field: "id"},
		{name: "get without id fails", tool: "get", args: `{}`, code: inv, field: "id"},
		{name: "forget with a 257-byte id fails", tool: "forget", args: text(map[string]any{"id": rep("i", 257)}), code: inv, field: "id"},
		{name: "id of the wrong type", tool: "get", args: `{"id":["a"]}`, code: inv, field: "id"},

		// title
		{name: "title of 256 characters passes", tool: "remember", args: text(map[string]any{"text": "a", "title": rep("é", 256)})},
		{name: "title of 257 characters fails", tool: "remember", args: text(map[string]any{"text": "a", "title": rep("é", 257)}), code: inv, field: "title"},
		{name: "empty title fails", tool: "remember", args: `{"text":"a","title":""}`, code: inv, field: "title"},
		{name: "title with a newline fails", tool: "remember", args: `{"text":"a","title":"a\nb"}`, code: inv, field: "title"},
		{name: "title null is no title", tool: "remember", args: `{"text":"a","title":null}`, blind: true},

		// tags
		{name: "32 tags pass", tool: "remember", args: text(map[string]any{"text": "a", "tags": tags(32)})},
		{name: "33 tags fail", tool: "remember", args: text(map[string]any{"text": "a", "tags": tags(33)}), code: inv, field: "tags"},
		{name: "a tag of 64 characters passes", tool: "remember", args: text(map[string]any{"text": "a", "tags": []string{rep("é", 64)}})},
		{name: "a tag of 65 characters fails", tool: "remember", args: text(map[string]any{"text": "a", "tags": []string{rep("é", 65)}}), code: inv, field: "tags"},
		{name: "a tag with a space fails", tool: "remember", args: `{"text":"a","tags":["a b"]}`, code: inv, field: "tags"},
		{name: "an empty tag fails", tool: "remember", args: `{"text":"a","tags":[""]}`, code: inv, field: "tags"},
		{name: "a tag with every allowed mark passes", tool: "remember", args: `{"text":"a","tags":["ns:a/b.c_d-e","Ünïcode9"]}`},
		{name: "tags as a string fail", tool: "remember", args: `{"text":"a","tags":"a"}`, code: inv, field: "tags"},
		{name: "tags holding a number fail", tool: "remember", args: `{"text":"a","tags":[1]}`, code: inv, field: "tags"},
		{name: "search with 33 tags fails", tool: "search", args: text(map[string]any{"tags": tags(33)}), code: inv, field: "tags"},
		{name: "list with a bad tag fails", tool: "list", args: `{"tags":["no space"]}`, code: inv, field: "tags"},

		// metadata
		{name: "32 metadata keys pass", tool: "remember", args: text(map[string]any{"text": "a", "metadata": keys(32)})},
		{name: "33 metadata keys fail", tool: "remember", args: text(map[string]any{"text": "a", "metadata": keys(33)}), code: inv, field: "metadata"},
		{name: "a metadata key of 64 characters passes", tool: "remember", args: text(map[string]any{"text": "a", "metadata": map[string]any{rep("k", 64): 1}})},
		{name: "a metadata key of 65 characters fails", tool: "remember", args: text(map[string]any{"text": "a", "metadata": map[string]any{rep("k", 65): 1}}), code: inv, field: "metadata"},
		{name: "a metadata key with a space fails", tool: "remember", args: `{"text":"a","metadata":{"a b":1}}`, code: inv, field: "metadata"},
		{name: "metadata of 8192 bytes passes", tool: "remember", args: text(map[string]any{"text": "a", "metadata": map[string]any{"k": rep("v", 8192-8)}})},
		{name: "metadata of 8193 bytes fails", tool: "remember", args: text(map[string]any{"text": "a", "metadata": map[string]any{"k": rep("v", 8193-8)}}), code: inv, field: "metadata", blind: true},
		{name: "a nested metadata value fails", tool: "remember", args: `{"text":"a","metadata":{"k":{"x":1}}}`, code: inv, field: "metadata"},
		{name: "a metadata array fails", tool: "remember", args: `{"text":"a","metadata":{"k":[1]}}`, code: inv, field: "metadata"},
		{name: "metadata as an array fails", tool: "remember", args: `{"text":"a","metadata":[]}`, code: inv, field: "metadata"},
		{name: "a repeated metadata key fails", tool: "remember", args: `{"text":"a","metadata":{"k":1,"k":2}}`, code: inv, field: "metadata", blind: true},
		{name: "flat metadata of every kind passes", tool: "remember", args: `{"text":"a","metadata":{"s":"x","n":-1.5e3,"b":false,"z":null}}`},
		{name: "a filter with a nested value fails", tool: "search", args: `{"filter":{"k":{}}}`, code: inv, field: "filter"},
		{name: "a filter with 33 keys fails", tool: "list", args: text(map[string]any{"filter": keys(33)}), code: inv, field: "filter"},

		// if_version
		{name: "remember if_version -1 fails", tool: "remember", args: `{"text":"a","if_version":-1}`, code: inv, field: "if_version"},
		{name: "remember if_version at 2^53-1 is read exactly", tool: "remember", args: `{"text":"a","if_version":9007199254740991}`, code: "version_conflict", blind: true},
		{name: "remember if_version past 2^53 fails", tool: "remember", args: `{"text":"a","if_version":9007199254740992}`, code: inv, field: "if_version"},
		{name: "remember if_version beyond int64 fails", tool: "remember", args: `{"text":"a","if_version":99999999999999999999}`, code: inv, field: "if_version"},
		{name: "remember if_version with a fraction fails", tool: "remember", args: `{"text":"a","if_version":1.5}`, code: inv, field: "if_version"},
		{name: "remember if_version as a string fails", tool: "remember", args: `{"text":"a","if_version":"1"}`, code: inv, field: "if_version"},
		{name: "forget if_version 0 fails", tool: "forget", args: `{"id":"a","if_version":0}`, code: inv, field: "if_version"},

		// search
		{name: "search limit 100 passes", tool: "search", args: `{"query":"a","limit":100}`},
		{name: "search limit 101 fails", tool: "search", args: `{"query":"a","limit":101}`, code: inv, field: "limit"},
		{name: "search limit 0 fails", tool: "search", args: `{"query":"a","limit":0}`, code: inv, field: "limit"},
		{name: "search limit 1e1 is the integer 10", tool: "search", args: `{"query":"a","limit":1e1}`},
		{name: "search limit 10.0 is the integer 10", tool: "search", args: `{"query":"a","limit":10.0}`},
		{name: "search limit 10.5 fails", tool: "search", args: `{"query":"a","limit":10.5}`, code: inv, field: "limit"},
		{name: "search limit as a string fails", tool: "search", args: `{"query":"a","limit":"10"}`, code: inv, field: "limit"},
		{name: "search budget 100000 passes", tool: "search", args: `{"query":"a","budget":100000}`},
		{name: "search budget 100001 fails", tool: "search", args: `{"query":"a","budget":100001}`, code: inv, field: "budget"},
		{name: "search budget 0 fails", tool: "search", args: `{"query":"a","budget":0}`, code: inv, field: "budget"},
		{name: "search tags_mode any passes", tool: "search", args: `{"tags":["a"],"tags_mode":"any"}`},
		{name: "search tags_mode some fails", tool: "search", args: `{"tags":["a"],"tags_mode":"some"}`, code: inv, field: "tags_mode"},
		{name: "search without query, tags or filter fails", tool: "search", args: `{"limit":5}`, code: inv, field: "query", blind: true},
		{name: "search with a blank query fails", tool: "search", args: `{"query":"   "}`, code: inv, field: "query", blind: true},
		{name: "search with a query at the byte limit passes", tool: "search", args: text(map[string]any{"query": rep("a ", maxText/2)})},
		{name: "search with a query over the byte limit fails", tool: "search", args: text(map[string]any{"query": rep("a", maxText+1)}), code: inv, field: "query"},

		// list and export
		{name: "list limit 1000 passes", tool: "list", args: `{"limit":1000}`},
		{name: "list limit 1001 fails", tool: "list", args: `{"limit":1001}`, code: inv, field: "limit"},
		{name: "list limit 0 fails", tool: "list", args: `{"limit":0}`, code: inv, field: "limit"},
		{name: "list order created_desc passes", tool: "list", args: `{"order":"created_desc"}`},
		{name: "list order random fails", tool: "list", args: `{"order":"random"}`, code: inv, field: "order"},
		{name: "list with a forged cursor fails", tool: "list", args: `{"cursor":"bm90LWEtY3Vyc29y"}`, code: inv, field: "cursor", blind: true},
		{name: "list with an overlong cursor fails", tool: "list", args: text(map[string]any{"cursor": rep("c", 513)}), code: inv, field: "cursor"},
		{name: "export limit 1000 passes", tool: "export", args: `{"limit":1000}`},
		{name: "export limit 1001 fails", tool: "export", args: `{"limit":1001}`, code: inv, field: "limit"},
		{name: "export with a forged cursor fails", tool: "export", args: `{"cursor":"eA"}`, code: inv, field: "cursor", blind: true},

		// the shape of the arguments
		{name: "an unknown field fails", tool: "remember", args: `{"text":"a","colour":"red"}`, code: inv, field: "colour"},
		{name: "an unknown field with an odd name is named arguments", tool: "get", args: `{"id":"a","bad key!":1}`, code: inv, field: "arguments"},
		{name: "stats takes no arguments", tool: "stats", args: `{"verbose":true}`, code: inv, field: "verbose"},
		{name: "a repeated field fails", tool: "remember", args: `{"text":"a","text":"b"}`, code: inv, field: "text", blind: true},
		{name: "field names are case-sensitive", tool: "remember", args: `{"Text":"a"}`, code: inv, field: "Text"},
		{name: "null arguments are no arguments", tool: "stats", args: `null`, blind: true},
	}
}

func TestValidationAtTheLimits(t *testing.T) {
	e := newEnv(t, server.Options{})
	for _, tc := range limitCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			res := e.call(tc.tool, tc.args)
			if tc.code == "" {
				if res.IsError {
					t.Fatalf("failed: %s", mustJSON(t, res.StructuredContent))
				}
				return
			}
			if !res.IsError {
				t.Fatalf("succeeded, want %s on %s", tc.code, tc.field)
			}
			code, field := envelopeOf(t, res)
			if code != tc.code || field != tc.field {
				t.Fatalf("got %s on %q, want %s on %q: %s", code, field, tc.code, tc.field, mustJSON(t, res.StructuredContent))
			}
		})
	}
}

// TestInputSchemasStateTheBounds checks that each tool's input schema, as
// a client sees it, accepts and refuses what the tool does.
func TestInputSchemasStateTheBounds(t *testing.T) {
	e := newEnv(t, server.Options{})
	for _, tc := range limitCases(t) {
		if tc.blind {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			var v any
			if err := json.Unmarshal([]byte(tc.args), &v); err != nil {
				t.Fatal(err)
			}
			err := e.in[tc.tool].Validate(&v)
			// The schema cannot see the one rule across arguments, and
			// storage checks cursors; those cases are blind above.
			if (err == nil) != (tc.code == "") {
				t.Fatalf("schema says %v, tool says %q", err, tc.code)
			}
		})
	}
}

// TestErrorMessagesNeverEchoValues: a refusal names the field, never the
// value. (An unknown argument's own name is echoed in details.field when it
// is a plain identifier; that is a name the caller chose, not a value.)
func TestErrorMessagesNeverEchoValues(t *testing.T) {
	e := newEnv(t, server.Options{})
	const marker = "zq7marker"
	for _, args := range []string{
		`{"text":"zq7marker","id":"zq7marker` + strings.Repeat("x", 300) + `"}`,
		`{"text":"zq7marker","title":"zq7marker\n"}`,
		`{"text":"zq7marker","tags":["zq7marker bad"]}`,
		`{"text":"zq7marker","metadata":{"zq7marker bad":1}}`,
		`{"text":"zq7marker ghp_` + strings.Repeat("A1b2", 9) + `"}`,
	} {
		res := e.call("remember", args)
		if !res.IsError || strings.Contains(mustJSON(t, res), marker) {
			t.Fatalf("%s: %s", args, mustJSON(t, res))
		}
	}
	for _, args := range []string{`{"id":"zq7marker"}`, `{"id":"zq7marker","if_version":3}`} {
		res := e.call("forget", args)
		if !res.IsError || strings.Contains(mustJSON(t, res), marker) {
			t.Fatalf("%s: %s", args, mustJSON(t, res))
		}
	}
}
