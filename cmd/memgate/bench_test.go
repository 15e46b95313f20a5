//go:build memgatebench

package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The benchmark build serves noop beside memgate's tools, over stdio and
// through the HTTP gateway, when --noop asks for it, and writes the
// profiles its flags ask for when serve stops.
func TestBenchBuildServesNoopAndWritesProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "mem.prof")
	s := serve(t, t.Context(), env{}, "--data-dir", filepath.Join(dir, "data"),
		"--noop", "--cpuprofile", cpu, "--memprofile", mem, "--nosync")
	if !slices.Contains(toolNames(t, s.cs), NoopTool) {
		t.Fatalf("tools %v: no %s", toolNames(t, s.cs), NoopTool)
	}
	if m := s.call(t, NoopTool, nil); len(m) != 0 {
		t.Fatalf("noop answered %v, not {}", m)
	}
	if m := s.call(t, "remember", map[string]any{"text": "a write without fsync still lands"}); m["created"] != true {
		t.Fatalf("remember: %v", m)
	}
	s.cs.Close()
	if err := s.wait(t); err != nil {
		t.Fatalf("serve: %v; stderr %q", err, s.stderr.String())
	}
	for _, f := range []string{cpu, mem} {
		if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
			t.Errorf("profile %s: %v", filepath.Base(f), err)
		}
	}

	h := serveHTTP(t, env{}, "--data-dir", filepath.Join(dir, "data"), "--noop")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "cmd-test", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: h.url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: NoopTool}); err != nil || res.IsError {
		t.Fatalf("noop over HTTP: %v %v", err, res)
	}
}

// Without --noop the benchmark build serves what the product serves.
func TestBenchBuildServesNoopOnlyWhenAsked(t *testing.T) {
	s := serve(t, t.Context(), env{}, "--data-dir", t.TempDir())
	if names := toolNames(t, s.cs); slices.Contains(names, NoopTool) || len(names) != 7 {
		t.Fatalf("tools %v", names)
	}
}
