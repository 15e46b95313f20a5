package server

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
)

// fuzzServer is a server whose tools are parsed but never run.
func fuzzServer(f *testing.F) *Server {
	lease := func(context.Context, memgate.Namespace) (Store, func(), error) {
		return nil, nil, errors.New("no store in a fuzz test")
	}
	s, err := New(Options{Lease: lease, NamespaceArg: true})
	if err != nil {
		f.Fatal(err)
	}
	return s
}

// FuzzToolArguments feeds arbitrary arguments to every tool's decoding and
// validation. Whatever comes in, the answer is a -32602 protocol error or a
// memgate error naming its field, or a call that json.Unmarshal agrees is an
// object of known fields.
func FuzzToolArguments(f *testing.F) {
	for _, seed := range []string{
		``, `null`, `{}`, `[]`, `"x"`, `1`, `{"text":"a"}`, `{"text":"a","text":"b"}`,
		`{"text":"a","id":"i","title":"t","tags":["a","a"],"metadata":{"k":1,"k":2},"if_version":0,"allow_empty":true}`,
		`{"query":"q","tags":["x"],"tags_mode":"any","filter":{"a":null,"b":[1]},"limit":1e1,"budget":100000}`,
		`{"cursor":"abc","limit":1000,"order":"created_asc"}`, `{"id":"x","if_version":99999999999999999999}`,
		`{"limit":-0.0}`, `{"limit":1e400}`, `{"limit":0.5e1}`, `{"namespace":"team"}`, `{"namespace":"Team"}`,
		`{"text":"\ud800"}`, `{"text":"a"} trailing`, `{"text":"a",}`, `{"metadata":{"k":{"x":1}}}`,
		`{"tags":[null]}`, `{"text":null,"title":null}`, `{"a":1}`, `{"":1}`,
	} {
		f.Add(seed)
	}
	s := fuzzServer(f)
	tools := s.tools()
	f.Fuzz(func(t *testing.T, raw string) {
		for _, td := range tools {
			fields := td.names
			a, err := decodeArgs(json.RawMessage(raw), fields)
			if err == nil {
				_, _, err = s.prepare(td, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Arguments: json.RawMessage(raw)}})
			}
			if err == nil {
				var m map[string]json.RawMessage
				if strings.TrimSpace(raw) != "" && strings.TrimSpace(raw) != "null" && json.Unmarshal([]byte(raw), &m) != nil {
					t.Fatalf("%s accepted %q, which is not a JSON object", td.tool.Name, raw)
				}
				for k := range a {
					if !slices.Contains(fields, k) {
						t.Fatalf("%s accepted unknown field %q", td.tool.Name, k)
					}
				}
				continue
			}
			var rpc *jsonrpc.Error
			if errors.As(err, &rpc) {
				if rpc.Code != jsonrpc.CodeInvalidParams {
					t.Fatalf("%s: protocol error %d", td.tool.Name, rpc.Code)
				}
				continue
			}
			var e *memgate.Error
			if !errors.As(err, &e) || !slices.Contains(memgate.Codes, e.Code) || e.Code == memgate.CodeInternal {
				t.Fatalf("%s: %T %v", td.tool.Name, err, err)
			}
			if field, _ := e.Details["field"].(string); field == "" {
				t.Fatalf("%s: %s without details.field: %v", td.tool.Name, e.Code, e)
			}
		}
	})
}

// FuzzMemoryURI: a valid id survives MemoryURI and parseMemoryURI unchanged,
// and its URI holds only unreserved characters and %XX escapes; an
// arbitrary URI either parses to a valid id or is refused, without panic.
func FuzzMemoryURI(f *testing.F) {
	for _, seed := range []string{"a", "a b", "notes/2026: ü?#", "%", "%2", "%zz", "memgate://memory/a",
		"memgate://namespace/team/memory/a%20b", "memgate://namespace/Team/memory/a", "memgate://namespace//memory/",
		"memgate://memory/%00", "memgate://memory/%C3%28", strings.Repeat("x", 300)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if memgate.ValidateID("id", s) == nil {
			uri := MemoryURI(s)
			rest := uri[len(memoryPrefix):]
			for i := 0; i < len(rest); i++ {
				if c := rest[i]; !unreserved(c) && c != '%' {
					t.Fatalf("MemoryURI(%q) = %q holds %q", s, uri, c)
				}
			}
			ref, ok := parseMemoryURI(uri, false)
			if !ok || ref.id != s || ref.ns != "" {
				t.Fatalf("MemoryURI(%q) = %q parses to %+v, %v", s, uri, ref, ok)
			}
			ref, ok = parseMemoryURI(NamespaceMemoryURI("team", s), true)
			if !ok || ref.id != s || ref.ns != "team" {
				t.Fatalf("NamespaceMemoryURI(team, %q) parses to %+v, %v", s, ref, ok)
			}
		}
		for _, namespaced := range []bool{false, true} {
			ref, ok := parseMemoryURI(s, namespaced)
			if !ok {
				continue
			}
			if memgate.ValidateID("id", ref.id) != nil || !utf8.ValidString(ref.id) {
				t.Fatalf("%q parses to an invalid id %q", s, ref.id)
			}
			if ref.ns != "" {
				if _, err := memgate.ParseNamespace("namespace", ref.ns); err != nil || !namespaced {
					t.Fatalf("%q parses to namespace %q", s, ref.ns)
				}
			}
			if again, ok := parseMemoryURI(MemoryURI(ref.id), false); !ok || again.id != ref.id {
				t.Fatalf("%q: the id %q does not survive a round trip", s, ref.id)
			}
		}
	})
}

// FuzzDetectSecret: detection never panics, names a known kind, and always
// finds a credential set apart by spaces, whatever surrounds it.
func FuzzDetectSecret(f *testing.F) {
	for _, seed := range []string{"", "sk-", "://", "a://b:c@d", "-----BEGIN PRIVATE KEY-----\n", "AKIA", "eyJ.eyJ.",
		strings.Repeat("sk-", 100), strings.Repeat("://", 100), "xoxb-1", "ghp_"} {
		f.Add(seed, seed)
	}
	kinds := []string{"", SecretPrivateKey, SecretAWSAccessKey, SecretGoogleAPIKey, SecretGitHubToken, SecretGitLabToken,
		SecretSlackToken, SecretStripeKey, SecretAnthropicKey, SecretOpenAIKey, SecretJWT, SecretURLPassword}
	token := "ghp_" + strings.Repeat("aB3d", 9)
	f.Fuzz(func(t *testing.T, before, after string) {
		if k := detectSecret(before); !slices.Contains(kinds, k) {
			t.Fatalf("unknown kind %q", k)
		}
		if detectSecret(before+" "+token+" "+after) == "" {
			t.Fatalf("missed a token between %q and %q", before, after)
		}
	})
}
