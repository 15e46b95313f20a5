package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

// served is one `memgate serve` run in-process, with a Go SDK client on
// its stdin and stdout.
type served struct {
	cs     *mcp.ClientSession
	stdin  io.Closer
	stderr *syncBuffer
	done   chan error
	stdout func() string // what was left on stdout after the client
}

// serve starts run(serve, args...) and connects a client to it.
func serve(t *testing.T, ctx context.Context, e env, args ...string) *served {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &served{stdin: inW, stderr: &syncBuffer{}, done: make(chan error, 1)}
	go func() {
		err := run(ctx, append([]string{"serve"}, args...), e.get, inR, outW, s.stderr)
		outW.Close()
		s.done <- err
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "cmd-test", Version: "1"}, nil).
		Connect(t.Context(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect: %v; stderr %q", err, s.stderr.String())
	}
	s.cs = cs
	t.Cleanup(func() { inW.Close() })
	return s
}

// wait returns run's error once it has returned.
func (s *served) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return")
		return nil
	}
}

func (s *served) call(t *testing.T, name string, args map[string]any) map[string]any {
	t.Helper()
	res, err := s.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: structured content %s", name, b)
	}
	if res.IsError {
		m["isError"] = true
	}
	return m
}

func TestServeOverStdio(t *testing.T) {
	dir := t.TempDir()
	s := serve(t, t.Context(), env{"MEMGATE_DATA_DIR": dir})
	if info := s.cs.InitializeResult().ServerInfo; info.Name != "memgate" {
		t.Fatalf("server info %+v", info)
	}
	tools, err := s.cs.ListTools(t.Context(), nil)
	if err != nil || len(tools.Tools) != 7 {
		t.Fatalf("tools: %v %v", tools, err)
	}
	m := s.call(t, "remember", map[string]any{"id": "k", "text": "kept across the restart"})
	if m["created"] != true {
		t.Fatalf("remember: %v", m)
	}
	if m := s.call(t, "get", map[string]any{"id": "nope"}); dig(m, "error", "code") != "not_found" || m["isError"] != true {
		t.Fatalf("get: %v", m)
	}
	// The client hangs up: stdin ends, serve exits cleanly, and the pool
	// has flushed and released the store.
	s.cs.Close()
	if err := s.wait(t); err != nil {
		t.Fatalf("serve after stdin closed: %v; stderr %q", err, s.stderr.String())
	}
	if s.stderr.String() != "" {
		t.Fatalf("stderr at --log warn: %q", s.stderr.String())
	}
	if m := mg(t, env{}, "", "get", "k", "--data-dir", dir).ok(t); dig(m, "memory", "text") != "kept across the restart" {
		t.Fatalf("after serve: %v", m)
	}
}

func TestServeStopsOnItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s := serve(t, ctx, env{}, "--data-dir", t.TempDir(), "--log", "info")
	s.call(t, "stats", nil)
	cancel() // as SIGINT or SIGTERM does
	if err := s.wait(t); err != nil {
		t.Fatalf("serve after cancel: %v", err)
	}
	if !strings.Contains(s.stderr.String(), "signal=true") {
		t.Fatalf("stderr %q", s.stderr.String())
	}
}

func TestServeOptionsReachTheServer(t *testing.T) {
	s := serve(t, t.Context(), env{"MEMGATE_DISABLE_TOOL": "export"}, "--data-dir", t.TempDir(),
		"--write-mode", "read-only", "--namespace-arg")
	tools, err := s.cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if _, ok := tool.InputSchema.(map[string]any)["properties"].(map[string]any)["namespace"]; !ok {
			t.Errorf("%s has no namespace argument", tool.Name)
		}
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "get,list,search,stats" {
		t.Fatalf("tools %v", names)
	}
	_, err = s.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "export", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "-32602") && !strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("a disabled tool: %v", err)
	}
}

func TestServeProjectStrategy(t *testing.T) {
	wd := filepath.Join(t.TempDir(), "My Project")
	if err := os.Mkdir(wd, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(wd)
	want, err := tenants.ProjectNamespace(wd)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, t.Context(), env{}, "--data-dir", t.TempDir(), "--namespace-strategy", "project")
	if ns := s.call(t, "stats", nil)["namespace"]; ns != string(want) || !strings.HasPrefix(string(want), "my-project-") {
		t.Fatalf("namespace %v, want %s", ns, want)
	}

	// --project-dir names the folder instead, for editors that start
	// servers elsewhere.
	other := filepath.Join(t.TempDir(), "Elsewhere")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	want, _ = tenants.ProjectNamespace(other)
	dd := store(t)
	if st := mg(t, env{"MEMGATE_PROJECT_DIR": other}, "", args(dd, "stats", "--namespace-strategy", "project")...).ok(t); st["namespace"] != string(want) {
		t.Fatalf("namespace %v, want %s", st["namespace"], want)
	}
	mg(t, env{}, "", args(dd, "stats", "--namespace-strategy", "project", "--project-dir", "${workspaceFolder}")...).
		fails(t, 2, "--project-dir: not a folder")
	mg(t, env{}, "", args(dd, "stats", "--project-dir", other)...).fails(t, 2, "--project-dir: only the project strategy")
}

func TestServeFailsAtOnceOnALockedStore(t *testing.T) {
	dir := t.TempDir()
	release := holdStore(t, filepath.Join(dir, "stores", "default", storage.FileName))
	defer release()
	start := time.Now()
	var stdout, stderr syncBuffer
	err := run(t.Context(), []string{"serve", "--data-dir", dir, "--log", "debug"}, env{}.get,
		strings.NewReader(""), &stdout, &stderr)
	if exitCode(err) == 0 {
		t.Fatal("serve on a locked store exited 0")
	}
	lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "store_locked") {
		t.Fatalf("stderr %q, want one line with store_locked", stderr.String())
	}
	if stdout.String() != "" {
		t.Fatalf("stdout %q", stdout.String())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
}

// TestLogsHoldNoContent runs a session at --log debug and looks for every
// value the client sent in what went to stderr.
func TestLogsHoldNoContent(t *testing.T) {
	const (
		text  = "zanzibar-quokka-7731 walked the harbour"
		id    = "id-marmalade-5520"
		title = "title-periwinkle-4410"
		query = "quokka harbour"
		tag   = "tag-tamarind-9902"
		topic = "topic-ocelot-3318"
	)
	dir := t.TempDir()
	s := serve(t, t.Context(), env{}, "--data-dir", dir, "--log", "debug", "--log-format", "json")
	s.call(t, "remember", map[string]any{"id": id, "text": text, "title": title, "tags": []string{tag},
		"metadata": map[string]any{"k": "meta-value-6631"}})
	s.call(t, "get", map[string]any{"id": id})
	s.call(t, "search", map[string]any{"query": query, "tags": []string{tag}})
	s.call(t, "list", map[string]any{"tags": []string{tag}})
	s.call(t, "remember", map[string]any{"id": id, "text": text, "if_version": 99})
	s.call(t, "remember", map[string]any{"text": "AKIAIOSFODNN7EXAMPLE " + text})
	if _, err := s.cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "memgate://memory/" + id}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "recall-context", Arguments: map[string]string{"topic": topic}}); err != nil {
		t.Fatal(err)
	}
	s.call(t, "forget", map[string]any{"id": id})
	s.call(t, "get", map[string]any{"id": id})
	s.cs.Close()
	if err := s.wait(t); err != nil {
		t.Fatal(err)
	}
	// The same at the command line.
	dd := []string{"--data-dir", dir, "--log", "debug"}
	r := mg(t, env{}, "", args(dd, "remember", text, "--id", id, "--title", title, "--tag", tag)...)
	r2 := mg(t, env{}, "", args(dd, "search", query)...)
	r3 := mg(t, env{}, `{"id":"`+id+`"}`, args(dd, "invoke", "get")...)
	r4 := mg(t, env{}, "", args(dd, "get", "missing-"+id)...)

	logs := s.stderr.String() + r.stderr + r2.stderr + r3.stderr + r4.stderr
	if strings.Count(logs, "mcp call") < 10 {
		t.Fatalf("too few log lines to judge:\n%s", logs)
	}
	for _, secret := range []string{"zanzibar", "quokka", id, "marmalade", title, tag, topic, "meta-value-6631", "AKIA"} {
		if strings.Contains(logs, secret) {
			t.Errorf("stderr holds %q:\n%s", secret, logs)
		}
	}
}

// A damaged store in the namespace serve starts with fails its own calls
// with unavailable; the server starts all the same and serves the other
// namespaces, and exits 0 at the end of its input.
func TestServeStartsOverADamagedStore(t *testing.T) {
	dir := t.TempDir()
	mg(t, env{}, "", "remember", "--data-dir", dir, "--namespace", "good", "--id", "kept", "a memory elsewhere").ok(t)
	file := filepath.Join(dir, "stores", "default", "memgate.db")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(strings.Repeat("not a store ", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"stats","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get","arguments":{"id":"kept","namespace":"good"}}}`,
	}, "\n") + "\n"
	r := mg(t, env{}, in, "serve", "--data-dir", dir, "--namespace-arg")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	byID := map[string]string{} // the calls run side by side: answers in any order
	for _, a := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal([]byte(a), &m)
		byID[string(m.ID)] = a
	}
	if len(byID) != 3 || !strings.Contains(byID["1"], `unavailable`) || !strings.Contains(byID["2"], "a memory elsewhere") {
		t.Fatalf("answers:\n%s", r.stdout)
	}
}
