package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/gateway"
)

// secretMarker stands for memory text, ids and names a caller sends: no
// error may repeat it.
const secretMarker = "zq-private-7731"

// echoingRequests are calls whose refusal, left to the SDK, repeated part of
// what was sent.
var echoingRequests = []struct {
	name, params, method string
	code                 int64
}{
	{"params that do not decode", `{"name":5,"arguments":{"text":"` + secretMarker + `"}}`, "tools/call", -32602},
	{"arguments of the wrong type", `{"name":"remember","arguments":"` + secretMarker + `"}`, "tools/call", -32602},
	{"a name given twice", `{"name":"get","name":"` + secretMarker + `"}`, "tools/call", -32602},
	{"an unknown tool", `{"name":"` + secretMarker + `","arguments":{}}`, "tools/call", -32602},
	{"an unknown prompt", `{"name":"` + secretMarker + `"}`, "prompts/get", -32602},
	{"prompt arguments that do not decode", `{"name":"recall","arguments":{"topic":["` + secretMarker + `"]}}`, "prompts/get", -32602},
	{"an unmatched resource URI", `{"uri":"nowhere://` + secretMarker + `"}`, "resources/read", -32602},
	{"a missing memory", `{"uri":"memgate://memory/` + secretMarker + `"}`, "resources/read", -32602},
	{"an unknown method", `{}`, secretMarker, -32601},
}

// stdioAnswers runs lines through a stdio session of a new server, after
// its initialize (answered under id 0), and returns the answers' lines.
func stdioAnswers(t *testing.T, lines ...string) []string {
	t.Helper()
	srv, err := server.New(server.Options{Lease: server.LeaseOf(newPool(t, 0).Lease)})
	if err != nil {
		t.Fatal(err)
	}
	lines = append([]string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}, lines...)
	var out syncBuffer
	if err := srv.RunStdio(t.Context(), strings.NewReader(strings.Join(lines, "\n")+"\n"), &out); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(out.String()), "\n")
}

func TestProtocolErrorsRepeatNothingSentOverStdio(t *testing.T) {
	var lines []string
	for i, r := range echoingRequests {
		lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, i+1, r.method, r.params))
	}
	answers := stdioAnswers(t, lines...)
	if len(answers) != len(echoingRequests)+1 {
		t.Fatalf("%d answers to %d calls:\n%s", len(answers), len(echoingRequests)+1, strings.Join(answers, "\n"))
	}
	for _, a := range answers {
		if !strings.HasPrefix(a, `{"jsonrpc":"2.0","id":0,`) {
			checkNoEcho(t, a)
		}
	}
}

func TestProtocolErrorsRepeatNothingSentOverHTTP(t *testing.T) {
	g := startGateway(t, gateway.Options{}, server.Options{})
	session := g.initialize("2025-11-25", nil)
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": gateway.RevisionStateless,
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "x", "version": "1"}, "io.modelcontextprotocol/clientCapabilities": map[string]any{}}
	for i, r := range echoingRequests {
		for _, v := range []string{"2025-11-25", gateway.RevisionStateless} {
			s, params, header := session, r.params, map[string]string{}
			if v == gateway.RevisionStateless {
				// The stateless revision takes _meta in params and the name in a
				// header; params that do not decode into a map are sent as they are.
				s = ""
				var m map[string]any
				if err := json.Unmarshal([]byte(params), &m); err == nil && memgate.CheckUniqueKeys([]byte(params)) == nil {
					m["_meta"] = meta
					params = mustJSON(t, m)
				}
				header["Mcp-Method"] = r.method
				if name, ok := m["name"].(string); ok {
					header["Mcp-Name"] = name
				}
				if uri, ok := m["uri"].(string); ok {
					header["Mcp-Name"] = uri
				}
			}
			resp := g.post(rpc{body: fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, i+1, r.method, params), session: s, version: v,
				header: header})
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), secretMarker) {
				t.Errorf("%s (%s): HTTP %d repeats what was sent: %s", r.name, v, resp.StatusCode, b)
			}
			if r.code == -32601 && v == gateway.RevisionStateless && resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s (%s): HTTP %d, want 404 as the SDK answers", r.name, v, resp.StatusCode)
			}
			if !strings.Contains(string(b), fmt.Sprintf(`"code":%d`, r.code)) {
				t.Errorf("%s (%s): HTTP %d %s, want code %d", r.name, v, resp.StatusCode, b, r.code)
			}
		}
	}
}

func checkNoEcho(t *testing.T, answer string) {
	t.Helper()
	if strings.Contains(answer, secretMarker) {
		t.Errorf("an error repeats what was sent: %s", answer)
	}
	if !strings.Contains(answer, `"error"`) {
		t.Errorf("not an error: %s", answer)
	}
}

// A key given twice inside a message is answered under the message's id:
// inside a tool's arguments, by the tool, as invalid_argument naming the
// argument; elsewhere in the params, -32602. Only a key of the message's
// own given twice (its id, say) leaves it without one.
func TestKeysGivenTwiceAreAnsweredUnderTheirID(t *testing.T) {
	calls := []struct {
		params, method, want string
	}{
		{`{"name":"remember","arguments":{"text":"a","text":"b"}}`, "tools/call", `"field":"text"`},
		{`{"name":"remember","arguments":{"text":"a","metadata":{"k":1,"k":2}}}`, "tools/call", `"field":"metadata"`},
		{`{"name":"remember","name":"forget","arguments":{"text":"a"}}`, "tools/call", `"code":-32602`},
		{`{"name":"remember","arguments":{"text":"a"},"_meta":{"x":1,"x":2}}`, "tools/call", `"code":-32602`},
		{`{"name":"recall-context","arguments":{"topic":"a","topic":"b"}}`, "prompts/get", `"code":-32602`},
		{`{"uri":"memgate://stats","uri":"memgate://stats"}`, "resources/read", `"code":-32602`},
	}
	var lines []string
	for i, c := range calls {
		lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, i+1, c.method, c.params))
	}
	lines = append(lines, `{"jsonrpc":"2.0","id":98,"id":99,"method":"ping"}`)
	byID := map[string]string{}
	for _, a := range stdioAnswers(t, lines...) {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal([]byte(a), &m)
		byID[string(m.ID)] = a
	}
	for i, c := range calls {
		if a := byID[fmt.Sprint(i+1)]; !strings.Contains(a, c.want) {
			t.Errorf("stdio, %s %s: %q, want %s under id %d", c.method, c.params, a, c.want, i+1)
		}
	}
	if a := byID[""]; !strings.Contains(a, `"code":-32600`) {
		t.Errorf("stdio, an id given twice: %q, want -32600 without an id", a)
	}

	g := startGateway(t, gateway.Options{}, server.Options{})
	session := g.initialize("2025-11-25", nil)
	for i, c := range calls {
		resp := g.post(rpc{body: fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, i+1, c.method, c.params),
			session: session, version: "2025-11-25"})
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), c.want) || !strings.Contains(string(b), fmt.Sprintf(`"id":%d`, i+1)) {
			t.Errorf("HTTP, %s %s: %d %s, want %s under id %d", c.method, c.params, resp.StatusCode, b, c.want, i+1)
		}
	}
}

// A message nesting arrays and objects past memgate.MaxJSONDepth is an
// invalid request that says so, not a line that is "not JSON"; one at the
// bound reaches the tool, which names the field it refuses.
func TestAMessageNestedTooDeepIsRefusedAsSuch(t *testing.T) {
	call := func(depth int) string { // the message, params, arguments, metadata: 4 objects
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"remember","arguments":{"text":"x","metadata":{"k":` +
			strings.Repeat("[", depth-4) + strings.Repeat("]", depth-4) + `}}}}`
	}
	answers := stdioAnswers(t, call(memgate.MaxJSONDepth+1), strings.Replace(call(memgate.MaxJSONDepth), `"id":1`, `"id":2`, 1))
	if len(answers) != 3 {
		t.Fatalf("answers: %q", answers)
	}
	// The refusal comes from the reader, the answers from the session: in
	// either order.
	var past, at string
	for _, a := range answers {
		switch {
		case strings.Contains(a, "deeper than"):
			past = a
		case strings.Contains(a, `"id":2`):
			at = a
		}
	}
	if !strings.Contains(past, `"code":-32600`) || !strings.Contains(past, "deeper than 1000") {
		t.Errorf("past the bound: %q", past)
	}
	if !strings.Contains(at, "metadata") {
		t.Errorf("at the bound: %.300s", at)
	}
}
