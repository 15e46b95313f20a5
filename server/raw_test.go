package server_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/server"
)

// rawSession speaks JSON-RPC to a server over the in-memory transport,
// message by message, so tests can send what no SDK client would and see
// exactly what comes back.
type rawSession struct {
	t    *testing.T
	conn mcp.Connection
	id   int64
}

// protocol is the revision raw sessions negotiate: the newest one with the
// initialize handshake, so results carry no per-request _meta.
const protocol = "2025-11-25"

// initialize is the handshake a raw session opens with.
const initialize = `{"protocolVersion":"` + protocol + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`

// newRawSession connects to srv and completes the handshake.
func newRawSession(t *testing.T, srv *server.Server) *rawSession {
	t.Helper()
	r := dialRaw(t, srv)
	if res := r.request("initialize", initialize); res.Error != nil {
		t.Fatalf("initialize: %v", res.Error)
	}
	r.notify("notifications/initialized", `{}`)
	return r
}

// dialRaw connects to srv without a handshake.
func dialRaw(t *testing.T, srv *server.Server) *rawSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	conn, err := ct.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawSession{t: t, conn: conn}
}

func (r *rawSession) notify(method, params string) {
	r.t.Helper()
	msg := &jsonrpc.Request{Method: method, Params: json.RawMessage(params)}
	if err := r.conn.Write(r.t.Context(), msg); err != nil {
		r.t.Fatal(err)
	}
}

// request sends one request with params as raw JSON ("" for none) and
// returns its response.
func (r *rawSession) request(method, params string) *jsonrpc.Response {
	r.t.Helper()
	r.id++
	id, err := jsonrpc.MakeID(float64(r.id))
	if err != nil {
		r.t.Fatal(err)
	}
	msg := &jsonrpc.Request{ID: id, Method: method}
	if params != "" {
		msg.Params = json.RawMessage(params)
	}
	if err := r.conn.Write(r.t.Context(), msg); err != nil {
		r.t.Fatal(err)
	}
	for {
		m, err := r.conn.Read(r.t.Context())
		if err != nil {
			r.t.Fatalf("%s: %v", method, err)
		}
		if res, ok := m.(*jsonrpc.Response); ok && res.ID == id {
			return res
		}
	}
}

// wire returns a message as it travels.
func wireOf(t *testing.T, m jsonrpc.Message) string {
	t.Helper()
	b, err := jsonrpc.EncodeMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func errorsAsWire(err error, w **jsonrpc.Error) bool {
	if err == nil {
		return false
	}
	return errors.As(err, w)
}
