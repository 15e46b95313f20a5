package main

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolNames lists the tools a client session is offered.
func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}
