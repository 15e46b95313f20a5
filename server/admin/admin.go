package admin

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/memgate/memgate"
)

// Prefix is where the admin API is served.
const Prefix = "/admin/v1/"

// DefaultMaxImportBytes bounds an import's body unless Options says otherwise.
const DefaultMaxImportBytes = 1 << 30

// DefaultMaxToolBytes bounds the arguments of a tool call (POST
// namespaces/{ns}/tools/{tool}) unless Options says otherwise.
const DefaultMaxToolBytes = 1 << 20

// NamespaceInfo is one namespace in the list of GET namespaces.
type NamespaceInfo struct {
	Namespace  string `json:"namespace"`
	Count      int64  `json:"count"`
	Bytes      int64  `json:"bytes"`
	StoreBytes int64  `json:"store_bytes"`
	Open       bool   `json:"open"`
	// Error is the code of a store that cannot be read (damaged, held by
	// another process): its figures are zeros. "" for the others.
	Error memgate.Code `json:"error,omitempty"`
}

// NamespacePage is a page of GET namespaces.
type NamespacePage struct {
	Namespaces []NamespaceInfo `json:"namespaces"`
	NextCursor string          `json:"next_cursor,omitempty"`
}

// Ops are the operations the routes call. Each returns a value the route
// answers as JSON, or an error: a *memgate.Error answers with its code's
// status, anything else as internal. Every field must be set.
type Ops struct {
	Namespaces func(ctx context.Context, cursor string, limit int) (NamespacePage, error)
	Stats      func(ctx context.Context, ns memgate.Namespace) (any, error)
	// Export writes the namespace's memories as JSON Lines to w; it may
	// return before writing when the store cannot be read.
	Export func(ctx context.Context, ns memgate.Namespace, w io.Writer) error
	// Import reads JSON Lines from r as it goes (never the whole body at
	// once) and returns the import report, also with an error: how far it
	// got.
	Import func(ctx context.Context, ns memgate.Namespace, r io.Reader, onConflict string) (any, error)
	// Backup writes a consistent copy of the live store file to w while
	// writers go on.
	Backup     func(ctx context.Context, ns memgate.Namespace, w io.Writer) (int64, error)
	Candidates func(ctx context.Context, ns memgate.Namespace, cursor string, limit int) (any, error)
	Approve    func(ctx context.Context, ns memgate.Namespace, id string) (any, error)
	Reject     func(ctx context.Context, ns memgate.Namespace, id string) (any, error)
	Trash      func(ctx context.Context, ns memgate.Namespace, cursor string, limit int) (any, error)
	Restore    func(ctx context.Context, ns memgate.Namespace, id string) (any, error)
	// Erase closes the namespace's store once its leases end and deletes it.
	Erase func(ctx context.Context, ns memgate.Namespace) error
	// Tool runs an MCP tool on ns's store with args (the request's body) as
	// tools/call would, and returns its structured content; a tool error is
	// its *memgate.Error, an unknown tool not_found.
	Tool func(ctx context.Context, ns memgate.Namespace, tool string, args json.RawMessage) (json.RawMessage, error)
}

// An Action is one admin request, as the audit log records it: never an
// id, a cursor or a body.
type Action struct {
	Op        string // "admin.backup", ...
	Tool      string // the path's tool of "admin.tool" (any word), else ""
	Namespace memgate.Namespace
	Code      memgate.Code // "" on success
	Duration  time.Duration
	Request   *http.Request
}

// Options configure Handler.
type Options struct {
	// MaxImportBytes bounds an import's body (413 beyond it);
	// 0 means DefaultMaxImportBytes.
	MaxImportBytes int64
	// MayUse, when set, says whether a request's credential may act on
	// namespace ns: other namespaces are forbidden on every route and left
	// out of GET namespaces. nil allows every namespace.
	MayUse func(r *http.Request, ns memgate.Namespace) bool
	// Audit, when set, is called once per request that reached a route.
	Audit func(Action)
	// MaxToolBytes bounds a tool call's arguments (413 beyond them);
	// 0 means DefaultMaxToolBytes.
	MaxToolBytes int64
	// Logger receives internal failures (their cause); nil discards them.
	Logger *slog.Logger
	// Extra routes, by ServeMux pattern (the control socket adds its own);
	// they are not part of the OpenAPI document.
	Extra map[string]http.HandlerFunc
}

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document of the routes.
func OpenAPI() []byte { return openAPI }

// Handler serves the admin API of ops. Requests reach it authenticated.
func Handler(ops Ops, o Options) http.Handler {
	if o.MaxImportBytes <= 0 {
		o.MaxImportBytes = DefaultMaxImportBytes
	}
	if o.MaxToolBytes <= 0 {
		o.MaxToolBytes = DefaultMaxToolBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{ops: ops, o: o}
	mux := http.NewServeMux()
	allow := map[string][]string{} // path → its methods
	for _, r := range routes {
		mux.HandleFunc(r.method+" "+Prefix+r.path, h.wrap(r))
		allow[r.path] = append(allow[r.path], r.method)
	}
	for path, methods := range allow {
		// A path of the API with a method it does not take.
		allowed := strings.Join(methods, ", ")
		mux.HandleFunc(Prefix+path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allowed)
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": map[string]any{
				"code": memgate.CodeInvalidArgument, "message": "this route takes " + allowed}})
		})
	}
	for pattern, f := range o.Extra {
		mux.HandleFunc(pattern, f)
	}
	mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, &memgate.Error{Code: memgate.CodeNotFound, Message: "no such admin route"})
	})
	return mux
}

// route is one route of the API; Routes lists them for the OpenAPI test.
type route struct {
	method, path, op string
	serve            func(h *handler, w http.ResponseWriter, r *http.Request, ns memgate.Namespace) error
}

var routes = []route{
	{"GET", "openapi.json", "admin.openapi", (*handler).openapi},
	{"GET", "namespaces", "admin.namespaces", (*handler).namespaces},
	{"GET", "namespaces/{ns}", "admin.stats", (*handler).stats},
	{"DELETE", "namespaces/{ns}", "admin.erase", (*handler).erase},
	{"GET", "namespaces/{ns}/export", "admin.export", (*handler).export},
	{"POST", "namespaces/{ns}/import", "admin.import", (*handler).importLines},
	{"GET", "namespaces/{ns}/backup", "admin.backup", (*handler).backup},
	{"GET", "namespaces/{ns}/candidates", "admin.candidates", (*handler).candidates},
	{"POST", "namespaces/{ns}/candidates/{id}/approve", "admin.approve", (*handler).approve},
	{"POST", "namespaces/{ns}/candidates/{id}/reject", "admin.reject", (*handler).reject},
	{"GET", "namespaces/{ns}/trash", "admin.trash", (*handler).trash},
	{"POST", "namespaces/{ns}/trash/{id}/restore", "admin.restore", (*handler).restore},
	{"POST", "namespaces/{ns}/tools/{tool}", "admin.tool", (*handler).tool},
}

// Routes returns the method and path (under Prefix, with {ns} and {id}) of
// every route.
func Routes() [][2]string {
	out := make([][2]string, len(routes))
	for i, r := range routes {
		out[i] = [2]string{r.method, r.path}
	}
	return out
}

type handler struct {
	ops Ops
	o   Options
}

func (h *handler) wrap(rt route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var ns memgate.Namespace
		err := func() error {
			if s := r.PathValue("ns"); s != "" {
				n, err := memgate.ParseNamespace("namespace", s)
				if err != nil {
					return err
				}
				ns = n
				if h.o.MayUse != nil && !h.o.MayUse(r, ns) {
					return errNotYours
				}
			}
			if rt.op != "admin.import" && rt.op != "admin.tool" {
				// Only an import and a tool call have a body; the others
				// take none, announced (Content-Length) or not (chunked).
				r.Body = http.MaxBytesReader(w, r.Body, 0)
				if _, err := r.Body.Read(make([]byte, 1)); r.ContentLength > 0 || err != nil && err != io.EOF {
					return errNoBody
				}
			}
			return rt.serve(h, w, r, ns)
		}()
		var code memgate.Code
		if err != nil {
			e := memgate.AsError(rt.op, err)
			code = e.Code
			if code == memgate.CodeInternal {
				h.o.Logger.Error("admin action failed", "op", rt.op, "namespace", string(ns), "error", err)
			}
			WriteError(w, e)
		}
		if h.o.Audit != nil && rt.op != "admin.openapi" {
			a := Action{Op: rt.op, Namespace: ns, Code: code, Duration: time.Since(start), Request: r}
			if rt.op == "admin.tool" {
				a.Tool = r.PathValue("tool")
			}
			h.o.Audit(a)
		}
	}
}

var (
	errNotYours = &memgate.Error{Code: memgate.CodeForbidden, Message: "this credential may not act on this namespace"}
	errNoBody   = &memgate.Error{Code: memgate.CodeTooLarge, Message: "this route takes no body"}
)

// Status is the HTTP status of an error code: the one place that says it.
func Status(code memgate.Code) int {
	switch code {
	case memgate.CodeInvalidArgument:
		return http.StatusBadRequest
	case memgate.CodeNotFound:
		return http.StatusNotFound
	case memgate.CodeVersionConflict:
		return http.StatusConflict
	case memgate.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case memgate.CodeSecretDetected:
		return http.StatusUnprocessableEntity
	case memgate.CodeForbidden:
		return http.StatusForbidden
	case memgate.CodeQuotaExceeded:
		return http.StatusInsufficientStorage
	case memgate.CodeStoreLocked, memgate.CodeTooManyStores, memgate.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// WriteError answers e as {error:{code,message}} under its code's status.
// Anything but a *memgate.Error is internal, with the fixed message.
func WriteError(w http.ResponseWriter, err error) {
	e := memgate.AsError("admin", err)
	msg := e.Message
	if e.Code == memgate.CodeInternal || e.Code == "" {
		e = &memgate.Error{Code: memgate.CodeInternal}
		msg = memgate.InternalMessage
	}
	status := Status(e.Code)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	body := map[string]any{"code": e.Code, "message": msg}
	if len(e.Details) > 0 {
		body["details"] = e.Details
	}
	writeJSON(w, status, map[string]any{"error": body})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as the store commands print it
	err := enc.Encode(v)
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"`+memgate.InternalMessage+`"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// pageArgs reads cursor and limit (1 to memgate.MaxListLimit; 0 when absent).
func pageArgs(r *http.Request, def int) (string, int, error) {
	q := r.URL.Query()
	limit := def
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > memgate.MaxListLimit {
			return "", 0, memgate.Invalid("limit", "limit must be from 1 to %d", memgate.MaxListLimit)
		}
		limit = n
	}
	return q.Get("cursor"), limit, nil
}

func (h *handler) openapi(w http.ResponseWriter, _ *http.Request, _ memgate.Namespace) error {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPI)
	return nil
}

func (h *handler) namespaces(w http.ResponseWriter, r *http.Request, _ memgate.Namespace) error {
	cursor, limit, err := pageArgs(r, 100)
	if err != nil {
		return err
	}
	if cursor != "" {
		// A cursor is the last namespace of the page before.
		if _, err := memgate.ParseNamespace("cursor", cursor); err != nil {
			return memgate.Invalid("cursor", "cursor must be the next_cursor of a page")
		}
	}
	page, err := h.ops.Namespaces(r.Context(), cursor, limit)
	if err != nil {
		return err
	}
	if h.o.MayUse != nil {
		page.Namespaces = slices.DeleteFunc(page.Namespaces, func(n NamespaceInfo) bool {
			return !h.o.MayUse(r, memgate.Namespace(n.Namespace))
		})
	}
	if page.Namespaces == nil {
		page.Namespaces = []NamespaceInfo{}
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (h *handler) stats(w http.ResponseWriter, r *http.Request, ns memgate.Namespace) error {
	return answer(w, http.StatusOK)(h.ops.Stats(r.Context(), ns))
}

func (h *handler) erase(w http.ResponseWriter, r *http.Request, ns memgate.Namespace) error {
	if err := h.ops.Erase(r.Context(), ns); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": ns, "erased": true})
	return nil
}

func (h *handler) export(w http.ResponseWriter, r *http.Request, ns memgate.Namespace) error {
	lw := &lazyWriter{w: w, typ: "application/jsonl"}
	err := h.ops.Export(r.Context(), ns, lw)
	if err != nil && lw.wrote {
		// Half a file must not read as a whole one: cut the transfer.
		h.o.Logger.Warn("admin export cut", "op", "admin.export", "namespace", string(ns), "error", err)
		panic(http.ErrAbortHandler)
	}
	if err == nil && !lw.wrote {
		lw.WriteHeader()
	}
	return err
}

func (h *handler) backup(w http.ResponseWriter, r *http.Request, ns memgate.Namespace) error {
	lw := &lazyWriter{w: w, typ: "application/octet-stream"}
	w.Header().Set("Content-Disposition", `attachment; filename="`+string(ns)+`.db"`)
	_, err := h.ops.Backup(r.Context(), ns, lw)
	if err != nil && lw.wrote {
		h.o.Logger.Warn("admin backup cut", "op", "admin.backup", "namespace", string(ns), "error", err)
		panic(http.ErrAbortHandler)
	}
	if err != nil {
		w.Header().Del("Content-Disposition")
	}
	return err
}

func (h *handler) importLines(w http.ResponseWriter, r *http.Request, ns memgate.Namespace) error {
	onConflict := r.URL.Query().Get("on_conflict")
	switch onConflict {
	case "":
		onConflict = "skip"
	case "skip", "overwrite", "fail":
	default:
		return memgate.Invalid("on_conflict", "on_conflict must be skip, overwrite or fail")
	}
	if r.ContentLength > h.o.MaxImportBytes {
		return &memgate.Error{Code: memgate.CodeTooLarge, Message: "the import passes the largest body this server takes (--max-import-bytes)"}
	}
	body := &bounded{r: http.MaxBytesReader(w, r.Body, h.o.MaxImportBytes)}
	rep, err := h.ops.Import(r.Context(), ns, body, onConflict)
	switch {
	case body.passed:
		// However the import reported the failed read (as a line it could
		// not read, say), the body passed the bound.
		err = &memgate.Error{Code: memgate.CodeTooLarge, Message: "the import passes the largest body this server takes (--max-import-bytes)"}
	case err != nil && r.Context().Err() != nil:
		// The server stopped it (its shutdown's grace ran out), however
		// the cut read showed.
		err = &memgate.Error{Code: memgate.CodeUnavailable, Message: "the server stopped the import as it shut down; what the report counts stays"}
	}
	if err != nil {
		e := memgate.AsError("admin.import", err)
		if e.Code != memgate.CodeInternal && rep != nil {
			// How far it got: what was committed before the failure stays.
			d := map[string]any{"report": rep}
			for k, v := range e.Details {
				d[k] = v
			}
			return &memgate.Error{Code: e.Code, Message: e.Message, Details: d, Cause: e.Cause}
		}
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

func (h *handler) candidates(w http.ResponseWriter, r *http.Request, ns memgate.Namespace) error {
	cursor, limit, err := pageArgs(r, 0)
	if err != nil {
		return err
	}
	return answer(w, http.StatusOK)(h.ops.Candidates(r.Context(), ns, cursor, limit))
}

func (h *handler) approve(w http.ResponseWriter, r *http.Request, ns memgate.Namespace) error {
	return answer(w, http.StatusOK)(h.ops.Approve(r.Context(), ns, r.PathValue("id")))
}

func (h *handler) reject(w http.ResponseWriter, r *http.Request, ns memgate.Namespace) error {
	return answer(w, http.StatusOK)(h.ops.Reject(r.Context(), ns, r.PathValue("id")))
}

func (h *handler) trash(w http.ResponseWriter, r *http.Request, ns memgate.Namespace) error {
	cursor, limit, err := pageArgs(r, 0)
	if err != nil {
		return err
	}
	return answer(w, http.StatusOK)(h.ops.Trash(r.Context(), ns, cursor, limit))
}

func (h *handler) restore(w http.ResponseWriter, r *http.Request, ns memgate.Namespace) error {
	return answer(w, http.StatusOK)(h.ops.Restore(r.Context(), ns, r.PathValue("id")))
}

// tool runs a tool with the body as its arguments (nothing is none), on
// the path's namespace: the arguments take no namespace of their own.
func (h *handler) tool(w http.ResponseWriter, r *http.Request, ns memgate.Namespace) error {
	if r.ContentLength > h.o.MaxToolBytes {
		return errToolTooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.o.MaxToolBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return errToolTooLarge
	}
	if err != nil {
		return &memgate.Error{Code: memgate.CodeInvalidArgument, Message: "the request body could not be read"}
	}
	args := json.RawMessage(bytes.TrimSpace(body))
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(args, &members) != nil || members == nil {
		return memgate.Invalid("arguments", "the body must be the tool's arguments as one JSON object")
	}
	if _, ok := members["namespace"]; ok {
		return memgate.Invalid("namespace", "the namespace is the path's; leave it out of the arguments")
	}
	out, err := h.ops.Tool(r.Context(), ns, r.PathValue("tool"), args)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)+1))
	w.WriteHeader(http.StatusOK)
	w.Write(append(out, '\n'))
	return nil
}

var errToolTooLarge = &memgate.Error{Code: memgate.CodeTooLarge, Message: "the arguments pass the largest tool call this API takes"}

// answer writes v as JSON unless err.
func answer(w http.ResponseWriter, status int) func(v any, err error) error {
	return func(v any, err error) error {
		if err != nil {
			return err
		}
		writeJSON(w, status, v)
		return nil
	}
}

// bounded reads r and remembers whether a read found the body past its
// http.MaxBytesReader bound.
type bounded struct {
	r      io.Reader
	passed bool
}

func (b *bounded) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		b.passed = true
	}
	return n, err
}

// lazyWriter sends the status and type with the first byte, so that a
// failure before any lets the route answer with an error instead.
type lazyWriter struct {
	w     http.ResponseWriter
	typ   string
	wrote bool
}

func (l *lazyWriter) Header() http.Header { return l.w.Header() }

func (l *lazyWriter) WriteHeader() {
	l.w.Header().Set("Content-Type", l.typ)
	l.w.WriteHeader(http.StatusOK)
	l.wrote = true
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if !l.wrote {
		l.WriteHeader()
	}
	return l.w.Write(p)
}
