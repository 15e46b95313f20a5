package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// invoke runs `memgate invoke tool` with args as JSON on stdin.
func invoke(t *testing.T, dd []string, tool string, arguments any, flags ...string) result {
	t.Helper()
	b, err := json.Marshal(arguments)
	if err != nil {
		t.Fatal(err)
	}
	return mg(t, env{}, string(b), append(args(dd, "invoke", tool), flags...)...)
}

// invokeFails checks an invoke failed with code: exit 1, the error envelope
// on stdout, and the code on stderr. It returns details.field.
func invokeFails(t *testing.T, r result, code string) string {
	t.Helper()
	r.fails(t, 1, code)
	env := decode(t, r.stdout)
	if dig(env, "error", "code") != code || dig(env, "error", "message") == nil {
		t.Fatalf("envelope %v, want code %s", env, code)
	}
	field, _ := dig(env, "error", "details", "field").(string)
	return field
}

func TestInvokeLimits(t *testing.T) {
	dd := store(t)
	tags := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("t%d", i)
		}
		return out
	}
	tests := []struct {
		name      string
		tool      string
		atLimit   map[string]any
		overLimit map[string]any
		code      string
		field     string
	}{
		{"text of 65536 bytes passes, 65537 is too large", "remember",
			map[string]any{"text": strings.Repeat("a", 65536)}, map[string]any{"text": strings.Repeat("a", 65537)},
			"too_large", "text"},
		{"32 tags pass, 33 do not", "remember",
			map[string]any{"text": "tags", "tags": tags(32)}, map[string]any{"text": "tags", "tags": tags(33)},
			"invalid_argument", "tags"},
		{"an id of 256 bytes passes, 257 does not", "remember",
			map[string]any{"text": "id", "id": strings.Repeat("i", 256)}, map[string]any{"text": "id", "id": strings.Repeat("i", 257)},
			"invalid_argument", "id"},
		{"a title of 256 characters passes, 257 does not", "remember",
			map[string]any{"text": "title", "title": strings.Repeat("é", 256)}, map[string]any{"text": "title", "title": strings.Repeat("é", 257)},
			"invalid_argument", "title"},
		{"search limit 100 passes, 101 does not", "search",
			map[string]any{"query": "a", "limit": 100}, map[string]any{"query": "a", "limit": 101},
			"invalid_argument", "limit"},
		{"search budget 100000 passes, 100001 does not", "search",
			map[string]any{"query": "a", "budget": 100000}, map[string]any{"query": "a", "budget": 100001},
			"invalid_argument", "budget"},
		{"list limit 1000 passes, 1001 does not", "list",
			map[string]any{"limit": 1000}, map[string]any{"limit": 1001},
			"invalid_argument", "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			invoke(t, dd, tt.tool, tt.atLimit).ok(t)
			if field := invokeFails(t, invoke(t, dd, tt.tool, tt.overLimit), tt.code); field != tt.field {
				t.Fatalf("details.field = %q, want %q", field, tt.field)
			}
		})
	}
}

func TestInvokeFollowsMaxMemoryBytes(t *testing.T) {
	dd := store(t)
	invoke(t, dd, "remember", map[string]any{"text": "0123456789"}, "--max-memory-bytes", "10").ok(t)
	invokeFails(t, invoke(t, dd, "remember", map[string]any{"text": "0123456789X"}, "--max-memory-bytes", "10"), "too_large")
	// The CLI's remember has the same limit as the tool.
	mg(t, env{}, "0123456789X", args(dd, "remember", "--max-memory-bytes", "10")...).fails(t, 1, "too_large")
}

func TestInvoke(t *testing.T) {
	dd := store(t)
	m := invoke(t, dd, "remember", map[string]any{"id": "a", "text": "<b>tags & all</b>"}).ok(t)
	if dig(m, "memory", "text") != "<b>tags & all</b>" || m["created"] != true {
		t.Fatalf("remember: %v", m)
	}
	r := invoke(t, dd, "get", map[string]any{"id": "a"})
	if !strings.Contains(r.stdout, "<b>tags & all</b>") {
		t.Fatalf("invoke escapes HTML: %s", r.stdout)
	}
	// No input is no arguments.
	if st := mg(t, env{}, "", args(dd, "invoke", "stats")...).ok(t); st["count"] != 1.0 {
		t.Fatalf("stats: %v", st)
	}
	if field := invokeFails(t, invoke(t, dd, "get", map[string]any{"id": "a", "colour": "red"}), "invalid_argument"); field != "colour" {
		t.Fatalf("unknown argument: field %q", field)
	}
	if field := invokeFails(t, invoke(t, dd, "get", map[string]any{"id": 7}), "invalid_argument"); field != "id" {
		t.Fatalf("wrong type: field %q", field)
	}
	invokeFails(t, invoke(t, dd, "get", map[string]any{"id": "nope"}), "not_found")
	// What tools/call refuses with -32602 is a usage error here.
	mg(t, env{}, `{}`, args(dd, "invoke", "recall")...).fails(t, 2, "not a tool")
	mg(t, env{}, `[1,2]`, args(dd, "invoke", "get")...).fails(t, 2, "must be a JSON object")
	mg(t, env{}, `{"id":`, args(dd, "invoke", "get")...).fails(t, 2, "not JSON")
	mg(t, env{}, `{}`, args(dd, "invoke", "forget", "--disable-tool", "forget")...).fails(t, 2, "not a tool")
}

func TestInvokeNamespaceArgument(t *testing.T) {
	dd := store(t)
	invoke(t, dd, "remember", map[string]any{"id": "x", "text": "in a", "namespace": "a"}, "--namespace-arg").ok(t)
	invokeFails(t, invoke(t, dd, "get", map[string]any{"id": "x", "namespace": "b"}, "--namespace-arg"), "not_found")
	invokeFails(t, invoke(t, dd, "get", map[string]any{"id": "x"}, "--namespace-arg"), "not_found")
	if m := invoke(t, dd, "get", map[string]any{"id": "x"}, "--namespace", "a").ok(t); dig(m, "memory", "text") != "in a" {
		t.Fatalf("get in a: %v", m)
	}
	// Without --namespace-arg, the argument is unknown.
	invokeFails(t, invoke(t, dd, "get", map[string]any{"id": "x", "namespace": "a"}), "invalid_argument")
}
