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

// toolDef is one tool: its definition for tools/list, whose input schema
// comes from the tool's params, the names of its arguments, decode, which
// turns a call's arguments into the tool's typed input and the namespace
// argument, and run, which checks what lies across arguments and returns
// the work to do once the store is leased. newTool makes one.
type toolDef struct {
	tool   *mcp.Tool
	write  bool     // needs Options.WriteScope
	names  []string // every argument, the namespace argument included when there is one
	decode func(a args) (in any, ns string, err error)
	run    func(in any) (op, error)
}

// op is a validated call, run against the leased store of namespace ns.
type op func(ctx context.Context, st Store, ns memgate.Namespace) (*mcp.CallToolResult, error)

// newTool returns tool t, which takes the arguments ps (and the namespace
// argument, when the server takes one) and does run with them.
func newTool[T any](s *Server, t *mcp.Tool, write bool, ps params[T], run func(in T) (op, error)) toolDef {
	nsParams := s.namespaceParams()
	props, required := ps.props()
	nsProps, _ := nsParams.props()
	t.InputSchema = input(required, append(props, nsProps...)...)
	return toolDef{
		tool:  t,
		write: write,
		names: append(ps.names(), nsParams.names()...),
		decode: func(a args) (any, string, error) {
			ns, err := nsParams.decode(a)
			if err != nil {
				return nil, "", err
			}
			in, err := ps.decode(a)
			if err != nil {
				return nil, "", err
			}
			return in, ns, nil
		},
		run: func(in any) (op, error) { return run(in.(T)) },
	}
}

func (s *Server) tools() []toolDef {
	readOnly := func(title string) *mcp.ToolAnnotations {
		return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}
	}
	def := func(name, title, desc string, ann *mcp.ToolAnnotations, out *jsonschema.Schema) *mcp.Tool {
		return &mcp.Tool{Name: name, Title: title, Description: desc, Annotations: ann, OutputSchema: out}
	}
	return []toolDef{
		newTool(s, def(ToolRemember, "Remember",
			"Store a memory: text worth keeping across sessions (a decision, a fact, a preference, a fix), "+
				"with an optional title, tags and metadata. Give the id of an existing memory to replace it, "+
				"and if_version (the version you read) to be sure nobody changed it meanwhile. "+
				"Returns the stored memory and whether it was created. "+
				"Text holding credentials (keys, tokens, passwords) is refused.",
			&mcp.ToolAnnotations{Title: "Remember", DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
			rememberOutput()), true, s.rememberParams(), s.remember),
		newTool(s, def(ToolGet, "Get memory", "Read one memory by its id.",
			readOnly("Get memory"), getOutput()), false, getParams(), s.get),
		newTool(s, def(ToolSearch, "Search memories",
			"Find memories by words (BM25 ranking over titles and texts), narrowed by tags and a metadata "+
				"filter; needs query, tags or filter. Each hit is a memory with its score (the best hit "+
				"scores 1.0). budget caps the text returned, in tokens.",
			readOnly("Search memories"), searchOutput()), false, s.searchParams(), s.search),
		newTool(s, def(ToolList, "List memories",
			"List memories page by page, most recently changed first unless order says otherwise, "+
				"optionally only those with given tags or metadata. Pass next_cursor back as cursor for "+
				"the next page.",
			readOnly("List memories"), listOutput()), false, listParams(), s.list),
		newTool(s, def(ToolForget, "Forget memory",
			"Delete one memory by its id. Pass if_version to delete it only if it is still the version you read.",
			&mcp.ToolAnnotations{Title: "Forget memory", DestructiveHint: ptr(true), IdempotentHint: true,
				OpenWorldHint: ptr(false)},
			forgetOutput()), true, forgetParams(), s.forget),
		newTool(s, def(ToolStats, "Memory statistics",
			"How many memories this namespace holds and their size, how search recalls them, the write "+
				"mode and the limits on arguments.",
			readOnly("Memory statistics"), statsOutput(s.opts.Recall != "")), false, params[struct{}]{}, s.statsTool),
		newTool(s, def(ToolExport, "Export memories",
			"Export memories as JSON Lines, oldest write first, one page per call: the first page starts "+
				"with a header line, then one memory per line. The text content holds the lines; the "+
				"structured result holds their count and next_cursor, to pass back as cursor.",
			readOnly("Export memories"), exportOutput()), false, exportParams(), s.export),
	}
}

// toolHandler wraps a tool in what every call shares: strict decoding,
// namespace resolution, the write scope, the store lease, the error
// envelope and the log line. A panic is the recovery's (Server.recovering).
func (s *Server) toolHandler(t toolDef) mcp.ToolHandler {
	name := t.tool.Name
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
		ns, res, err = s.call(ctx, t, req)
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
func (s *Server) call(ctx context.Context, t toolDef, req *mcp.CallToolRequest) (memgate.Namespace, *mcp.CallToolResult, error) {
	run, nsArg, err := s.prepare(t, req)
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
	res, err := run(s.withView(ctx, t, p, ns), st, ns)
	return ns, res, err
}

// prepare decodes and validates a call's arguments, and returns the work
// and the namespace argument ("" when there is none).
func (s *Server) prepare(t toolDef, req *mcp.CallToolRequest) (op, string, error) {
	var raw []byte
	if req.Params != nil {
		raw = req.Params.Arguments
	}
	a, err := decodeArgs(raw, t.names)
	if err != nil {
		return nil, "", err
	}
	in, ns, err := t.decode(a)
	if err != nil {
		return nil, "", err
	}
	run, err := t.run(in)
	return run, ns, err
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
	// Deduplicated is set when a live memory had the same text: it is
	// Memory, and nothing was stored.
	Deduplicated bool `json:"deduplicated,omitempty"`
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
	Embedded   *int64      `json:"embedded,omitempty"` // memories embedded, with hybrid recall on
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
	// The namespace's quotas; 0 is none.
	MaxMemories       int64 `json:"max_memories"`
	MaxNamespaceBytes int64 `json:"max_namespace_bytes"`
}

var limitNames = []string{"max_memory_bytes", "max_id_bytes", "max_title_chars", "max_tags", "max_tag_chars",
	"max_metadata_keys", "max_metadata_key_chars", "max_metadata_bytes", "max_search_limit", "max_budget",
	"max_list_limit", "max_export_limit", "max_memories", "max_namespace_bytes"}

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

// The tools: each one's params, and the work they lead to.

func (s *Server) rememberParams() params[memgate.Write] {
	type write = memgate.Write
	return params[write]{
		required(str("text", schemaOf(memgate.TextSchema(s.maxText),
			fmt.Sprintf("What to remember, kept byte for byte: at most %d bytes of UTF-8. "+
				"Split longer text into several memories.", s.maxText)),
			func(w *write, v string) error { w.Text = v; return nil })),
		writeStr("id", schemaOf(memgate.IDSchema(), "Id of the memory: 1–256 bytes, no control characters. "+
			"Leave it out to create a new memory with a fresh id; give an existing id to replace that memory."),
			memgate.ValidateID, func(w *write, v string) { w.ID = v }),
		writeStr("title", schemaOf(memgate.TitleSchema(), "Short title, 1–256 characters."),
			memgate.ValidateTitle, func(w *write, v string) { w.Title = v }),
		list("tags", schemaOf(memgate.TagsSchema(),
			"Up to 32 tags, each 1–64 letters, digits or _ - . : /. Duplicates are dropped."),
			func(w *write, tags []string) error { w.Tags = tags; return nil }),
		flatObject("metadata", schemaOf(memgate.MetadataSchema(), "Up to 32 keys ([A-Za-z0-9_.-]{1,64}) "+
			"with string, number, boolean or null values; at most 8192 bytes as JSON."),
			func(w *write, md map[string]any) error { w.Metadata = md; return nil }),
		integer("if_version", "Write only if the memory's current version is this one (0: only if the id is "+
			"not taken yet); otherwise fail with version_conflict.", 0, maxVersion,
			func(w *write, v int64) { w.IfVersion = &v }),
		boolean("allow_empty", "Store empty or white-space-only text instead of refusing it.",
			func(w *write, b bool) { w.AllowEmpty = b }),
		when("expires_at", "Forget the memory at this instant (RFC 3339, later than now); not with ttl_seconds.",
			func(w *write, t time.Time) { w.ExpiresAt = &t }),
		integer("ttl_seconds", "Forget the memory this many seconds after the write; not with expires_at.",
			1, memgate.MaxTTLSeconds, func(w *write, n int64) { w.TTL = time.Duration(n) * time.Second }),
		source("source", "Where the memory came from: kind (a-z and _, e.g. conversation, file, url, tool, "+
			"person), reference (1–1024 characters), actor (1–256 characters), observed_at (RFC 3339, optional).",
			func(w *write, src memgate.Source) { w.Source = &src }),
		boolean("allow_duplicate", "Store the memory even when a live memory already has the same text "+
			"(compared ignoring case and runs of white space); otherwise, without id and if_version, that "+
			"memory is returned with deduplicated: true.",
			func(w *write, b bool) { w.AllowDuplicate = b }),
	}
}

// writeStr declares an optional string of a memgate.Write, which reads ""
// as none. An empty string given as the argument is judged at once by rule
// (which refuses it); any other value is judged with the rest of the write,
// by Write.Normalize, with the same rule.
func writeStr(name string, schema *jsonschema.Schema, rule func(field, s string) error,
	set func(w *memgate.Write, s string)) param[memgate.Write] {
	return str(name, schema, func(w *memgate.Write, v string) error {
		if v == "" {
			return rule(name, v)
		}
		set(w, v)
		return nil
	})
}

// remember validates the write (Write.Normalize: every rule of a memory,
// once) and looks for secrets in it.
func (s *Server) remember(w memgate.Write) (op, error) {
	w, err := w.Normalize(s.maxText)
	if err != nil {
		return nil, err
	}
	if !s.opts.AllowSecrets {
		if err := refuseSecrets(w); err != nil {
			return nil, err
		}
	}
	if s.opts.WriteMode == WriteCandidate {
		return func(ctx context.Context, st Store, ns memgate.Namespace) (*mcp.CallToolResult, error) {
			p, ok := st.(Proposer)
			if !ok {
				return nil, memgate.Internal("server.remember", errors.New("store keeps no candidates"))
			}
			m, err := p.Propose(ctx, w)
			if err != nil {
				return nil, err
			}
			return successResult(rememberResult{Memory: s.inView(wireMemory(m), ns), Candidate: true}), nil
		}, nil
	}
	return func(ctx context.Context, st Store, ns memgate.Namespace) (*mcp.CallToolResult, error) {
		done, err := st.Write(ctx, w)
		if err != nil {
			return nil, err
		}
		return successResult(rememberResult{Memory: s.inView(wireMemory(done.Memory), ns), Created: done.Created,
			Deduplicated: done.Deduplicated}), nil
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
	if src := w.Source; src != nil {
		for _, f := range []struct{ field, value string }{{"source.reference", src.Reference}, {"source.actor", src.Actor}} {
			if kind := detectSecret(f.value); kind != "" {
				return secretError(f.field, kind)
			}
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

type getInput struct{ id string }

func getParams() params[getInput] {
	return params[getInput]{idParam("Id of the memory.", func(in *getInput) *string { return &in.id })}
}

func (s *Server) get(in getInput) (op, error) {
	id := in.id
	return func(ctx context.Context, st Store, _ memgate.Namespace) (*mcp.CallToolResult, error) {
		var (
			m   memgate.Memory
			err error
		)
		if view := viewOf(ctx); view != nil {
			m, err = s.getView(ctx, st, view, id)
		} else {
			m, err = st.Get(ctx, id)
		}
		if err != nil {
			return nil, err
		}
		return successResult(getResult{Memory: wireMemory(m)}), nil
	}, nil
}

func (s *Server) searchParams() params[memgate.Query] {
	type query = memgate.Query
	return params[query]{
		str("query", &jsonschema.Schema{Type: "string", MaxLength: ptr(s.maxText),
			Description: "Words to look for in titles and texts (ranked with BM25)."},
			func(q *query, v string) error {
				if len(v) > s.maxText {
					return memgate.Invalid("query", "query must be at most %d bytes", s.maxText)
				}
				q.Text = v
				return nil
			}),
		tagsParam("Only memories with these tags (see tags_mode).", func(q *query) *[]string { return &q.Tags }),
		oneOf("tags_mode", "all: every tag must be present; any: one is enough.",
			[]string{memgate.TagsAll, memgate.TagsAny}, func(q *query, v string) { q.TagsMode = v }),
		filterParam(func(q *query) *map[string]any { return &q.Filter }),
		str("source_kind", schemaOf(memgate.SourceKindSchema(), "Only memories whose source has this kind."),
			func(q *query, v string) error {
				q.SourceKind = v
				return memgate.ValidateSourceKind("source_kind", v)
			}),
		limit("Most hits to return.", memgate.MaxSearchLimit, memgate.DefaultSearchLimit,
			func(q *query, n int) { q.Limit = n }),
		integer("budget", "Stop adding hits once their texts would pass this many tokens (about 4 bytes each).",
			1, memgate.MaxBudget, func(q *query, n int64) { q.Budget = int(n) }),
	}
}

// search checks the rule across its arguments: it needs words, tags or a
// filter.
func (s *Server) search(q memgate.Query) (op, error) {
	if strings.TrimSpace(q.Text) == "" && len(q.Tags) == 0 && len(q.Filter) == 0 && q.SourceKind == "" {
		return nil, memgate.Invalid("query", "search needs a query, tags, a filter or a source_kind")
	}
	return func(ctx context.Context, st Store, _ memgate.Namespace) (*mcp.CallToolResult, error) {
		var (
			r   memgate.Result
			err error
		)
		if view := viewOf(ctx); view != nil {
			r, err = s.searchView(ctx, st, view, q)
		} else {
			r, err = st.Search(ctx, q)
		}
		if err != nil {
			return nil, err
		}
		hits := make([]memgate.Hit, len(r.Hits))
		for i, h := range r.Hits {
			h.Memory = wireMemory(h.Memory)
			hits[i] = h
		}
		r.Hits = hits
		return hitsResult(r, s.itemBudget()), nil
	}, nil
}

func listParams() params[memgate.ListQuery] {
	type query = memgate.ListQuery
	return params[query]{
		cursorParam(func(q *query) *string { return &q.Cursor }),
		limit("Most memories on this page.", memgate.MaxListLimit, memgate.DefaultListLimit,
			func(q *query, n int) { q.Limit = n }),
		tagsParam("Only memories with all of these tags.", func(q *query) *[]string { return &q.Tags }),
		filterParam(func(q *query) *map[string]any { return &q.Filter }),
		oneOf("order", "Order of the listing.",
			[]string{memgate.OrderUpdatedDesc, memgate.OrderCreatedAsc, memgate.OrderCreatedDesc},
			func(q *query, v string) { q.Order = v }),
	}
}

func (s *Server) list(q memgate.ListQuery) (op, error) {
	return func(ctx context.Context, st Store, ns memgate.Namespace) (*mcp.CallToolResult, error) {
		// The page ends early when the next memory would pass the bound
		// on the answer; each memory is encoded once, as it is taken.
		it := newItems(s.itemBudget())
		q := q
		q.Take = func(i int, m memgate.Memory) bool { return it.take(i, s.inView(wireMemory(m), ns)) }
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

type forgetInput struct {
	id        string
	ifVersion *int64
}

func forgetParams() params[forgetInput] {
	return params[forgetInput]{
		idParam("Id of the memory to forget.", func(in *forgetInput) *string { return &in.id }),
		integer("if_version", "Forget only if the memory's current version is this one; otherwise fail with "+
			"version_conflict.", 1, maxVersion, func(in *forgetInput, v int64) { in.ifVersion = &v }),
	}
}

func (s *Server) forget(in forgetInput) (op, error) {
	id, ifVersion := in.id, in.ifVersion
	return func(ctx context.Context, st Store, _ memgate.Namespace) (*mcp.CallToolResult, error) {
		if err := st.Delete(ctx, id, ifVersion); err != nil {
			return nil, err
		}
		return successResult(forgetResult{ID: id, Forgotten: true}), nil
	}, nil
}

func (s *Server) statsTool(struct{}) (op, error) {
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
		Recall: s.recall(), Embedded: c.Embedded, WriteMode: s.opts.WriteMode,
		Limits: statsLimits{
			MaxMemoryBytes: s.maxText, MaxIDBytes: memgate.MaxIDBytes, MaxTitleChars: memgate.MaxTitleChars,
			MaxTags: memgate.MaxTags, MaxTagChars: memgate.MaxTagChars,
			MaxMetadataKeys: memgate.MaxMetadataKeys, MaxMetadataKeyChars: memgate.MaxMetadataKeyChars,
			MaxMetadataBytes: memgate.MaxMetadataBytes, MaxSearchLimit: memgate.MaxSearchLimit,
			MaxBudget: memgate.MaxBudget, MaxListLimit: memgate.MaxListLimit, MaxExportLimit: MaxExportLimit,
			MaxMemories: s.opts.MaxMemories, MaxNamespaceBytes: s.opts.MaxNamespaceBytes,
		},
	}, nil
}

type exportInput struct {
	cursor string
	limit  int
}

func exportParams() params[exportInput] {
	return params[exportInput]{
		cursorParam(func(in *exportInput) *string { return &in.cursor }),
		limit("Most memories on this page.", MaxExportLimit, DefaultExportLimit,
			func(in *exportInput, n int) { in.limit = n }),
	}
}

func (s *Server) export(in exportInput) (op, error) {
	c, limit := in.cursor, in.limit
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

// recall is what stats says about how search finds memories.
func (s *Server) recall() string {
	if s.opts.Recall != "" {
		return s.opts.Recall
	}
	return Recall
}
