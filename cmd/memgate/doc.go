// Command memgate serves a long-term memory to AI agents over the Model
// Context Protocol, and works on its stores directly.
//
//	memgate serve                      stdio MCP server (the editor starts it)
//	memgate remember [TEXT]            store a memory (TEXT or standard input)
//	memgate get ID | forget ID         read or delete one memory
//	memgate search [QUERY] | list      find memories
//	memgate stats | export | import    statistics, JSON Lines out and in
//	memgate backup FILE                consistent copy of a live store
//	memgate candidates list|approve|reject   review --write-mode candidate
//	memgate rekey                      re-encrypt the stores under a new passphrase
//	memgate invoke TOOL                call a tool with JSON on standard input
//	memgate verify | version           check the installation; print the version
//	memgate healthcheck                probe a serve --transport http here (a container's HEALTHCHECK)
//
// Flags belong to their command, and follow it: `memgate get --help` lists
// what get takes. The configuration of the stores and of serve comes in
// groups of flags (config.go); a command takes the groups it uses, and
// each such flag also has an environment variable, MEMGATE_ and the flag in
// upper case with hyphens as underscores (--max-stores is
// MEMGATE_MAX_STORES). A flag on the command line beats its variable, which
// beats the default. A command's own flags and arguments (an id, a limit, a
// tag) never come from the environment, and the variables of a group a
// command does not take are not read: a store command runs in the
// environment of a server. Config holds the groups of one run; its
// Validate reports every problem at once, each naming its flag.
//
// main only wires the process to run(ctx, args, getenv, stdin, stdout,
// stderr), which tests call in-process. run reports a failure on stderr,
// one line starting "memgate: " (a tool failure as "memgate: CODE:
// MESSAGE"), and its error decides the exit status: 0 success, 1 failure,
// 2 a usage or configuration error. Nothing it prints, and nothing it logs,
// holds a memory's text, a query, an id or a token.
//
// This package wires storage, tenants and server together; nothing imports
// it.
package main
