package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
)

// Write modes (--write-mode).
const (
	WriteFull      = "full"      // every tool
	WriteReadOnly  = "read-only" // no remember, no forget
	WriteCandidate = "candidate" // remember stores candidates awaiting approval; no forget
)

// Tool names.
const (
	ToolRemember = "remember"
	ToolGet      = "get"
	ToolSearch   = "search"
	ToolList     = "list"
	ToolForget   = "forget"
	ToolStats    = "stats"
	ToolExport   = "export"
)

// ToolNames lists every tool, in the order tools/list shows them.
var ToolNames = []string{ToolRemember, ToolGet, ToolSearch, ToolList, ToolForget, ToolStats, ToolExport}

// Recall is what stats says about how search finds memories.
const Recall = "lexical (BM25) with metadata filters"

// Options configure a Server. Lease is required; everything else has a
// default.
type Options struct {
	// Lease gives a call the store of its namespace.
	Lease Lease
	// Resolve picks a call's namespace; nil means memgate.DefaultNamespace,
	// or the namespace argument when NamespaceArg allows one.
	Resolve Resolve
	// Logger receives one line per call; nil discards them.
	Logger *slog.Logger
	// DisabledTools are left out of tools/list and refused as unknown. A name
	// outside ToolNames makes New fail.
	DisabledTools []string
	// NamespaceArg adds the optional namespace argument to every tool and the
	// memgate://namespace/{namespace}/memory/{id} resource template.
	NamespaceArg bool
	// WriteMode is WriteFull (the default, ""), WriteReadOnly or
	// WriteCandidate (the stores must then be Proposers).
	WriteMode string
	// MaxTextBytes bounds a memory's text (--max-memory-bytes); 0 means
	// memgate.DefaultMaxTextBytes. It must match the stores' own bound.
	MaxTextBytes int
	// AllowSecrets turns off the refusal of credentials in remember.
	AllowSecrets bool
	// WriteScope, when set, is the scope a principal needs for remember and
	// forget; a call without it, or without a principal, fails with
	// forbidden. Leave it empty when the transport authenticates nobody.
	WriteScope string
	// Version is the server version announced at initialisation.
	Version string
}

// Server is memgate's MCP server. It is safe for concurrent use, and one
// Server serves any number of sessions.
type Server struct {
	opts     Options
	mcp      *mcp.Server
	log      *slog.Logger
	resolve  Resolve
	maxText  int
	enabled  map[string]bool
	handlers map[string]mcp.ToolHandler
}

// New checks opts and returns a server with the tools, resources and
// prompts they enable.
func New(opts Options) (*Server, error) {
	var problems []error
	if opts.Lease == nil {
		problems = append(problems, errors.New("server: Options.Lease is required"))
	}
	switch opts.WriteMode {
	case "":
		opts.WriteMode = WriteFull
	case WriteFull, WriteReadOnly, WriteCandidate:
	default:
		problems = append(problems, fmt.Errorf("server: unknown write mode %q; use full, read-only or candidate", opts.WriteMode))
	}
	for _, name := range opts.DisabledTools {
		if !slices.Contains(ToolNames, name) {
			problems = append(problems, fmt.Errorf("server: cannot disable unknown tool %q (tools: %s)",
				name, strings.Join(ToolNames, ", ")))
		}
	}
	if opts.MaxTextBytes < 0 {
		problems = append(problems, errors.New("server: Options.MaxTextBytes must not be negative"))
	}
	if err := errors.Join(problems...); err != nil {
		return nil, err
	}

	s := &Server{opts: opts, log: opts.Logger, resolve: opts.Resolve, maxText: opts.MaxTextBytes,
		enabled: map[string]bool{}, handlers: map[string]mcp.ToolHandler{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.resolve == nil {
		s.resolve = fixedNamespace
	}
	if s.maxText == 0 {
		s.maxText = memgate.DefaultMaxTextBytes
	}
	for _, name := range ToolNames {
		off := opts.WriteMode == WriteReadOnly && (name == ToolRemember || name == ToolForget) ||
			opts.WriteMode == WriteCandidate && name == ToolForget
		s.enabled[name] = !slices.Contains(opts.DisabledTools, name) && !off
	}

	s.mcp = s.newMCP()
	return s, nil
}

// newMCP returns an SDK server with the tools, resources and prompts of s.
// Each transport handler that keeps sessions of its own gets its own: the
// HTTP gateway counts the sessions of its stateful handler on one, while
// the stateless handler's per-request sessions come and go on another.
func (s *Server) newMCP() *mcp.Server {
	version := s.opts.Version
	if version == "" {
		version = "devel"
	}
	// The SDK's own logger stays silent: its lines carry resource URIs, which
	// hold memory ids.
	m := mcp.NewServer(&mcp.Implementation{Name: "memgate", Title: "memgate memory", Version: version},
		&mcp.ServerOptions{Instructions: s.instructions(), SetCacheable: privateCache})
	for _, t := range s.tools() {
		if !s.enabled[t.tool.Name] {
			continue
		}
		h, ok := s.handlers[t.tool.Name]
		if !ok {
			h = s.toolHandler(t)
			s.handlers[t.tool.Name] = h
		}
		m.AddTool(t.tool, h)
	}
	s.addResources(m)
	s.addPrompts(m)
	m.AddReceivingMiddleware(scrubErrors)
	return m
}

// MCP returns the SDK server, for transports other than stdio (the HTTP
// gateway mounts it with mcp.NewStreamableHTTPHandler).
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Call runs tool name with raw JSON arguments, exactly as tools/call would:
// the same validation, limits and error envelope. A principal, if any, comes
// from ctx. An unknown or disabled tool is a -32602 *jsonrpc.Error. This is
// how `memgate invoke` calls a tool without a client.
func (s *Server) Call(ctx context.Context, name string, arguments json.RawMessage) (*mcp.CallToolResult, error) {
	h, ok := s.handlers[name]
	if !ok {
		return nil, invalidParams("unknown tool")
	}
	return h(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: name, Arguments: arguments}})
}

// Enabled reports whether tool name is served.
func (s *Server) Enabled(name string) bool { return s.enabled[name] }

func (s *Server) instructions() string {
	var b strings.Builder
	b.WriteString("memgate is a long-term memory shared across sessions. ")
	if s.enabled[ToolSearch] {
		b.WriteString("Before answering about earlier work, decisions or preferences, search it. ")
	}
	if s.enabled[ToolRemember] {
		b.WriteString("When you learn something worth keeping (a decision, a fact, a preference, a fix), " +
			"remember it with a short title and a few tags. Never store secrets. ")
	}
	return strings.TrimSpace(b.String())
}

// privateCache marks every cacheable result that depends on the store as
// private to the caller: memories are one namespace's, never public.
func privateCache(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
	switch req.(type) {
	case *mcp.ListResourcesRequest, *mcp.ReadResourceRequest:
		c.CacheScope = "private"
		c.TTLMs = 0
	}
}

// Attribute keys of the log.
const (
	logMethod    = "method"
	logName      = "name"
	logNamespace = "namespace"
	logDuration  = "duration"
	logCode      = "code"
	logCause     = "cause"
)

// codeProtocol is the code logged for a call refused with a protocol error.
const codeProtocol = "invalid_params"

// logCall writes the one line of one call: its method and name, namespace,
// duration and outcome. Never arguments, results or ids. An internal error
// is logged here, with its cause, and nowhere else.
func (s *Server) logCall(ctx context.Context, method, name string, ns memgate.Namespace, start time.Time, err error) {
	level := slog.LevelDebug
	attrs := []slog.Attr{slog.String(logMethod, method), slog.String(logName, name)}
	if ns != "" {
		attrs = append(attrs, slog.String(logNamespace, string(ns)))
	}
	attrs = append(attrs, slog.Duration(logDuration, time.Since(start)))
	if err != nil {
		level = slog.LevelInfo
		var e *memgate.Error
		switch {
		case errors.As(err, &e) && e.Code != memgate.CodeInternal:
			attrs = append(attrs, slog.String(logCode, string(e.Code)))
		case errors.As(err, &e):
			level = slog.LevelError
			attrs = append(attrs, slog.String(logCode, string(memgate.CodeInternal)), slog.String(logCause, e.Error()))
		default:
			attrs = append(attrs, slog.String(logCode, codeProtocol))
		}
	}
	s.log.LogAttrs(ctx, level, "mcp call", attrs...)
}
