package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
)

// toolDef is one tool: its definition for tools/list, the arguments it
// takes, and parse, which validates a call's arguments and returns the work
// to do once the store is leased.
type toolDef struct {
	tool   *mcp.Tool
	write  bool // needs Options.WriteScope
	fields []string
	parse  func(a args) (op, error)
}

// op is a validated call, run against the leased store of namespace ns.
type op func(ctx context.Context, st Store, ns memgate.Namespace) (*mcp.CallToolResult, error)

func (s *Server) tools() []toolDef {
	readOnly := func(title string) *mcp.ToolAnnotations {
		return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}
	}
	def := func(name, title, desc string, ann *mcp.ToolAnnotations, in, out *jsonschema.Schema) *mcp.Tool {
		return &mcp.Tool{Name: name, Title: title, Description: desc, Annotations: ann, InputSchema: in, OutputSchema: out}
	}
	return []toolDef{
		{
			tool: def(ToolRemember, "Remember",
				"Store a memory: text worth keeping across sessions (a decision, a fact, a preference, a fix), "+
					"with an optional title, tags and metadata. Give the id of an existing memory to replace it, "+
					"and if_version (the version you read) to be sure nobody changed it meanwhile. "+
					"Returns the stored memory and whether it was created. "+
					"Text holding credentials (keys, tokens, passwords) is refused.",
				&mcp.ToolAnnotations{Title: "Remember", DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
				s.rememberInput(), rememberOutput()),
			write: true, fields: []string{"text", "id", "title", "tags", "metadata", "if_version", "allow_empty"},
			parse: s.parseRemember,
		},
		{
			tool: def(ToolGet, "Get memory", "Read one memory by its id.",
				readOnly("Get memory"), s.getInput(), getOutput()),
			fields: []string{"id"}, parse: s.parseGet,
		},
		{
			tool: def(ToolSearch, "Search memories",
				"Find memories by words (BM25 ranking over titles and texts), narrowed by tags and a metadata "+
					"filter; needs query, tags or filter. Each hit is a memory with its score (the best hit "+
					"scores 1.0). budget caps the text returned, in tokens.",
				readOnly("Search memories"), s.searchInput(), searchOutput()),
			fields: []string{"query", "tags", "tags_mode", "filter", "limit", "budget"}, parse: s.parseSearch,
		},
		{
			tool: def(ToolList, "List memories",
				"List memories page by page, most recently changed first unless order says otherwise, "+
					"optionally only those with given tags or metadata. Pass next_cursor back as cursor for "+
					"the next page.",
				readOnly("List memories"), s.listInput(), listOutput()),
			fields: []string{"cursor", "limit", "tags", "filter", "order"}, parse: s.parseList,
		},
		{
			tool: def(ToolForget, "Forget memory",
				"Delete one memory by its id. Pass if_version to delete it only if it is still the version you read.",
				&mcp.ToolAnnotations{Title: "Forget memory", DestructiveHint: ptr(true), IdempotentHint: true,
					OpenWorldHint: ptr(false)},
				s.forgetInput(), forgetOutput()),
			write: true, fields: []string{"id", "if_version"}, parse: s.parseForget,
		},
		{
			tool: def(ToolStats, "Memory statistics",
				"How many memories this namespace holds and their size, how search recalls them, the write "+
					"mode and the limits on arguments.",
				readOnly("Memory statistics"), s.statsInput(), statsOutput()),
			parse: s.parseStats,
		},
		{
			tool: def(ToolExport, "Export memories",
				"Export memories as JSON Lines, oldest write first, one page per call: the first page starts "+
					"with a header line, then one memory per line. The text content holds the lines; the "+
					"structured result holds their count and next_cursor, to pass back as cursor.",
				readOnly("Export memories"), s.exportInput(), exportOutput()),
			fields: []string{"cursor", "limit"}, parse: s.parseExport,
		},
	}
}

// toolHandler wraps a tool in what every call shares: strict decoding,
// namespace resolution, the write scope, the store lease, the error
// envelope and the log line. A panic is the recovery's (Server.recovering).
func (s *Server) toolHandler(t toolDef) mcp.ToolHandler {
	name := t.tool.Name
	fields := t.fields
	if s.opts.NamespaceArg {
		fields = append(fields[:len(fields):len(fields)], "namespace")
	}
	return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, rpcErr error) {
		start := time.Now()
		var (
			ns  memgate.Namespace
			err error
		)
		defer func() {
			if res != nil || rpcErr != nil { // neither: a panic, which the recovery logs
				s.logCall(ctx, "tools/call", name, ns, start, err)
			}
		}()
		ns, res, err = s.call(ctx, t, fields, req)
		if protocol, ok := err.(*jsonrpc.Error); ok {
			return nil, protocol
		}
		if err != nil {
			e := memgate.AsError("server."+name, err)
			err = e
			return errorResult(e), nil
		}
		return res, nil
	}
}

// call runs one tool call: its arguments, the caller's scope, its namespace,
// the lease of that namespace's store, and the work. A bare *jsonrpc.Error
// (arguments that are not an object) is a protocol error; every other error
// becomes the error envelope.
func (s *Server) call(ctx context.Context, t toolDef, fields []string, req *mcp.CallToolRequest) (memgate.Namespace, *mcp.CallToolResult, error) {
	run, nsArg, err := s.prepare(t, fields, req)
	if err != nil {
		return "", nil, err
	}
	p := principalOf(ctx, req.Extra)
	if err := s.checkWrite(t, p); err != nil {
		return "", nil, err
	}
	ns, err := s.resolve(p, nsArg)
	if err != nil {
		return "", nil, err
	}
	st, release, err := s.leaseFor(t)(ctx, ns)
	if err != nil {
		return ns, nil, err
	}
	defer release()
	res, err := run(ctx, st, ns)
	return ns, res, err
}

// prepare decodes and validates a call's arguments.
func (s *Server) prepare(t toolDef, fields []string, req *mcp.CallToolRequest) (op, string, error) {
	var raw []byte
	if req.Params != nil {
		raw = req.Params.Arguments
	}
	a, err := decodeArgs(raw, fields)
	if err != nil {
		return nil, "", err
	}
	var nsArg string
	if s.opts.NamespaceArg {
		v, ok, err := a.str("namespace")
		if err != nil {
			return nil, "", err
		}
		if ok {
			if _, err := memgate.ParseNamespace("namespace", v); err != nil {
				return nil, "", err
			}
			nsArg = v
		}
	}
	run, err := t.parse(a)
	return run, nsArg, err
}

var errNoWriteScope = &memgate.Error{Code: memgate.CodeForbidden,
	Message: "this call changes memories, and the caller's token lacks the write scope"}

func (s *Server) checkWrite(t toolDef, p *memgate.Principal) error {
	if !t.write || s.opts.WriteScope == "" {
		return nil
	}
	if p == nil || !p.HasScope(s.opts.WriteScope) {
		return errNoWriteScope
	}
	return nil
}

// Results.

type rememberResult struct {
	Memory  memgate.Memory `json:"memory"`
	Created bool           `json:"created"`
	// Candidate is set in candidate mode: the memory waits for a person's
	// approval and is not yet seen by get or search.
	Candidate bool `json:"candidate,omitempty"`
}

type getResult struct {
	Memory memgate.Memory `json:"memory"`
}

type forgetResult struct {
	ID        string `json:"id"`
	Forgotten bool   `json:"forgotten"`
}

type exportResult struct {
	Count      int    `json:"count"`
	NextCursor string `json:"next_cursor,omitempty"`
}

type statsResult struct {
	Namespace  string      `json:"namespace"`
	Count      int64       `json:"count"`
	Bytes      int64       `json:"bytes"`
	StoreBytes int64       `json:"store_bytes"`
	Recall     string      `json:"recall"`
	WriteMode  string      `json:"write_mode"`
	Limits     statsLimits `json:"limits"`
}

// statsLimits are the bounds a client can plan with. limitNames lists its
// JSON names, in order, for the output schema.
type statsLimits struct {
	MaxMemoryBytes      int `json:"max_memory_bytes"`
	MaxIDBytes          int `json:"max_id_bytes"`
	MaxTitleChars       int `json:"max_title_chars"`
	MaxTags             int `json:"max_tags"`
	MaxTagChars         int `json:"max_tag_chars"`
	MaxMetadataKeys     int `json:"max_metadata_keys"`
	MaxMetadataKeyChars int `json:"max_metadata_key_chars"`
	MaxMetadataBytes    int `json:"max_metadata_bytes"`
	MaxSearchLimit      int `json:"max_search_limit"`
	MaxBudget           int `json:"max_budget"`
	MaxListLimit        int `json:"max_list_limit"`
	MaxExportLimit      int `json:"max_export_limit"`
}

var limitNames = []string{"max_memory_bytes", "max_id_bytes", "max_title_chars", "max_tags", "max_tag_chars",
	"max_metadata_keys", "max_metadata_key_chars", "max_metadata_bytes", "max_search_limit", "max_budget",
	"max_list_limit", "max_export_limit"}

// wireMemory makes sure tags and metadata are present ([] and {}) even when
// a store leaves them nil.
func wireMemory(m memgate.Memory) memgate.Memory {
	if m.Tags == nil {
		m.Tags = []string{}
	}
	if m.Metadata == nil {
		m.Metadata = map[string]any{}
	}
	return m
}

// Argument rules shared by several tools.

func required(name string) error { return memgate.Invalid(name, "%s is required", name) }

func (s *Server) textTooLarge() error {
	return &memgate.Error{Code: memgate.CodeTooLarge,
		Message: fmt.Sprintf("text is larger than the limit of %d bytes; split it into several memories", s.maxText),
		Details: map[string]any{"field": "text", "limit": s.maxText}}
}

func requiredID(a args) (string, error) {
	id, ok, err := a.str("id")
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "", required("id")
	}
	return id, memgate.ValidateID("id", id)
}

func optionalTags(a args) ([]string, error) {
	tags, _, err := a.strings("tags", memgate.MaxTags)
	if err != nil {
		return nil, err
	}
	return memgate.NormalizeTags("tags", tags)
}

func enum(a args, name string, values ...string) (string, error) {
	v, ok, err := a.str(name)
	if err != nil || !ok {
		return "", err
	}
	for _, x := range values {
		if v == x {
			return v, nil
		}
	}
	return "", memgate.Invalid(name, "%s must be one of: %s", name, strings.Join(values, ", "))
}

func cursor(a args) (string, error) {
	c, _, err := a.str("cursor")
	if err == nil && len(c) > maxCursorBytes {
		err = memgate.Invalid("cursor", "cursor is not one this listing returned; start again without it")
	}
	return c, err
}

func intArg(a args, name string, min, max int64) (int, error) {
	n, _, err := a.integer(name, min, max)
	return int(n), err
}

// The tools.

func (s *Server) parseRemember(a args) (op, error) {
	var w memgate.Write
	text, ok, err := a.str("text")
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, required("text")
	case len(text) > s.maxText:
		return nil, s.textTooLarge()
	}
	w.Text = text
	if id, ok, err := a.str("id"); err != nil {
		return nil, err
	} else if ok {
		if err := memgate.ValidateID("id", id); err != nil {
			return nil, err
		}
		w.ID = id
	}
	if title, ok, err := a.str("title"); err != nil {
		return nil, err
	} else if ok {
		if err := memgate.ValidateTitle("title", title); err != nil {
			return nil, err
		}
		w.Title = title
	}
	if w.Tags, err = optionalTags(a); err != nil {
		return nil, err
	}
	if w.Metadata, _, err = a.flatObject("metadata"); err != nil {
		return nil, err
	}
	if v, ok, err := a.integer("if_version", 0, maxVersion); err != nil {
		return nil, err
	} else if ok {
		w.IfVersion = &v
	}
	if w.AllowEmpty, _, err = a.boolean("allow_empty"); err != nil {
		return nil, err
	}
	if w, err = w.Normalize(s.maxText); err != nil {
		return nil, err
	}
	if !s.opts.AllowSecrets {
		if err := refuseSecrets(w); err != nil {
			return nil, err
		}
	}
	if s.opts.WriteMode == WriteCandidate {
		return func(ctx context.Context, st Store, _ memgate.Namespace) (*mcp.CallToolResult, error) {
			p, ok := st.(Proposer)
			if !ok {
				return nil, memgate.Internal("server.remember", errors.New("store keeps no candidates"))
			}
			m, err := p.Propose(ctx, w)
			if err != nil {
				return nil, err
			}
			return successResult(rememberResult{Memory: wireMemory(m), Candidate: true}), nil
		}, nil
	}
	return func(ctx context.Context, st Store, _ memgate.Namespace) (*mcp.CallToolResult, error) {
		m, created, err := st.Put(ctx, w)
		if err != nil {
			return nil, err
		}
		return successResult(rememberResult{Memory: wireMemory(m), Created: created}), nil
	}, nil
}

// secretError says which field holds which kind of secret, never the value.
func secretError(field, kind string) error {
	return &memgate.Error{Code: memgate.CodeSecretDetected,
		Message: fmt.Sprintf("%s holds what looks like a credential (%s); leave it out, or note where it is kept "+
			"instead of its value", field, strings.ReplaceAll(kind, "_", " ")),
		Details: map[string]any{"field": field, "kind": kind}}
}

// refuseSecrets looks for credentials in everything a write stores.
func refuseSecrets(w memgate.Write) error {
	for _, f := range []struct{ field, value string }{{"text", w.Text}, {"title", w.Title}, {"id", w.ID}} {
		if kind := detectSecret(f.value); kind != "" {
			return secretError(f.field, kind)
		}
	}
	for _, t := range w.Tags {
		if kind := detectSecret(t); kind != "" {
			return secretError("tags", kind)
		}
	}
	for k, v := range w.Metadata {
		if kind := detectSecret(k); kind != "" {
			return secretError("metadata", kind)
		}
		if v, ok := v.(string); ok {
			if kind := detectSecret(v); kind != "" {
				return secretError("metadata", kind)
			}
		}
	}
	return nil
}

func (s *Server) parseGet(a args) (op, error) {
	id, err := requiredID(a)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, st Store, _ memgate.Namespace) (*mcp.CallToolResult, error) {
		m, err := st.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		return successResult(getResult{Memory: wireMemory(m)}), nil
	}, nil
}

func (s *Server) parseSearch(a args) (op, error) {
	var (
		q   memgate.Query
		err error
	)
	if q.Text, _, err = a.str("query"); err != nil {
		return nil, err
	}
	if len(q.Text) > s.maxText {
		return nil, memgate.Invalid("query", "query must be at most %d bytes", s.maxText)
	}
	if q.Tags, err = optionalTags(a); err != nil {
		return nil, err
	}
	if q.TagsMode, err = enum(a, "tags_mode", memgate.TagsAll, memgate.TagsAny); err != nil {
		return nil, err
	}
	if q.Filter, _, err = a.flatObject("filter"); err != nil {
		return nil, err
	}
	if q.Limit, err = intArg(a, "limit", 1, memgate.MaxSearchLimit); err != nil {
		return nil, err
	}
	if q.Budget, err = intArg(a, "budget", 1, memgate.MaxBudget); err != nil {
		return nil, err
	}
	if strings.TrimSpace(q.Text) == "" && len(q.Tags) == 0 && len(q.Filter) == 0 {
		return nil, memgate.Invalid("query", "search needs a query, tags or a filter")
	}
	return func(ctx context.Context, st Store, _ memgate.Namespace) (*mcp.CallToolResult, error) {
		r, err := st.Search(ctx, q)
		if err != nil {
			return nil, err
		}
		hits := make([]memgate.Hit, len(r.Hits))
		for i, h := range r.Hits {
			h.Memory = wireMemory(h.Memory)
			hits[i] = h
		}
		r.Hits = hits
		return successResult(fitHits(r, s.itemBudget())), nil
	}, nil
}

func (s *Server) parseList(a args) (op, error) {
	var (
		q   memgate.ListQuery
		err error
	)
	if q.Cursor, err = cursor(a); err != nil {
		return nil, err
	}
	if q.Limit, err = intArg(a, "limit", 1, memgate.MaxListLimit); err != nil {
		return nil, err
	}
	if q.Tags, err = optionalTags(a); err != nil {
		return nil, err
	}
	if q.Filter, _, err = a.flatObject("filter"); err != nil {
		return nil, err
	}
	if q.Order, err = enum(a, "order", memgate.OrderUpdatedDesc, memgate.OrderCreatedAsc, memgate.OrderCreatedDesc); err != nil {
		return nil, err
	}
	return func(ctx context.Context, st Store, _ memgate.Namespace) (*mcp.CallToolResult, error) {
		// The page ends early when the next memory would pass the bound
		// on the answer; each memory is encoded once, as it is taken.
		it := newItems(s.itemBudget())
		q := q
		q.Take = func(i int, m memgate.Memory) bool { return it.take(i, wireMemory(m)) }
		p, err := st.List(ctx, q)
		if err != nil {
			return nil, err
		}
		if len(it.enc) != len(p.Memories) {
			return nil, memgate.Internal("server.list", errors.New("the page and the memories taken differ"))
		}
		return pageResult(it, p.NextCursor), nil
	}, nil
}

func (s *Server) parseForget(a args) (op, error) {
	id, err := requiredID(a)
	if err != nil {
		return nil, err
	}
	var ifVersion *int64
	if v, ok, err := a.integer("if_version", 1, maxVersion); err != nil {
		return nil, err
	} else if ok {
		ifVersion = &v
	}
	return func(ctx context.Context, st Store, _ memgate.Namespace) (*mcp.CallToolResult, error) {
		if err := st.Delete(ctx, id, ifVersion); err != nil {
			return nil, err
		}
		return successResult(forgetResult{ID: id, Forgotten: true}), nil
	}, nil
}

func (s *Server) parseStats(args) (op, error) {
	return func(ctx context.Context, st Store, ns memgate.Namespace) (*mcp.CallToolResult, error) {
		r, err := s.stats(ctx, st, ns)
		if err != nil {
			return nil, err
		}
		return successResult(r), nil
	}, nil
}

func (s *Server) stats(ctx context.Context, st Store, ns memgate.Namespace) (statsResult, error) {
	c, err := st.Stats(ctx)
	if err != nil {
		return statsResult{}, err
	}
	return statsResult{
		Namespace: string(ns), Count: c.Count, Bytes: c.Bytes, StoreBytes: c.StoreBytes,
		Recall: Recall, WriteMode: s.opts.WriteMode,
		Limits: statsLimits{
			MaxMemoryBytes: s.maxText, MaxIDBytes: memgate.MaxIDBytes, MaxTitleChars: memgate.MaxTitleChars,
			MaxTags: memgate.MaxTags, MaxTagChars: memgate.MaxTagChars,
			MaxMetadataKeys: memgate.MaxMetadataKeys, MaxMetadataKeyChars: memgate.MaxMetadataKeyChars,
			MaxMetadataBytes: memgate.MaxMetadataBytes, MaxSearchLimit: memgate.MaxSearchLimit,
			MaxBudget: memgate.MaxBudget, MaxListLimit: memgate.MaxListLimit, MaxExportLimit: MaxExportLimit,
		},
	}, nil
}

func (s *Server) parseExport(a args) (op, error) {
	c, err := cursor(a)
	if err != nil {
		return nil, err
	}
	limit, err := intArg(a, "limit", 1, MaxExportLimit)
	if err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = DefaultExportLimit
	}
	return func(ctx context.Context, st Store, _ memgate.Namespace) (*mcp.CallToolResult, error) {
		// The lines travel once, as one JSON string: the page ends early
		// when the next line would pass the bound on the answer.
		var buf bytes.Buffer
		left, header, taken := s.itemBudget(), c == "", 0
		n, next, err := st.ExportLines(ctx, c, limit, func(line []byte) bool {
			cost := escapedLen(line)
			switch {
			case header: // the first page's header line comes first
				header = false
			case taken > 0 && cost > left:
				return false
			default:
				taken++
			}
			left -= cost
			buf.Write(line)
			return true
		})
		if err != nil {
			return nil, err
		}
		b := marshal(exportResult{Count: n, NextCursor: next})
		return &mcp.CallToolResult{
			StructuredContent: json.RawMessage(b),
			// The lines first; then the structured result as text, for
			// clients that read only text content and still need the cursor.
			Content: []mcp.Content{&mcp.TextContent{Text: buf.String()}, &mcp.TextContent{Text: string(b)}},
		}, nil
	}, nil
}
