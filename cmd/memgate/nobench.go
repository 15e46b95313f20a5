//go:build !memgatebench

package main

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/storage"
)

// benchFlags are serve's flags of the benchmark build (bench.go, built with
// -tags memgatebench); the product binary has none, and these methods do
// nothing.
type benchFlags struct{}

func (*benchFlags) addTools(*mcp.Server)           {}
func (*benchFlags) storeOptions(*storage.Options)  {}
func (*benchFlags) startProfiles() (func(), error) { return func() {}, nil }

func (*benchFlags) withTools(newMCP func() *mcp.Server) func() *mcp.Server { return newMCP }
