package memgate_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/memgate/memgate"

// imports returns what the non-test Go files of dir import.
func imports(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range file.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	if len(files) == 0 {
		t.Fatalf("%s holds no Go files", dir)
	}
	return out
}

func standard(p string) bool { return !strings.Contains(strings.Split(p, "/")[0], ".") }

// otelSDK reports whether p is OpenTelemetry's SDK or an exporter, which
// only cmd/memgate installs: the packages use the API.
func otelSDK(p string) bool {
	return strings.HasPrefix(p, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(p, "go.opentelemetry.io/otel/exporters") ||
		strings.HasPrefix(p, "go.opentelemetry.io/contrib/exporters")
}

const otelWhy = "packages use the OpenTelemetry API only; cmd/memgate installs the SDK and exporters"

// The arrows of DESIGN.md point inward, one way: the root package knows only
// the standard library; search does no I/O; storage knows no namespaces,
// MCP or auth; tenants knows storage; auth and server know only the root
// package of the project, so server reaches stores through the interfaces
// it declares.
func TestImportRules(t *testing.T) {
	io := []string{"os", "os/exec", "net", "net/http", "io/fs", "io/ioutil", "syscall", "path/filepath", "database/sql"}
	type rule struct {
		dir     string
		project []string            // the project's packages it may import
		refuse  func(p string) bool // another import it may not have, and why
		why     string
	}
	rules := []rule{
		{".", nil, func(p string) bool { return !standard(p) }, "the root package imports only the standard library"},
		{"search", []string{module}, func(p string) bool { return slices.Contains(io, p) }, "search does no I/O"},
		{"embed", []string{module, module + "/search"}, nil, ""},
		{"storage", []string{module, module + "/search"}, nil, ""},
		{"tenants", []string{module, module + "/storage", module + "/telemetry"}, otelSDK, otelWhy},
		{"auth", []string{module}, nil, ""},
		{"server", []string{module, module + "/server/message", module + "/telemetry"}, otelSDK,
			"server reaches stores and auth through its own interfaces; " + otelWhy},
		{"server/message", []string{module}, nil, ""},
		{"server/admin", []string{module}, nil, ""},
		{"server/console", nil, nil, ""},
		{"internal/synthetic", nil, nil, ""},
		{"internal/pgtest", nil, nil, ""},
		{"internal/syncbuf", nil, nil, ""},
		{"storage/storetest", []string{module, module + "/storage"}, nil, ""},
		{"storage/postgres", []string{module, module + "/storage"}, nil, ""},
		{"server/gateway", []string{module, module + "/server", module + "/server/message", module + "/telemetry"}, otelSDK,
			"the gateway uses the MCP surface only to build servers; " + otelWhy},
		{"telemetry", nil, otelSDK, otelWhy},
		{"telemetry/otlptest", nil, otelSDK, "the test receiver decodes the OTLP protocol's messages, without the SDK"},
	}
	for _, r := range rules {
		for _, p := range imports(t, r.dir) {
			if p == module || strings.HasPrefix(p, module+"/") {
				if !slices.Contains(r.project, p) {
					t.Errorf("%s imports %s: it may import only %v of the project", r.dir, p, r.project)
				}
				continue
			}
			if r.refuse != nil && r.refuse(p) {
				t.Errorf("%s imports %s: %s", r.dir, p, r.why)
			}
		}
	}
	// Every package of the project is under a rule, but for cmd, the
	// folders that are not the product and the modules of their own.
	skip := []string{"cmd", "bench", "e2e", "docs", "testdata", "scripts", "launchers", "bin", "dist", "node_modules"}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if path != "." && (strings.HasPrefix(d.Name(), ".") || slices.Contains(skip, d.Name())) {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "go.mod")); path != "." && err == nil {
			return filepath.SkipDir // a module of its own: the checks of the deployment, say
		}
		if gos, _ := filepath.Glob(filepath.Join(path, "*.go")); len(gos) > 0 &&
			!slices.ContainsFunc(rules, func(r rule) bool { return r.dir == filepath.ToSlash(path) }) {
			t.Errorf("package %s has no import rule: add it to TestImportRules (and to DESIGN's table)", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
