package server_test

import (
	"encoding/json"
	"testing"

	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/tenants"
)

// badStrings are strings whose JSON Go's decoder would turn into U+FFFD
// without a word: a raw byte that is not UTF-8, lone surrogate escapes, a
// surrogate written as raw UTF-8.
var badStrings = map[string]string{
	"lone high surrogate": `"key\ud800"`,
	"last high surrogate": `"key\udbff"`,
	"lone low surrogate":  `"key\udc00"`,
	"raw 0xff":            "\"key\xff\"",
	"raw surrogate":       "\"key\xed\xa0\x80\"",
}

// badArguments are tool calls, each with one bad string, and the field the
// refusal must name.
func badArguments(s string) []struct{ tool, args, field string } {
	return []struct{ tool, args, field string }{
		{"remember", `{"text":"t","id":` + s + `}`, "id"},
		{"remember", `{"text":` + s + `}`, "text"},
		{"remember", `{"text":"t","title":` + s + `}`, "title"},
		{"remember", `{"text":"t","tags":[` + s + `]}`, "tags"},
		{"remember", `{"text":"t","metadata":{"k":` + s + `}}`, "metadata"},
		{"remember", `{"text":"t","metadata":{` + s + `:1}}`, "metadata"},
		{"get", `{"id":` + s + `}`, "id"},
		{"search", `{"query":` + s + `}`, "query"},
		{"list", `{"cursor":` + s + `}`, "cursor"},
		{"remember", `{"text":"t",` + s + `:1}`, "arguments"},
		{"remember", `{"text":"t","source":{"kind":"url","reference":` + s + `,"actor":"a"}}`, "source.reference"},
		{"remember", `{"text":"t","source":{"kind":"url","reference":"r","actor":` + s + `}}`, "source.actor"},
		{"remember", `{"text":"t","source":{"kind":"url","reference":"r","actor":"a",` + s + `:1}}`, "source"},
	}
}

// toolRefusal reads a tools/call answer that must be invalid_argument naming
// field.
func toolRefusal(t *testing.T, line []byte) (code, field string) {
	t.Helper()
	var msg struct {
		Result struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				Error struct {
					Code    string         `json:"code"`
					Details map[string]any `json:"details"`
				} `json:"error"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(line, &msg); err != nil {
		t.Fatalf("answer %q: %v", line, err)
	}
	e := msg.Result.StructuredContent.Error
	f, _ := e.Details["field"].(string)
	return e.Code, f
}

func TestInvalidUTF8IsRefusedNotReplaced(t *testing.T) {
	for name, on := range map[string]func(t *testing.T, pool *tenants.Pool, tool, args string) []byte{
		"stdio": stdioCallOn, "http": httpCallOn,
	} {
		t.Run(name, func(t *testing.T) {
			pool := newPool(t, 0)
			call := func(tool, args string) []byte { return on(t, pool, tool, args) }
			for what, s := range badStrings {
				for _, c := range badArguments(s) {
					code, field := toolRefusal(t, call(c.tool, c.args))
					if code != "invalid_argument" || field != c.field {
						t.Errorf("%s in %s %s: %s on %q, want invalid_argument on %q", what, c.tool, c.field, code, field, c.field)
					}
				}
			}
			// Nothing was stored, and a valid pair still is.
			sc := answer(t, call("stats", `{}`))
			if sc["count"] != float64(0) {
				t.Fatalf("stats after the refusals: %v", sc)
			}
			sc = answer(t, call("remember", `{"text":"t","id":"key\ud83d\ude00"}`))
			if id := sc["memory"].(map[string]any)["id"]; id != "key\U0001F600" {
				t.Fatalf("a surrogate pair became %q", id)
			}
		})
	}
}

func stdioCallOn(t *testing.T, pool *tenants.Pool, tool, args string) []byte {
	t.Helper()
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease)})
	if err != nil {
		t.Fatal(err)
	}
	return stdioCall2(t, srv, tool, args)
}

func httpCallOn(t *testing.T, pool *tenants.Pool, tool, args string) []byte {
	t.Helper()
	return httpCall(t, pool, 0, tool, args)
}
