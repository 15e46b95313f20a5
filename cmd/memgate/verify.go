package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/server"
)

// verifyTimeout bounds a whole verify run.
const verifyTimeout = 30 * time.Second

type verifyCmd struct{}

// Run starts this binary's `serve` over stdio in a temporary data folder,
// with none of the MEMGATE_ variables of the environment (the check is of
// the binary, not of a configuration), and goes through every tool as an
// MCP client would. It prints one line: ok with the tool count and the time
// taken on stdout, or the failing step on stderr.
func (c *verifyCmd) Run(a *app) error {
	start := time.Now()
	tools, step, err := verify(a.ctx)
	if err != nil {
		fmt.Fprintf(a.stderr, "memgate verify: failed at %s: %s\n", step, oneLine(err.Error()))
		return &verifyError{step: step}
	}
	_, err = fmt.Fprintf(a.stdout, "memgate verify: ok (%d tools, %dms)\n", tools, time.Since(start).Milliseconds())
	return err
}

// verifyMemory is the memory verify writes, finds and forgets.
const (
	verifyID    = "memgate-verify"
	verifyText  = "The memgate installation check wrote this memory about a purple giraffe."
	verifyQuery = "purple giraffe"
)

// verify returns the number of tools served, or the step that failed and why.
func verify(ctx context.Context) (tools int, step string, err error) {
	ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	step = "start"
	exe, err := os.Executable()
	if err != nil {
		return 0, step, err
	}
	dir, err := os.MkdirTemp("", "memgate-verify-*")
	if err != nil {
		return 0, step, err
	}
	defer os.RemoveAll(dir)

	cmd := exec.Command(exe, "serve", "--data-dir", dir, "--namespace", "verify", "--log", "warn")
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, envPrefix) })
	stderr := &lastLine{}
	cmd.Stderr = stderr
	step = "initialize"
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "memgate-verify", Version: moduleVersion()}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		return 0, step, withServerLine(err, stderr)
	}
	closed := false
	defer func() {
		if !closed {
			cs.Close()
		}
	}()

	v := &verifier{ctx: ctx, cs: cs}
	for _, s := range []struct {
		name string
		fn   func() error
	}{
		{"tools/list", func() error { return v.listTools(&tools) }},
		{"remember", v.remember},
		{"get", v.get},
		{"search", v.search},
		{"list", v.list},
		{"stats", v.stats},
		{"export", v.export},
		{"forget", v.forget},
		{"get after forget", v.gone},
	} {
		step = s.name
		if err := s.fn(); err != nil {
			return 0, step, withServerLine(err, stderr)
		}
	}
	step = "shutdown"
	closed = true
	if err := cs.Close(); err != nil {
		return 0, step, withServerLine(err, stderr)
	}
	return tools, "", nil
}

// verifier holds the session of one verify run.
type verifier struct {
	ctx context.Context
	cs  *mcp.ClientSession
}

func (v *verifier) listTools(n *int) error {
	res, err := v.cs.ListTools(v.ctx, nil)
	if err != nil {
		return err
	}
	var missing []string
	for _, name := range server.ToolNames {
		if !slices.ContainsFunc(res.Tools, func(t *mcp.Tool) bool { return t.Name == name && t.OutputSchema != nil }) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("tools missing or without an output schema: %s", strings.Join(missing, ", "))
	}
	*n = len(res.Tools)
	return nil
}

// call calls a tool that must succeed and decodes its structured content,
// after checking that the text content carries the same JSON.
func (v *verifier) call(name string, args map[string]any, out any) (*mcp.CallToolResult, error) {
	res, err := v.cs.CallTool(v.ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, err
	}
	if res.IsError {
		return nil, resultError(res)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("structured content does not decode: %w", err)
	}
	return res, nil
}

type verifyMemory struct {
	ID      string `json:"id"`
	Text    string `json:"text"`
	Version int64  `json:"version"`
}

func (v *verifier) remember() error {
	var r struct {
		Memory  verifyMemory `json:"memory"`
		Created bool         `json:"created"`
	}
	if _, err := v.call(server.ToolRemember, map[string]any{"id": verifyID, "text": verifyText,
		"title": "Installation check", "tags": []string{"verify"}}, &r); err != nil {
		return err
	}
	if !r.Created || r.Memory.ID != verifyID || r.Memory.Text != verifyText || r.Memory.Version < 1 {
		return errors.New("the stored memory is not the one sent")
	}
	return nil
}

func (v *verifier) get() error {
	var r struct {
		Memory verifyMemory `json:"memory"`
	}
	if _, err := v.call(server.ToolGet, map[string]any{"id": verifyID}, &r); err != nil {
		return err
	}
	if r.Memory.Text != verifyText {
		return errors.New("the text read back differs from the text written")
	}
	return nil
}

func (v *verifier) search() error {
	var r struct {
		Hits []verifyMemory `json:"hits"`
	}
	if _, err := v.call(server.ToolSearch, map[string]any{"query": verifyQuery}, &r); err != nil {
		return err
	}
	if len(r.Hits) != 1 || r.Hits[0].ID != verifyID {
		return fmt.Errorf("%d hits, want the one memory written", len(r.Hits))
	}
	return nil
}

func (v *verifier) list() error {
	var r struct {
		Memories []verifyMemory `json:"memories"`
	}
	if _, err := v.call(server.ToolList, map[string]any{}, &r); err != nil {
		return err
	}
	if len(r.Memories) != 1 || r.Memories[0].ID != verifyID {
		return fmt.Errorf("%d memories listed, want the one written", len(r.Memories))
	}
	return nil
}

func (v *verifier) stats() error {
	var r struct {
		Namespace string `json:"namespace"`
		Count     int64  `json:"count"`
	}
	if _, err := v.call(server.ToolStats, map[string]any{}, &r); err != nil {
		return err
	}
	if r.Count != 1 || r.Namespace != "verify" {
		return fmt.Errorf("count %d in namespace %q, want 1 in verify", r.Count, r.Namespace)
	}
	return nil
}

func (v *verifier) export() error {
	var r struct {
		Count int `json:"count"`
	}
	res, err := v.call(server.ToolExport, map[string]any{}, &r)
	if err != nil {
		return err
	}
	if r.Count != 1 || len(res.Content) == 0 {
		return fmt.Errorf("exported %d memories, want 1", r.Count)
	}
	lines, ok := res.Content[0].(*mcp.TextContent)
	if !ok || !strings.Contains(lines.Text, verifyText) {
		return errors.New("the export does not hold the memory")
	}
	return nil
}

func (v *verifier) forget() error {
	var r struct {
		Forgotten bool `json:"forgotten"`
	}
	if _, err := v.call(server.ToolForget, map[string]any{"id": verifyID}, &r); err != nil {
		return err
	}
	if !r.Forgotten {
		return errors.New("forget did not say forgotten")
	}
	return nil
}

func (v *verifier) gone() error {
	res, err := v.cs.CallTool(v.ctx, &mcp.CallToolParams{Name: server.ToolGet, Arguments: map[string]any{"id": verifyID}})
	if err != nil {
		return err
	}
	var te *toolError
	if !errors.As(resultError(res), &te) || te.Code != "not_found" {
		return errors.New("a forgotten memory can still be read")
	}
	return nil
}

// lastLine keeps the last line the server wrote on stderr, to say why it
// stopped.
type lastLine struct {
	mu   sync.Mutex
	line string
	part []byte
}

func (l *lastLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, p...)
	for {
		i := slices.Index(l.part, '\n')
		if i < 0 {
			break
		}
		if s := strings.TrimSpace(string(l.part[:i])); s != "" {
			l.line = s
		}
		l.part = l.part[i+1:]
	}
	if len(l.part) > 4096 {
		l.part = l.part[len(l.part)-4096:]
	}
	return len(p), nil
}

func (l *lastLine) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := strings.TrimSpace(string(l.part)); s != "" {
		return s
	}
	return l.line
}

func withServerLine(err error, stderr *lastLine) error {
	if s := stderr.String(); s != "" {
		return fmt.Errorf("%w (server said: %s)", err, s)
	}
	return err
}
