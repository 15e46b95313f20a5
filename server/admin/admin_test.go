package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server/admin"
)

// ops answers every route with a value that names it, so a test sees which
// handler a request reached.
func ops(called *[]string) admin.Ops {
	hit := func(name string) { *called = append(*called, name) }
	return admin.Ops{
		Namespaces: func(context.Context, string, int) (admin.NamespacePage, error) {
			hit("namespaces")
			return admin.NamespacePage{}, nil
		},
		Stats: func(context.Context, memgate.Namespace) (any, error) { hit("stats"); return map[string]any{}, nil },
		Export: func(_ context.Context, _ memgate.Namespace, w io.Writer) error {
			hit("export")
			_, err := io.WriteString(w, "{\"memgate_export\":1}\n")
			return err
		},
		Import: func(_ context.Context, _ memgate.Namespace, r io.Reader, _ string) (any, error) {
			hit("import")
			n, err := io.Copy(io.Discard, r)
			return map[string]any{"bytes": n}, err
		},
		Backup: func(_ context.Context, _ memgate.Namespace, w io.Writer) (int64, error) {
			hit("backup")
			n, err := w.Write([]byte("bolt"))
			return int64(n), err
		},
		Candidates: func(context.Context, memgate.Namespace, string, int) (any, error) {
			hit("candidates")
			return map[string]any{}, nil
		},
		Approve: func(context.Context, memgate.Namespace, string) (any, error) {
			hit("approve")
			return map[string]any{}, nil
		},
		Reject: func(context.Context, memgate.Namespace, string) (any, error) {
			hit("reject")
			return map[string]any{}, nil
		},
		Trash: func(context.Context, memgate.Namespace, string, int) (any, error) {
			hit("trash")
			return map[string]any{}, nil
		},
		Restore: func(context.Context, memgate.Namespace, string) (any, error) {
			hit("restore")
			return map[string]any{}, nil
		},
		Erase: func(context.Context, memgate.Namespace) error { hit("erase"); return nil },
		Tool: func(_ context.Context, _ memgate.Namespace, _ string, args json.RawMessage) (json.RawMessage, error) {
			hit("tool")
			return args, nil
		},
	}
}

// The OpenAPI document describes exactly the routes the handler serves:
// every path and method of the document reaches a handler (not the
// unknown-route answer), and every route is in the document.
func TestOpenAPIMatchesTheHandlers(t *testing.T) {
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(admin.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	var documented [][2]string
	for path, methods := range doc.Paths {
		for m := range methods {
			documented = append(documented, [2]string{strings.ToUpper(m), strings.TrimPrefix(path, "/")})
		}
	}
	routes := admin.Routes()
	for _, r := range routes {
		if !slices.Contains(documented, r) {
			t.Errorf("%s %s is served but not documented", r[0], r[1])
		}
	}
	var called []string
	h := admin.Handler(ops(&called), admin.Options{})
	for _, d := range documented {
		if !slices.Contains(routes, d) {
			t.Errorf("%s %s is documented but not a route", d[0], d[1])
		}
		path := strings.NewReplacer("{ns}", "team-a", "{id}", "some-id", "{tool}", "search").Replace(admin.Prefix + d[1])
		rec := httptest.NewRecorder()
		var body io.Reader
		if d[0] == "POST" {
			body = strings.NewReader("")
		}
		before := len(called)
		h.ServeHTTP(rec, httptest.NewRequest(d[0], path, body))
		if rec.Code != http.StatusOK {
			t.Errorf("%s %s: %d %s", d[0], path, rec.Code, rec.Body)
		}
		if d[1] != "openapi.json" && len(called) != before+1 {
			t.Errorf("%s %s reached no operation", d[0], path)
		}
		// Each documented response type is the one sent.
		for ct := range doc.Paths["/"+d[1]][strings.ToLower(d[0])]["responses"].(map[string]any)["200"].(map[string]any)["content"].(map[string]any) {
			if got := rec.Header().Get("Content-Type"); got != ct {
				t.Errorf("%s %s: content type %q, documented %q", d[0], path, got, ct)
			}
		}
	}
}

func TestErrorsCarryTheirCodeAndStatus(t *testing.T) {
	var called []string
	o := ops(&called)
	o.Approve = func(context.Context, memgate.Namespace, string) (any, error) {
		return nil, &memgate.Error{Code: memgate.CodeNotFound, Message: "no candidate has this id"}
	}
	o.Stats = func(context.Context, memgate.Namespace) (any, error) {
		return nil, io.ErrUnexpectedEOF // not a *memgate.Error: internal, with the fixed message
	}
	h := admin.Handler(o, admin.Options{MaxImportBytes: 8})
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     memgate.Code
	}{
		{"a missing candidate is not_found", "POST", "namespaces/a/candidates/x/approve", "", 404, memgate.CodeNotFound},
		{"an unexpected failure is internal", "GET", "namespaces/a", "", 500, memgate.CodeInternal},
		{"a bad namespace is invalid_argument", "GET", "namespaces/A..B", "", 400, memgate.CodeInvalidArgument},
		{"a limit out of range is invalid_argument", "GET", "namespaces?limit=0", "", 400, memgate.CodeInvalidArgument},
		{"a bad on_conflict is invalid_argument", "POST", "namespaces/a/import?on_conflict=merge", "", 400, memgate.CodeInvalidArgument},
		{"an import past its bound is too_large", "POST", "namespaces/a/import", "123456789", 413, memgate.CodeTooLarge},
		{"a body on a route that takes none is too_large", "POST", "namespaces/a/candidates/x/reject", "{}", 413, memgate.CodeTooLarge},
		{"an unknown route is not_found", "GET", "nothing", "", 404, memgate.CodeNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(c.method, admin.Prefix+c.path, strings.NewReader(c.body)))
			var env struct {
				Error struct {
					Code    memgate.Code `json:"code"`
					Message string       `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || rec.Code != c.status || env.Error.Code != c.code || env.Error.Message == "" {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if strings.Contains(rec.Body.String(), "unexpected EOF") {
				t.Fatalf("a cause reached the client: %s", rec.Body)
			}
		})
	}
}

// An import streams: a body larger than any buffer passes through in
// pieces, and the bound counts what is read, whatever Content-Length says.
func TestImportStreamsWithinItsBound(t *testing.T) {
	var called []string
	h := admin.Handler(ops(&called), admin.Options{MaxImportBytes: 1 << 20})
	pr, pw := io.Pipe()
	go func() {
		chunk := []byte(strings.Repeat("x", 4096))
		for range (1 << 20) / 4096 {
			pw.Write(chunk)
		}
		pw.Close()
	}()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", admin.Prefix+"namespaces/a/import", pr))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"bytes":1048576`) {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	pr, pw = io.Pipe()
	go func() {
		pw.Write(make([]byte, 1<<20+1))
		pw.Close()
	}()
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", admin.Prefix+"namespaces/a/import", pr))
	if rec.Code != 413 {
		t.Fatalf("one byte past the bound: %d %s", rec.Code, rec.Body)
	}
}

// A tool call's arguments are the body, passed on as they came (nothing is
// no arguments), within MaxToolBytes: N bytes pass, N+1 are 413, whatever
// Content-Length says.
func TestToolArgumentsWithinTheirBound(t *testing.T) {
	var called []string
	const bound = 1024
	h := admin.Handler(ops(&called), admin.Options{MaxToolBytes: bound})
	call := func(body string, length int64) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", admin.Prefix+"namespaces/a/tools/search", strings.NewReader(body))
		req.ContentLength = length
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := call("", 0); rec.Code != 200 || rec.Body.String() != "{}\n" {
		t.Fatalf("no body: %d %q", rec.Code, rec.Body)
	}
	args := `{"query":"` + strings.Repeat("x", bound-len(`{"query":""}`)) + `"}`
	if rec := call(args, int64(len(args))); rec.Code != 200 || rec.Body.String() != args+"\n" {
		t.Fatalf("%d bytes: %d", len(args), rec.Code)
	}
	longer := `{"query":"x` + args[len(`{"query":"`):]
	for _, length := range []int64{int64(len(longer)), -1} {
		if rec := call(longer, length); rec.Code != 413 || !strings.Contains(rec.Body.String(), `"too_large"`) {
			t.Fatalf("%d bytes (Content-Length %d): %d %s", len(longer), length, rec.Code, rec.Body)
		}
	}
}

// Whatever the import makes of a failed read (a line it could not read),
// a chunked body past the bound is 413, as one whose length says so is.
func TestChunkedImportPastItsBoundIsTooLarge(t *testing.T) {
	var called []string
	o := ops(&called)
	o.Import = func(_ context.Context, _ memgate.Namespace, r io.Reader, _ string) (any, error) {
		if _, err := io.Copy(io.Discard, r); err != nil {
			return nil, memgate.Invalid("line", "line 3: line is unreadable") // the cause dropped
		}
		return map[string]any{}, nil
	}
	h := admin.Handler(o, admin.Options{MaxImportBytes: 1000})
	for n, want := range map[int]int{1000: 200, 1001: 413} {
		req := httptest.NewRequest("POST", admin.Prefix+"namespaces/a/import", strings.NewReader(strings.Repeat("x", n)))
		req.ContentLength = -1 // chunked
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("%d bytes: %d %s", n, rec.Code, rec.Body)
		}
	}
}

// A route that takes no body refuses one, announced or chunked, before it
// acts; a bad cursor of the namespace list, a tool's arguments that are
// null or name a namespace, and a namespace the credential may not use are
// refused too.
func TestRefusalsBeforeTheOperation(t *testing.T) {
	var called []string
	h := admin.Handler(ops(&called), admin.Options{
		MayUse: func(_ *http.Request, ns memgate.Namespace) bool { return ns == "mine" },
	})
	for _, c := range []struct {
		method, path, body string
		length             int64
		status             int
	}{
		{"POST", "namespaces/mine/trash/x/restore", "hello", 5, 413},
		{"POST", "namespaces/mine/trash/x/restore", "hello", -1, 413},
		{"GET", "namespaces?cursor=%FF", "", 0, 400},
		{"GET", "namespaces?cursor=..%2F..", "", 0, 400},
		{"POST", "namespaces/mine/tools/stats", "null", 4, 400},
		{"POST", "namespaces/mine/tools/stats", `{"namespace":"mine"}`, 20, 400},
		{"DELETE", "namespaces/theirs", "", 0, 403},
		{"POST", "namespaces/theirs/tools/stats", "", 0, 403},
	} {
		req := httptest.NewRequest(c.method, admin.Prefix+c.path, strings.NewReader(c.body))
		req.ContentLength = c.length
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.status || !strings.Contains(rec.Body.String(), `"error"`) {
			t.Errorf("%s %s: %d %s", c.method, c.path, rec.Code, rec.Body)
		}
	}
	if len(called) != 0 {
		t.Fatalf("refused requests reached %v", called)
	}
	// The list leaves out the namespaces the credential may not use.
	o := ops(&called)
	o.Namespaces = func(context.Context, string, int) (admin.NamespacePage, error) {
		return admin.NamespacePage{Namespaces: []admin.NamespaceInfo{{Namespace: "mine"}, {Namespace: "theirs"}}}, nil
	}
	h = admin.Handler(o, admin.Options{MayUse: func(_ *http.Request, ns memgate.Namespace) bool { return ns == "mine" }})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", admin.Prefix+"namespaces", nil))
	if body := rec.Body.String(); !strings.Contains(body, `"mine"`) || strings.Contains(body, "theirs") {
		t.Fatalf("the list: %s", body)
	}
}

// A route's path with a method it does not take is 405 with Allow.
func TestWrongMethodIsNotAllowed(t *testing.T) {
	var called []string
	h := admin.Handler(ops(&called), admin.Options{})
	for path, allow := range map[string]string{"namespaces/a": "GET, DELETE", "namespaces/a/backup": "GET", "namespaces/a/tools/get": "POST"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("PUT", admin.Prefix+path, nil))
		if rec.Code != 405 || rec.Header().Get("Allow") != allow || !strings.Contains(rec.Body.String(), `"error"`) {
			t.Errorf("PUT %s: %d %q %s", path, rec.Code, rec.Header().Get("Allow"), rec.Body)
		}
	}
	if len(called) != 0 {
		t.Fatalf("reached %v", called)
	}
}
