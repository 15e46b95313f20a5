package driver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestToolResultPrefersStructuredContentThenJSONText(t *testing.T) {
	tests := []struct {
		name, res, want string
	}{
		{"structured content wins", `{"structuredContent":{"a":1},"content":[{"type":"text","text":"{\"b\":2}"}]}`, `{"a":1}`},
		{"JSON text when there is no structured content", `{"content":[{"type":"text","text":"{\"b\":2}"}]}`, `{"b":2}`},
		{"the whole result when the text is not JSON", `{"content":[{"type":"text","text":"done"}]}`, `{"content":[{"type":"text","text":"done"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ToolResult(json.RawMessage(tt.res))
			if err != nil || string(got) != tt.want {
				t.Fatalf("ToolResult = %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

func TestToolResultReportsTheErrorCodeOnly(t *testing.T) {
	_, err := ToolResult(json.RawMessage(`{"isError":true,"structuredContent":{"error":{"code":"too_many_stores","message":"secret text"}}}`))
	var te *ToolError
	if !errors.As(err, &te) || te.Code != "too_many_stores" {
		t.Fatalf("err = %v; want a ToolError with code too_many_stores", err)
	}
	if got := err.Error(); got != "tool error: too_many_stores" {
		t.Fatalf("message %q carries more than the code", got)
	}
}

func TestHistPercentiles(t *testing.T) {
	h := NewHist()
	if h.P(0.5) != 0 {
		t.Fatalf("empty histogram p50 = %v; want 0", h.P(0.5))
	}
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	o := NewHist()
	o.Record(time.Hour) // beyond the range: clamped, not lost
	h.Merge(o)
	if h.Count() != 1001 {
		t.Fatalf("count = %d; want 1001", h.Count())
	}
	if p := h.P(0.5); p < 495 || p > 505 {
		t.Fatalf("p50 = %v µs; want about 500", p)
	}
	if p := h.P(0.99); p < 985 || p > 995 {
		t.Fatalf("p99 = %v µs; want about 990", p)
	}
}

// testServer serves one echo tool over the SDK's streamable HTTP handler,
// stateful or stateless, with JSON or event-stream answers.
func testServer(t *testing.T, opts *mcp.StreamableHTTPOptions) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if string(req.Params.Arguments) == `{"fail":true}` {
				return &mcp.CallToolResult{IsError: true, StructuredContent: json.RawMessage(`{"error":{"code":"invalid_argument"}}`)}, nil
			}
			return &mcp.CallToolResult{StructuredContent: req.Params.Arguments,
				Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, opts))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestSessionCallsToolsOverEveryTransportShape(t *testing.T) {
	tests := []struct {
		name    string
		opts    *mcp.StreamableHTTPOptions
		version string
	}{
		{"stateful with JSON answers", &mcp.StreamableHTTPOptions{JSONResponse: true}, "2025-11-25"},
		{"stateful with event streams", &mcp.StreamableHTTPOptions{}, "2025-06-18"},
		{"stateless 2026-07-28", &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}, Stateless},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			url := testServer(t, tt.opts)
			s, err := Open(ctx, NewHTTPClient(1), url, tt.version)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			got, d, err := s.CallTool(ctx, "echo", map[string]any{"x": "y"})
			if err != nil || string(got) != `{"x":"y"}` || d <= 0 {
				t.Fatalf("CallTool = %s, %v, %v; want the arguments back", got, d, err)
			}
			if _, err := s.CallToolCheck(ctx, "echo", map[string]any{"x": "y"}); err != nil {
				t.Fatalf("CallToolCheck = %v", err)
			}
			var te *ToolError
			if _, err := s.CallToolCheck(ctx, "echo", map[string]any{"fail": true}); !errors.As(err, &te) || te.Code != "invalid_argument" {
				t.Fatalf("CallToolCheck of a failing call = %v; want invalid_argument", err)
			}
		})
	}
}
