package server

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
)

// A leased store is wrapped when telemetry is on (observedStore), and a
// wrapper hides every method its type does not declare: a tool that asserts
// an optional interface on its store (as remember asserts Proposer) would
// find it missing only when traces or metrics are exported. Every interface
// package server declares is listed here, and the wrapper must have each
// one that storage's store has.
func TestObservedStoreKeepsTheStoreInterfaces(t *testing.T) {
	known := map[string]reflect.Type{
		"Reader":   reflect.TypeFor[Reader](),
		"Writer":   reflect.TypeFor[Writer](),
		"Exporter": reflect.TypeFor[Exporter](),
		"Proposer": reflect.TypeFor[Proposer](),
		"Ranker":   reflect.TypeFor[Ranker](),
		"Store":    reflect.TypeFor[Store](),
	}
	files, _ := filepath.Glob("*.go")
	declared := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			if _, ok := ts.Type.(*ast.InterfaceType); ok {
				declared++
				if _, ok := known[ts.Name.Name]; !ok {
					t.Errorf("%s declares interface %s: if a tool asserts it on a leased store, give observedStore "+
						"(telemetry.go) its methods, as it has Propose, then list it here", f, ts.Name.Name)
				}
			}
			return true
		})
	}
	if declared < len(known) {
		t.Fatalf("found %d interfaces, want at least %d", declared, len(known))
	}
	real, observed := reflect.TypeFor[*storage.Store](), reflect.TypeFor[*observedStore]()
	for name, typ := range known {
		if real.Implements(typ) && !observed.Implements(typ) {
			t.Errorf("*storage.Store is a %s and the observed store is not", name)
		}
	}
}

// With nothing installed, observing a request and its lease allocates
// nothing: no span, no attribute, no wrapped store.
func TestObservingNothingAllocatesNothing(t *testing.T) {
	st := &observedStore{} // any Store
	lease := func(context.Context, memgate.Namespace) (Store, func(), error) { return st, func() {}, nil }
	s, err := New(Options{Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	res := &mcp.CallToolResult{}
	handler := s.observe(func(context.Context, string, mcp.Request) (mcp.Result, error) { return res, nil })
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: ToolSearch,
		Meta: mcp.Meta{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		if got, err := handler(ctx, "tools/call", req); got != res || err != nil {
			t.Fatal(got, err)
		}
	}); n != 0 {
		t.Errorf("a request allocates %.1f times in the middleware, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		if got, release, err := s.lease(ctx, "default"); got != st || err != nil {
			t.Fatal(got, err)
		} else {
			release()
		}
	}); n != 0 {
		t.Errorf("a lease allocates %.1f times, want 0 (the store unwrapped)", n)
	}
}
