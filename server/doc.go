// Package server is memgate's MCP surface: the seven memory tools with their
// schemas, argument validation and error envelope, the memory and stats
// resources, the three prompts, and the stdio runner, all on the official Go
// MCP SDK. The HTTP gateway (package gateway) serves the SDK servers that
// Server.NewMCP makes; package message holds the checks of JSON-RPC messages
// that both transports make before the SDK sees them.
//
// # Calls
//
// Every tool is registered with the SDK's raw Server.AddTool, not the typed
// mcp.AddTool: the typed path validates arguments itself and answers a bad
// one with plain text, without memgate's envelope or details.field. Here each
// handler decodes its raw JSON arguments strictly (unknown and repeated
// fields, wrong types, every bound of the input schema) and turns every
// failure into a tool result with isError set and
//
//	structuredContent = {"error": {"code", "message", "details"}}
//
// and the same JSON as text, so a model can read it and correct itself. The
// output schemas admit that envelope beside each success shape, because hosts
// built on the TypeScript SDK validate error results against them too.
//
// Each argument of a tool is declared once, as a param (params.go): its
// name, whether it is required, its schema, and how its value lands in the
// tool's typed input. The input schema, the names a call may use and the
// decoder all come from that list. The rules of a memory, with the schema
// that states each, are memgate's; remember applies them all at once with
// memgate.Write.Normalize.
//
// A call resolves its namespace (Options.Resolve, from the principal in the
// context and the optional namespace argument), leases that namespace's store
// for its whole duration (Options.Lease), and releases it when done.
//
// Protocol errors (-32602) are kept for what is not a tool's business: an
// unknown or disabled tool, arguments that are not a JSON object, params that
// do not decode, an unknown resource or prompt, bad prompt arguments. The SDK
// produces most of them itself; the tool handlers add the one about
// arguments, and the resource and prompt handlers their own (errors.go).
//
// # Stdio
//
// RunStdio serves the SDK's session over a connection of its own (an
// mcp.Transport and mcp.Connection, stdio.go): each line is parsed once, by
// the check that decides whether the SDK may see it, and handed over
// decoded; a line that is not a JSON-RPC message is answered (-32700 or
// -32600) instead of ending the session, and the end of stdin waits for the
// answers to the calls already read instead of cancelling them, which the
// connection knows by counting the responses it writes. A tool's result is
// encoded once, by the outermost middleware, and written as it is
// (encodeonce.go).
//
// # Privacy
//
// Logs hold tool names, namespaces, durations and error codes; never memory
// text, titles, queries, ids, arguments or tokens. Error messages returned to
// clients never echo a value either: they name the field at fault.
//
// This package imports memgate and the MCP SDK only. It must never import
// storage, tenants, auth or cmd: it declares the small interfaces it consumes
// (Store, Lease, Resolve) and cmd/memgate wires the implementations in.
package server
