package server_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the server says now (go test -update rewrites it):\n%s", path, firstDiff(string(want), string(got)))
	}
}

func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return "line " + itoa(i+1) + ":\n- " + a + "\n+ " + b
		}
	}
	return ""
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func indent(t *testing.T, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

func TestGoldenToolsList(t *testing.T) {
	for _, tc := range []struct {
		file string
		opts server.Options
	}{
		{"tools_list.golden.json", server.Options{Version: "test"}},
		{"tools_list_namespace.golden.json", server.Options{Version: "test", NamespaceArg: true}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			e := newEnv(t, tc.opts)
			res := newRawSession(t, e.srv).request("tools/list", `{}`)
			if res.Error != nil {
				t.Fatal(res.Error)
			}
			golden(t, tc.file, indent(t, res.Result))
		})
	}
}

func TestGoldenErrorEnvelopes(t *testing.T) {
	e := newEnv(t, server.Options{Version: "test"})
	r := newRawSession(t, e.srv)
	broken := newEnv(t, server.Options{Version: "test", Lease: failingLease(errors.New("disk on fire"))})
	rb := newRawSession(t, broken.srv)
	r.request("tools/call", `{"name":"remember","arguments":{"id":"taken","text":"first"}}`)
	var out bytes.Buffer
	out.WriteString("[\n")
	for i, tc := range []struct {
		session *rawSession
		params  string
	}{
		{r, `{"name":"remember","arguments":{"text":"a","colour":"red"}}`},
		{r, `{"name":"remember","arguments":{"text":5}}`},
		{r, `{"name":"search","arguments":{"query":"a","limit":101}}`},
		{r, `{"name":"remember","arguments":{"text":"` + strings.Repeat("a", memgate.DefaultMaxTextBytes+1) + `"}}`},
		{r, `{"name":"get","arguments":{"id":"nobody"}}`},
		{r, `{"name":"remember","arguments":{"id":"taken","text":"again","if_version":0}}`},
		{r, `{"name":"remember","arguments":{"text":"token ghp_` + strings.Repeat("aB3d", 9) + `"}}`},
		{rb, `{"name":"stats","arguments":{}}`},
	} {
		res := tc.session.request("tools/call", tc.params)
		if res.Error != nil {
			t.Fatal(res.Error)
		}
		var params struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		json.Unmarshal([]byte(tc.params), &params)
		if len(params.Arguments) > 200 {
			params.Arguments = json.RawMessage(`"(65537 bytes of text)"`)
		}
		entry, _ := json.Marshal(map[string]any{"tool": params.Name, "arguments": params.Arguments, "result": json.RawMessage(res.Result)})
		out.Write(bytes.TrimSuffix(indent(t, entry), []byte("\n")))
		if i < 7 {
			out.WriteString(",")
		}
		out.WriteString("\n")
	}
	out.WriteString("]\n")
	golden(t, "error_envelopes.golden.json", out.Bytes())
}

// storeBytes hides the one number that depends on the file system.
var storeBytes = regexp.MustCompile(`(store_bytes\\?":)\d+`)

// TestGoldenConversation records a whole session on the wire: the
// handshake, every tool, resources and prompts, and the protocol errors.
func TestGoldenConversation(t *testing.T) {
	e := newEnv(t, server.Options{Version: "test"})
	r := dialRaw(t, e.srv)
	var out bytes.Buffer
	exchange := func(method, params string) {
		t.Helper()
		out.WriteString("-> " + method + " " + params + "\n")
		res := r.request(method, params)
		line := storeBytes.ReplaceAllString(wireOf(t, res), "${1}0")
		out.WriteString("<- " + line + "\n\n")
	}
	exchange("initialize", initialize)
	r.notify("notifications/initialized", `{}`)
	out.WriteString("-> notifications/initialized {}\n\n")
	for _, x := range [][2]string{
		{"tools/call", `{"name":"remember","arguments":{"id":"pref-editor","text":"Ana prefers Helix as her editor.","title":"Editor","tags":["ana","tools"],"metadata":{"source":"chat"}}}`},
		{"tools/call", `{"name":"remember","arguments":{"id":"deploy-day","text":"Deploys happen on Tuesdays after the review.","tags":["process"]}}`},
		{"tools/call", `{"name":"remember","arguments":{"id":"pref-editor","text":"Ana prefers Helix, with Vim keys.","title":"Editor","tags":["ana","tools"],"if_version":1}}`},
		{"tools/call", `{"name":"get","arguments":{"id":"pref-editor"}}`},
		{"tools/call", `{"name":"search","arguments":{"query":"which editor does Ana use"}}`},
		{"tools/call", `{"name":"search","arguments":{"tags":["process"],"budget":100}}`},
		{"tools/call", `{"name":"list","arguments":{"limit":1}}`},
		{"tools/call", `{"name":"stats","arguments":{}}`},
		{"tools/call", `{"name":"export","arguments":{}}`},
		{"resources/list", `{}`},
		{"resources/templates/list", `{}`},
		{"resources/read", `{"uri":"memgate://memory/pref-editor"}`},
		{"resources/read", `{"uri":"memgate://stats"}`},
		{"prompts/list", `{}`},
		{"prompts/get", `{"name":"recall-context","arguments":{"topic":"deploys","limit":"2"}}`},
		{"tools/call", `{"name":"forget","arguments":{"id":"deploy-day"}}`},
		{"tools/call", `{"name":"get","arguments":{"id":"deploy-day"}}`},
		{"tools/call", `{"name":"recall","arguments":{}}`},
		{"tools/call", `{"name":"get","arguments":["deploy-day"]}`},
		{"resources/read", `{"uri":"memgate://memory/deploy-day"}`},
		{"prompts/get", `{"name":"summarise"}`},
	} {
		exchange(x[0], x[1])
	}
	golden(t, "conversation.golden.txt", out.Bytes())
}
