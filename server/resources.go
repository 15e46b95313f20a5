package server

import (
	"context"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
)

// Resource URIs.
const (
	StatsURI                = "memgate://stats"
	MemoryURITemplate       = "memgate://memory/{id}"
	NamespaceMemoryTemplate = "memgate://namespace/{namespace}/memory/{id}"

	memoryPrefix    = "memgate://memory/"
	namespacePrefix = "memgate://namespace/"
	mimeText        = "text/plain"
	mimeJSON        = "application/json"
)

// resourcePageSize is how many memories one resources/list page holds.
const resourcePageSize = 100

// MemoryURI returns the URI of memory id in the caller's namespace. Every
// byte outside RFC 3986's unreserved characters is percent-encoded, which is
// what the URI template's {id} expands to and matches.
func MemoryURI(id string) string { return memoryPrefix + escapeID(id) }

// NamespaceMemoryURI returns the URI of memory id in namespace ns.
func NamespaceMemoryURI(ns memgate.Namespace, id string) string {
	return namespacePrefix + string(ns) + "/memory/" + escapeID(id)
}

const hexDigits = "0123456789ABCDEF"

func escapeID(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		if unreserved(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// unescapeID decodes a percent-encoded id. Only unreserved characters and
// %XX escapes are accepted, as the URI template produces.
func unescapeID(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case unreserved(c):
			b.WriteByte(c)
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		default:
			return "", false
		}
	}
	return b.String(), true
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// memoryRef is a parsed memory URI. ns is "" for memgate://memory/{id}.
type memoryRef struct {
	ns string
	id string
}

// parseMemoryURI parses memgate://memory/{id} and, when namespaced is set,
// memgate://namespace/{namespace}/memory/{id}. The id must be a valid id and
// the namespace a valid namespace name.
func parseMemoryURI(uri string, namespaced bool) (memoryRef, bool) {
	var ref memoryRef
	var rest string
	switch {
	case strings.HasPrefix(uri, memoryPrefix):
		rest = uri[len(memoryPrefix):]
	case namespaced && strings.HasPrefix(uri, namespacePrefix):
		ns, tail, ok := strings.Cut(uri[len(namespacePrefix):], "/memory/")
		if !ok {
			return ref, false
		}
		if _, err := memgate.ParseNamespace("namespace", ns); err != nil {
			return ref, false
		}
		ref.ns, rest = ns, tail
	default:
		return ref, false
	}
	id, ok := unescapeID(rest)
	if !ok || memgate.ValidateID("id", id) != nil {
		return ref, false
	}
	ref.id = id
	return ref, true
}

// errResourceNotFound is SEP-2164's answer to a memory that does not exist.
// Unlike the SDK's own, it does not echo the URI: that holds the id.
var errResourceNotFound = &jsonrpc.Error{Code: mcp.CodeResourceNotFound, Message: "Resource not found",
	Data: marshal(wire(&memgate.Error{Code: memgate.CodeNotFound, Message: "no memory has this id"}))}

func (s *Server) addResources(m *mcp.Server) {
	if s.enabled[ToolGet] {
		m.AddResourceTemplate(&mcp.ResourceTemplate{
			Name: "memory", Title: "Memory", URITemplate: MemoryURITemplate, MIMEType: mimeText,
			Description: "One memory's text; its other fields (id, title, tags, metadata, version, times) are in _meta. " +
				"The id is percent-encoded.",
		}, s.readMemory)
		if s.opts.NamespaceArg || s.opts.View != nil {
			m.AddResourceTemplate(&mcp.ResourceTemplate{
				Name: "namespace-memory", Title: "Memory in a namespace", URITemplate: NamespaceMemoryTemplate,
				MIMEType:    mimeText,
				Description: "One memory of another namespace, like " + MemoryURITemplate + ".",
			}, s.readMemory)
		}
	}
	if s.enabled[ToolStats] {
		stats := &mcp.Resource{Name: "stats", Title: "Memory statistics", URI: StatsURI, MIMEType: mimeJSON,
			Description: "What the stats tool returns: counts, sizes, recall method, write mode and limits."}
		m.AddResource(stats, s.readStats)
		m.AddResourceTemplate(&mcp.ResourceTemplate{Name: stats.Name, Title: stats.Title, URITemplate: StatsURI,
			MIMEType: mimeJSON, Description: stats.Description}, s.readStats)
	}
	if s.enabled[ToolGet] || s.enabled[ToolStats] {
		m.AddReceivingMiddleware(s.resourceListing)
	}
}

// resourceListing answers resources/list itself: the SDK lists only the
// resources added to it, and the memories of a namespace are not.
func (s *Server) resourceListing(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		r, ok := req.(*mcp.ListResourcesRequest)
		if method != "resources/list" || !ok {
			return next(ctx, method, req)
		}
		return s.listResources(ctx, r)
	}
}

func (s *Server) listResources(ctx context.Context, req *mcp.ListResourcesRequest) (out *mcp.ListResourcesResult, err error) {
	start := time.Now()
	var (
		ns     memgate.Namespace
		failed error
	)
	defer func() {
		if out != nil || err != nil { // neither: a panic, which the recovery logs
			s.logCall(ctx, "resources/list", "", ns, start, failed)
		}
	}()
	var cur string
	if req.Params != nil {
		cur = req.Params.Cursor
	}
	res := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}, Cacheable: mcp.Cacheable{CacheScope: "private"}}
	if cur == "" && s.enabled[ToolStats] {
		res.Resources = append(res.Resources, &mcp.Resource{Name: "stats", Title: "Memory statistics", URI: StatsURI,
			MIMEType: mimeJSON})
	}
	if !s.enabled[ToolGet] || !s.enabled[ToolList] {
		if cur != "" {
			failed = memgate.Invalid("cursor", "invalid cursor")
			return nil, rpcError(failed.(*memgate.Error))
		}
		return res, nil
	}
	if len(cur) > maxCursorBytes {
		failed = memgate.Invalid("cursor", "invalid cursor")
		return nil, rpcError(failed.(*memgate.Error))
	}
	var page memgate.Page
	ns, err = s.withStore(ctx, req.Extra, "", func(st Store, _ memgate.Namespace) error {
		var err error
		page, err = st.List(ctx, memgate.ListQuery{Cursor: cur, Limit: resourcePageSize})
		return err
	})
	if err != nil {
		e := memgate.AsError("server.resources/list", err)
		failed = e
		return nil, rpcError(e)
	}
	for _, m := range page.Memories {
		res.Resources = append(res.Resources, &mcp.Resource{Name: m.ID, Title: m.Title, URI: MemoryURI(m.ID),
			MIMEType: mimeText, Size: int64(m.Bytes)})
	}
	res.NextCursor = page.NextCursor
	return res, nil
}

// withStore resolves the namespace of a request that is not a tool call
// (with namespace argument nsArg, "" for none), leases its store for
// reading (these requests only read: none creates a store) and runs fn with
// it and the namespace.
func (s *Server) withStore(ctx context.Context, extra *mcp.RequestExtra, nsArg string, fn func(Store, memgate.Namespace) error) (memgate.Namespace, error) {
	ns, err := s.resolve(principalOf(ctx, extra), nsArg)
	if err != nil {
		return "", err
	}
	st, release, err := s.leaseRead(ctx, ns)
	if err != nil {
		return ns, err
	}
	defer release()
	return ns, fn(st, ns)
}

func (s *Server) readMemory(ctx context.Context, req *mcp.ReadResourceRequest) (out *mcp.ReadResourceResult, err error) {
	start := time.Now()
	var (
		ns     memgate.Namespace
		failed error
	)
	defer func() {
		if out != nil || err != nil { // neither: a panic, which the recovery logs
			s.logCall(ctx, "resources/read", "memory", ns, start, failed)
		}
	}()
	uri := req.Params.URI
	ref, ok := parseMemoryURI(uri, s.opts.NamespaceArg || s.opts.View != nil)
	if !ok {
		failed = memgate.Invalid("uri", "invalid memory URI")
		return nil, errResourceNotFound
	}
	var m memgate.Memory
	read := func(st Store, n memgate.Namespace) error {
		var err error
		m, err = st.Get(ctx, ref.id)
		m = s.inView(m, n)
		return err
	}
	if ref.ns != "" && s.opts.View != nil {
		ns, err = s.withViewStore(ctx, req.Extra, memgate.Namespace(ref.ns), read)
	} else {
		ns, err = s.withStore(ctx, req.Extra, ref.ns, read)
	}
	if err != nil {
		e := memgate.AsError("server.resources/read", err)
		failed = e
		if e.Code == memgate.CodeNotFound {
			return nil, errResourceNotFound
		}
		return nil, rpcError(e)
	}
	m = wireMemory(m)
	meta := mcp.Meta{
		"id": m.ID, "tags": m.Tags, "metadata": m.Metadata, "bytes": m.Bytes, "version": m.Version,
		"created_at": m.CreatedAt.UTC().Format(time.RFC3339Nano),
		"updated_at": m.UpdatedAt.UTC().Format(time.RFC3339Nano),
	}
	if m.Title != "" {
		meta["title"] = m.Title
	}
	if m.Namespace != "" {
		meta["namespace"] = m.Namespace
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
		{URI: uri, MIMEType: mimeText, Text: m.Text, Meta: meta},
	}}, nil
}

func (s *Server) readStats(ctx context.Context, req *mcp.ReadResourceRequest) (out *mcp.ReadResourceResult, err error) {
	start := time.Now()
	var (
		ns     memgate.Namespace
		failed error
	)
	defer func() {
		if out != nil || err != nil { // neither: a panic, which the recovery logs
			s.logCall(ctx, "resources/read", "stats", ns, start, failed)
		}
	}()
	var r statsResult
	ns, err = s.withStore(ctx, req.Extra, "", func(st Store, ns memgate.Namespace) error {
		var err error
		r, err = s.stats(ctx, st, ns)
		return err
	})
	if err != nil {
		e := memgate.AsError("server.resources/read", err)
		failed = e
		return nil, rpcError(e)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
		{URI: StatsURI, MIMEType: mimeJSON, Text: string(marshal(r))},
	}}, nil
}
