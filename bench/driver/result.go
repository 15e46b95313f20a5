package driver

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ToolError is a tools/call result with isError set. Code is memgate's error
// code when the result carries one; the message is never kept, in case it
// quotes a memory.
type ToolError struct{ Code string }

func (e *ToolError) Error() string {
	if e.Code == "" {
		return "tool error"
	}
	return "tool error: " + e.Code
}

// RPCError is a JSON-RPC error response.
type RPCError struct{ Code int }

func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d", e.Code) }

// ToolResult returns what a tools/call result says: its structuredContent
// when there is one, else the text of its first text block when that is
// JSON, else the whole result. A result with isError is a *ToolError.
func ToolResult(res json.RawMessage) (json.RawMessage, error) {
	var r struct {
		IsError           bool            `json:"isError"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		Content           []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, errors.New("tools/call: the result is not an object")
	}
	body := res
	if len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" {
		body = r.StructuredContent
	} else {
		for _, c := range r.Content {
			if c.Type == "text" && json.Valid([]byte(c.Text)) {
				body = json.RawMessage(c.Text)
				break
			}
		}
	}
	if r.IsError {
		var env struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		json.Unmarshal(body, &env)
		return nil, &ToolError{Code: env.Error.Code}
	}
	return body, nil
}
