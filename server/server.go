package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/telemetry"
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
	// Recall, when set, is what stats says about search instead of Recall
	// (hybrid recall names its model), and stats reports the memories
	// embedded.
	Recall string
	// LeaseRead, when set, gives the calls that only read (and forget,
	// which changes nothing where nothing is stored) the store of their
	// namespace without creating one: for a namespace with no store on disk
	// it returns one that answers as an empty store does. nil means Lease.
	LeaseRead Lease
	// Resolve picks a call's namespace; nil means memgate.DefaultNamespace,
	// or the namespace argument when NamespaceArg allows one.
	Resolve Resolve
	// Logger receives one line per call; nil discards them.
	Logger *slog.Logger
	// DisabledTools are left out of tools/list and refused as unknown. A name
	// outside ToolNames makes New fail.
	DisabledTools []string
	// View, when set, gives the namespaces that search and get read for a
	// call of principal p (nil: none authenticated) whose namespace is ns:
	// ns first, then the included ones p may use (--include-namespace). Every
	// memory a tool returns then carries its namespace, and search's receipt
	// lists the namespaces searched. nil: every call reads its namespace
	// alone, and memories carry none.
	View func(p *memgate.Principal, ns memgate.Namespace) []memgate.Namespace
	// NamespaceArg adds the optional namespace argument to every tool and the
	// memgate://namespace/{namespace}/memory/{id} resource template.
	NamespaceArg bool
	// WriteMode is WriteFull (the default, ""), WriteReadOnly or
	// WriteCandidate (the stores must then be Proposers).
	WriteMode string
	// MaxTextBytes bounds a memory's text (--max-memory-bytes); 0 means
	// memgate.DefaultMaxTextBytes. It must match the stores' own bound.
	MaxTextBytes int
	// MaxResponseBytes bounds the JSON of one tool's answer
	// (--max-response-bytes); 0 means memgate.DefaultMaxResponseBytes, or
	// memgate.MinResponseBytes(MaxTextBytes) when that is larger. It must be
	// at least memgate.MinResponseBytes(MaxTextBytes): a memory always fits.
	MaxResponseBytes int
	// AllowSecrets turns off the refusal of credentials in remember.
	AllowSecrets bool
	// MaxMemories and MaxNamespaceBytes are the stores' quotas
	// (--max-memories, --max-namespace-bytes; 0: none), which stats shows.
	MaxMemories       int64
	MaxNamespaceBytes int64
	// WriteScope, when set, is the scope a principal needs for remember and
	// forget; a call without it, or without a principal, fails with
	// forbidden. Leave it empty when the transport authenticates nobody.
	WriteScope string
	// Version is the server version announced at initialisation.
	Version string
	// Telemetry is what the server reports spans and metrics through
	// (telemetry.go); the zero value makes no span.
	Telemetry telemetry.Providers
	// Middleware wraps every request of every SDK server of s, outside
	// memgate's own middleware and inside the encoding of stdio answers,
	// so that it sees each tool's result as the tool made it (an audit).
	Middleware []mcp.Middleware
}

// Server is memgate's MCP server. It is safe for concurrent use, and one
// Server serves any number of sessions.
type Server struct {
	opts     Options
	mcp      *mcp.Server
	log      *slog.Logger
	resolve  Resolve
	maxText  int
	maxReply int
	enabled  map[string]bool
	handlers map[string]mcp.ToolHandler

	obs       *observer
	lease     Lease // Options.Lease, observed
	leaseOnly Lease // Options.LeaseRead, observed
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
	if opts.MaxResponseBytes < 0 || opts.MaxResponseBytes > 0 && opts.MaxResponseBytes < memgate.MinResponseBytes(opts.MaxTextBytes) {
		problems = append(problems, fmt.Errorf("server: Options.MaxResponseBytes must be at least %d, what the largest memory takes in an answer",
			memgate.MinResponseBytes(opts.MaxTextBytes)))
	}
	err := errors.Join(problems...)
	if err != nil {
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
	s.maxReply = opts.MaxResponseBytes
	if s.maxReply == 0 {
		s.maxReply = max(memgate.DefaultMaxResponseBytes, memgate.MinResponseBytes(s.maxText))
	}
	for _, name := range ToolNames {
		off := opts.WriteMode == WriteReadOnly && (name == ToolRemember || name == ToolForget) ||
			opts.WriteMode == WriteCandidate && name == ToolForget
		s.enabled[name] = !slices.Contains(opts.DisabledTools, name) && !off
	}

	if s.obs, err = newObserver(opts.Telemetry); err != nil {
		return nil, fmt.Errorf("server: telemetry: %w", err)
	}
	s.lease, s.leaseOnly = s.observeLease(opts.Lease), s.observeLease(opts.LeaseRead)

	s.mcp = s.NewMCP()
	// Outermost: it sees the answer every other middleware made.
	s.mcp.AddReceivingMiddleware(encodeOnce)
	return s, nil
}

// NewMCP returns a new SDK server with the tools, resources and prompts of
// s. Each transport handler that keeps sessions of its own gets its own: the
// HTTP gateway (package gateway) counts the sessions of its stateful
// handler on one, while the stateless handler's per-request sessions come
// and go on another.
func (s *Server) NewMCP() *mcp.Server {
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
	m.AddReceivingMiddleware(s.recovering)
	// Last, so that it is the outermost of this server's middleware: its
	// span and duration take in the recovery's answer to a panic.
	m.AddReceivingMiddleware(s.observe)
	for _, mw := range s.opts.Middleware {
		m.AddReceivingMiddleware(mw)
	}
	m.AddReceivingMiddleware(growing)
	return m
}

// growing grows the stack of the goroutine a request runs on to 32 KiB at
// once, while it is still shallow. The SDK runs every request on a new
// goroutine, which starts with a small stack (the runtime's adaptive start
// averages the stacks it scans, mostly idle ones); the SDK's dispatch and a
// tool's work then grew it two or three times, each growth copying a deeper
// stack (copystack was ~9% of a stdio server's CPU under S3's searches). One
// growth of a shallow stack costs less, and a search fits in 32 KiB.
func growing(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		growStack()
		return next(ctx, method, req)
	}
}

//go:noinline
func growStack() {
	var buf [16 << 10]byte
	useStack(buf[:])
}

//go:noinline
func useStack([]byte) {}

// recovering turns a panic in any handler of a request (a tool, a resource,
// a prompt, a listing, or middleware of ours) into an internal error of that
// request alone: the tool error envelope for tools/call, a JSON-RPC internal
// error for every other method. The SDK runs handlers on goroutines of its
// own, where nothing else would catch a panic and the process would die.
// This is the one place memgate recovers from a panic in a request.
func (s *Server) recovering(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		start := time.Now()
		defer func() {
			if r := recover(); r != nil {
				res, err = s.panicked(ctx, method, req, start, r)
			}
		}()
		return next(ctx, method, req)
	}
}

// panicked logs a request's panic, once and without content (the method,
// the tool or prompt name when it is one of ours, the panic's value cut
// short and where it happened), and returns what the client gets instead.
func (s *Server) panicked(ctx context.Context, method string, req mcp.Request, start time.Time, r any) (mcp.Result, error) {
	var name string
	switch req := req.(type) {
	case *mcp.CallToolRequest:
		if req.Params != nil && s.handlers[req.Params.Name] != nil {
			name = req.Params.Name
		}
	case *mcp.GetPromptRequest:
		if req.Params != nil && slices.Contains(promptNames, req.Params.Name) {
			name = req.Params.Name
		}
	}
	e := memgate.Internal("server."+method, fmt.Errorf("panic: %.200v (at %s)", r, panicSite()))
	s.logCall(ctx, method, name, "", start, e)
	if method == "tools/call" {
		return errorResult(e), nil
	}
	return nil, rpcError(e)
}

// panicSite names the function and line a panic was raised in, called
// from the deferred recovery: the first frame past the runtime's panic that
// is not the runtime's.
func panicSite() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	panicking := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			panicking = true
		case panicking && !strings.HasPrefix(f.Function, "runtime."):
			return fmt.Sprintf("%s:%d", f.Function, f.Line)
		}
		if !more {
			return "unknown"
		}
	}
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
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: name, Arguments: arguments}}
	res, err := s.recovering(func(ctx context.Context, _ string, req mcp.Request) (mcp.Result, error) {
		return h(ctx, req.(*mcp.CallToolRequest))
	})(ctx, "tools/call", req)
	if err != nil {
		return nil, err
	}
	return res.(*mcp.CallToolResult), nil
}

// Invoke runs tool name as Call does and returns its structured content,
// or the error its envelope carries as a *memgate.Error (an unknown tool is
// not_found, arguments that are no object invalid_argument). The admin API
// calls tools this way.
func (s *Server) Invoke(ctx context.Context, name string, arguments json.RawMessage) (json.RawMessage, error) {
	if !s.enabled[name] {
		return nil, &memgate.Error{Code: memgate.CodeNotFound, Message: "no such tool"}
	}
	res, err := s.Call(ctx, name, arguments)
	if err != nil {
		var rpc *jsonrpc.Error
		if errors.As(err, &rpc) {
			return nil, memgate.Invalid("arguments", "the arguments must be a JSON object")
		}
		return nil, err
	}
	b, ok := res.StructuredContent.(json.RawMessage)
	if !ok {
		var err error
		if b, err = json.Marshal(res.StructuredContent); err != nil {
			return nil, memgate.Internal("server.invoke", err)
		}
	}
	if !res.IsError {
		return b, nil
	}
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil || env.Error.Code == "" {
		return nil, memgate.Internal("server.invoke", errors.New("a tool error without its envelope"))
	}
	return nil, &memgate.Error{Code: env.Error.Code, Message: env.Error.Message, Details: env.Error.Details}
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
