package server_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/server"
)

// TestProtocolErrors: what is not a tool's business is a JSON-RPC error
// -32602, through the SDK client and on the wire.
func TestProtocolErrors(t *testing.T) {
	e := newEnv(t, server.Options{DisabledTools: []string{"export"}})
	e.ok("remember", `{"id":"known","text":"a"}`)

	for _, tc := range []struct {
		name string
		err  func() error
	}{
		{"an unknown tool", func() error {
			_, err := e.cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "recall"})
			return err
		}},
		{"a disabled tool", func() error {
			_, err := e.cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "export"})
			return err
		}},
		{"arguments that are an array", func() error {
			_, err := e.cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "get", Arguments: json.RawMessage(`["known"]`)})
			return err
		}},
		{"arguments that are a string", func() error {
			_, err := e.cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "get", Arguments: json.RawMessage(`"known"`)})
			return err
		}},
		{"arguments that are a number", func() error {
			_, err := e.cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "stats", Arguments: json.RawMessage(`1`)})
			return err
		}},
		{"an unknown resource scheme", func() error {
			_, err := e.cs.ReadResource(e.ctx, &mcp.ReadResourceParams{URI: "file:///etc/passwd"})
			return err
		}},
		{"an unknown memgate resource", func() error {
			_, err := e.cs.ReadResource(e.ctx, &mcp.ReadResourceParams{URI: "memgate://secrets"})
			return err
		}},
		{"a memory that does not exist", func() error {
			_, err := e.cs.ReadResource(e.ctx, &mcp.ReadResourceParams{URI: server.MemoryURI("nobody")})
			return err
		}},
		{"a memory URI with a bad escape", func() error {
			_, err := e.cs.ReadResource(e.ctx, &mcp.ReadResourceParams{URI: "memgate://memory/%zz"})
			return err
		}},
		{"a namespaced memory URI without --namespace-arg", func() error {
			_, err := e.cs.ReadResource(e.ctx, &mcp.ReadResourceParams{URI: "memgate://namespace/default/memory/known"})
			return err
		}},
		{"an unknown prompt", func() error {
			_, err := e.cs.GetPrompt(e.ctx, &mcp.GetPromptParams{Name: "summarise"})
			return err
		}},
		{"a prompt without its required argument", func() error {
			_, err := e.cs.GetPrompt(e.ctx, &mcp.GetPromptParams{Name: "recall-context"})
			return err
		}},
		{"a prompt with an unknown argument", func() error {
			_, err := e.cs.GetPrompt(e.ctx, &mcp.GetPromptParams{Name: "save-memory", Arguments: map[string]string{"content": "x", "mood": "y"}})
			return err
		}},
		{"a prompt with a limit out of range", func() error {
			_, err := e.cs.GetPrompt(e.ctx, &mcp.GetPromptParams{Name: "recall-context", Arguments: map[string]string{"topic": "x", "limit": "101"}})
			return err
		}},
		{"a prompt with a bad tag", func() error {
			_, err := e.cs.GetPrompt(e.ctx, &mcp.GetPromptParams{Name: "review-memories", Arguments: map[string]string{"tag": "a b"}})
			return err
		}},
		{"a resource page cursor that was never issued", func() error {
			_, err := e.cs.ListResources(e.ctx, &mcp.ListResourcesParams{Cursor: "forged"})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if rpcCode(err) != jsonrpc.CodeInvalidParams {
				t.Fatalf("got %v, want -32602", err)
			}
			// memgate's envelope travels in data, as docs/TOOLS.md says, in
			// what a prompt's or a resource's handler refuses; what is refused
			// before a handler (an unknown name or URI, arguments of the wrong
			// shape) is a fixed message alone.
			if !handlerRefuses[tc.name] {
				return
			}
			var w *jsonrpc.Error
			var envelope struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			}
			if !errors.As(err, &w) || json.Unmarshal(w.Data, &envelope) != nil || envelope.Code == "" || envelope.Message == "" {
				t.Fatalf("%v: data %s, want memgate's envelope", err, w.Data)
			}
		})
	}

	// The answer to a missing memory does not echo its URI, which holds
	// the id.
	_, err := e.cs.ReadResource(e.ctx, &mcp.ReadResourceParams{URI: server.MemoryURI("zq7-missing")})
	if strings.Contains(err.Error(), "zq7") {
		t.Fatalf("the error echoes the id: %v", err)
	}
}

// handlerRefuses are the cases of TestProtocolErrors that a prompt's or a
// resource's handler refuses.
var handlerRefuses = map[string]bool{
	"a memory that does not exist": true, "a prompt without its required argument": true,
	"a prompt with an unknown argument": true, "a prompt with a limit out of range": true,
	"a prompt with a bad tag": true, "a resource page cursor that was never issued": true,
}

func TestMalformedRequestsOnTheWire(t *testing.T) {
	e := newEnv(t, server.Options{})
	r := newRawSession(t, e.srv)
	for _, tc := range []struct {
		name, method, params string
		code                 int64
	}{
		{"tools/call with params that are a string", "tools/call", `"remember"`, jsonrpc.CodeInvalidParams},
		{"tools/call with params that are an array", "tools/call", `[]`, jsonrpc.CodeInvalidParams},
		{"tools/call without a name", "tools/call", `{"arguments":{}}`, jsonrpc.CodeInvalidParams},
		{"tools/call with a name of the wrong type", "tools/call", `{"name":5}`, jsonrpc.CodeInvalidParams},
		{"tools/call with arguments that are not an object", "tools/call", `{"name":"stats","arguments":[]}`, jsonrpc.CodeInvalidParams},
		{"resources/read without a uri", "resources/read", `{}`, jsonrpc.CodeInvalidParams},
		{"prompts/get without a name", "prompts/get", `{}`, jsonrpc.CodeInvalidParams},
		{"prompts/get with arguments that are not strings", "prompts/get", `{"name":"save-memory","arguments":{"content":5}}`, jsonrpc.CodeInvalidParams},
		// An unknown method is JSON-RPC's own "method not found".
		{"an unknown method", "memories/dump", `{}`, jsonrpc.CodeMethodNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := r.request(tc.method, tc.params)
			var w *jsonrpc.Error
			if !errorsAsWire(res.Error, &w) || w.Code != tc.code {
				t.Fatalf("got %s, want error %d", wireOf(t, res), tc.code)
			}
		})
	}
	// The session survives all of that.
	if res := r.request("tools/call", `{"name":"stats","arguments":{}}`); res.Error != nil {
		t.Fatalf("after the bad requests: %v", res.Error)
	}
}
