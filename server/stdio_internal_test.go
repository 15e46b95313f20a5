package server

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestIsResponse(t *testing.T) {
	id := func(v any) jsonrpc.ID {
		i, err := jsonrpc.MakeID(v)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	for _, tc := range []struct {
		name string
		msg  jsonrpc.Message
		want bool
	}{
		{"a result", &jsonrpc.Response{ID: id(float64(7)), Result: json.RawMessage(`{}`)}, true},
		{"an error", &jsonrpc.Response{ID: id("a\",\"method\\"), Error: &jsonrpc.Error{Code: -32602, Message: "x"}}, true},
		{"a request from the server", &jsonrpc.Request{ID: id(float64(1)), Method: "ping"}, false},
		{"a request with a string id", &jsonrpc.Request{ID: id(`x"y`), Method: "roots/list"}, false},
		{"a notification", &jsonrpc.Request{Method: "notifications/message", Params: json.RawMessage(`{}`)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := jsonrpc.EncodeMessage(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			if got := isResponse(b); got != tc.want {
				t.Fatalf("isResponse(%s) = %v", b, got)
			}
		})
	}
}
