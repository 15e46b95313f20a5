// Package driver speaks MCP to any server the benchmarks measure, the same
// way for each: raw JSON-RPC lines over a child process's stdin and stdout,
// or POSTs over streamable HTTP, with a session (Mcp-Session-Id, revisions up
// to 2025-11-25) or without one (2026-07-28). It times every call from the
// write of its request to the read of its response (over stdio, the latency
// a call returns includes the client's decoding of the response line, and
// Stdio.LastRead stops at its read), records latencies in HDR histograms,
// and reads a server's CPU time and peak memory from /proc.
//
// It knows nothing of memgate's tools: callers build the arguments and read
// the results. It must never import the storage, server or tenants packages.
package driver
