package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/storage"
)

// verifyTimeout bounds a whole verify run.
const verifyTimeout = 30 * time.Second

// verifyCmd takes what a stdio serve takes.
type verifyCmd struct {
	Store  storeFlags  `embed:""`
	Server serverFlags `embed:""`
}

// Run checks the configuration it is given, then starts this binary's
// `serve` over stdio with that configuration's server settings (write
// mode, disabled tools, limits, encryption and its passphrase) on a
// temporary data folder, and goes through every tool it serves as an MCP
// client would. The configured data folder is checked for what serve needs
// of it (dataDirUsable); it is not made, and its stores are not touched. It
// prints one line: ok with the tool count and the time taken on stdout, or
// the failing step on stderr.
func (c *verifyCmd) Run(a *app) error {
	start := time.Now()
	tools, step, err := verify(a)
	if err != nil {
		fmt.Fprintf(a.stderr, "memgate verify: failed at %s: %s\n", step, oneLine(err.Error()))
		return &verifyError{step: step}
	}
	_, err = fmt.Fprintf(a.stdout, "memgate verify: ok (%d tools, %dms)\n", tools, time.Since(start).Milliseconds())
	return err
}

// verifyMemory is the memory verify writes, finds and forgets.
const (
	verifyID          = "memgate-verify"
	verifyCandidateID = "memgate-verify-candidate"
	verifyText        = "The memgate installation check wrote this memory about a purple giraffe."
	verifyQuery       = "purple giraffe"
	verifyNamespace   = "verify"
)

// verifyServeArgs are the flags of the serve that verify starts: the
// server settings of cfg, on dir.
func verifyServeArgs(cfg *Config, dir string) []string {
	args := []string{"serve", "--transport", "stdio", "--data-dir", dir,
		"--namespace-strategy", "fixed", "--namespace", verifyNamespace, "--log", "warn",
		"--write-mode", cfg.WriteMode,
		"--max-memory-bytes", strconv.Itoa(cfg.MaxMemoryBytes),
		"--max-response-bytes", strconv.Itoa(cfg.MaxResponseBytes)}
	for _, t := range cfg.DisableTool {
		args = append(args, "--disable-tool", t)
	}
	if cfg.AllowSecrets {
		args = append(args, "--allow-secrets")
	}
	if cfg.NamespaceArg {
		args = append(args, "--namespace-arg")
	}
	if cfg.Encrypt {
		args = append(args, "--encrypt", "--passphrase-env", cfg.PassphraseEnv)
	}
	return args
}

// servedTools are the tools a server of cfg lists.
func servedTools(cfg *Config) []string {
	var names []string
	for _, name := range server.ToolNames {
		off := slices.Contains(cfg.DisableTool, name) ||
			cfg.WriteMode == server.WriteReadOnly && (name == server.ToolRemember || name == server.ToolForget) ||
			cfg.WriteMode == server.WriteCandidate && name == server.ToolForget
		if !off {
			names = append(names, name)
		}
	}
	return names
}

// verify returns the number of tools served, or the step that failed and why.
func verify(a *app) (tools int, step string, err error) {
	ctx, cancel := context.WithTimeout(a.ctx, verifyTimeout)
	defer cancel()
	step = "data dir"
	if err := dataDirUsable(a.cfg.DataDir); err != nil {
		return 0, step, err
	}
	step = "encryption"
	if _, err := a.encryption(); err != nil {
		return 0, step, err
	}
	if a.cfg.shared() {
		// The database is checked (reachable, its schema this memgate's),
		// not written: the tools run on a temporary bbolt folder.
		step = "database"
		db, err := a.openDatabase()
		if err != nil {
			return 0, step, err
		}
		db.Close()
	}
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

	served := servedTools(a.cfg)
	writes := a.cfg.WriteMode == server.WriteFull && slices.Contains(served, server.ToolRemember)
	if !writes {
		// The server will not write the memory: it is there before it starts.
		step = "seed"
		if err := seedVerify(a, dir); err != nil {
			return 0, step, err
		}
	}

	cmd := exec.Command(exe, verifyServeArgs(a.cfg, dir)...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, envPrefix) })
	if a.cfg.Encrypt {
		cmd.Env = append(cmd.Env, a.cfg.PassphraseEnv+"="+a.getenv(a.cfg.PassphraseEnv))
	}
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

	v := &verifier{ctx: ctx, cs: cs, served: served}
	serves := func(name string) bool { return slices.Contains(served, name) }
	for _, s := range []struct {
		name string
		run  bool
		fn   func() error
	}{
		{"tools/list", true, func() error { return v.listTools(&tools) }},
		{"remember", writes, v.remember},
		{"remember a candidate", a.cfg.WriteMode == server.WriteCandidate && serves(server.ToolRemember), v.propose},
		{"get", serves(server.ToolGet), v.get},
		{"search", serves(server.ToolSearch), v.search},
		{"list", serves(server.ToolList), v.list},
		{"stats", serves(server.ToolStats), v.stats},
		{"export", serves(server.ToolExport), v.export},
		{"forget", serves(server.ToolForget), v.forget},
		{"get after forget", serves(server.ToolForget) && serves(server.ToolGet), v.gone},
	} {
		if !s.run {
			continue
		}
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

// dataDirUsable reports whether serve can keep its stores in dir: dir is a
// folder that takes a new file, or, when it is not there yet, the nearest
// folder above it is, so that serve can make it. It leaves dir as it was.
func dataDirUsable(dir string) error {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		switch {
		case err == nil && !fi.IsDir():
			return errors.New("the data folder, or a folder above it, is a file")
		case err == nil:
			f, err := os.CreateTemp(d, ".memgate-verify-*")
			if err != nil {
				return errors.New("the data folder cannot be written to")
			}
			f.Close()
			return os.Remove(f.Name())
		case !errors.Is(err, fs.ErrNotExist):
			return errors.New("the data folder cannot be read")
		case filepath.Dir(d) == d:
			return errors.New("no folder above the data folder exists")
		}
	}
}

// seedVerify writes the memory verify reads into the store of dir, with
// the encryption of the configuration, for a server that does not write.
func seedVerify(a *app, dir string) error {
	cfg := *a.cfg
	cfg.DataDir, cfg.Namespace, cfg.NamespaceStrategy, cfg.ProjectDir = dir, verifyNamespace, "fixed", ""
	seeder := *a
	seeder.cfg = &cfg
	return seeder.withStore(func(st *storage.Store, _ memgate.Namespace) error {
		_, _, err := st.Put(a.ctx, memgate.Write{ID: verifyID, Text: verifyText, Title: "Installation check", Tags: []string{"verify"}})
		return err
	})
}

// verifier holds the session of one verify run.
type verifier struct {
	ctx    context.Context
	cs     *mcp.ClientSession
	served []string // the tools the configuration serves
}

func (v *verifier) listTools(n *int) error {
	res, err := v.cs.ListTools(v.ctx, nil)
	if err != nil {
		return err
	}
	var missing []string
	for _, name := range v.served {
		if !slices.ContainsFunc(res.Tools, func(t *mcp.Tool) bool { return t.Name == name && t.OutputSchema != nil }) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("tools missing or without an output schema: %s", strings.Join(missing, ", "))
	}
	if len(res.Tools) != len(v.served) {
		return fmt.Errorf("%d tools listed, want the %d the configuration serves", len(res.Tools), len(v.served))
	}
	*n = len(res.Tools)
	return nil
}

// propose checks that remember, in candidate mode, keeps a candidate.
func (v *verifier) propose() error {
	var r struct {
		Memory    verifyMemory `json:"memory"`
		Candidate bool         `json:"candidate"`
	}
	if _, err := v.call(server.ToolRemember, map[string]any{"id": verifyCandidateID, "text": verifyText}, &r); err != nil {
		return err
	}
	if !r.Candidate || r.Memory.ID != verifyCandidateID {
		return errors.New("remember did not keep a candidate")
	}
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
