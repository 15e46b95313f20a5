package driver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Stateless is the protocol revision without initialize or sessions.
const Stateless = "2026-07-28"

// NewHTTPClient returns a client that keeps up to conns connections to one
// host alive, so each worker keeps its own.
func NewHTTPClient(conns int) *http.Client {
	return &http.Client{
		Timeout: time.Minute,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			MaxConnsPerHost:     conns,
			IdleConnTimeout:     time.Minute,
		},
	}
}

// Session is one client of a streamable HTTP endpoint: with a revision up
// to 2025-11-25 it holds an Mcp-Session-Id from initialize; with Stateless
// every POST stands alone. It is not safe for concurrent use.
type Session struct {
	URL     string
	Version string
	client  *http.Client
	id      string
	nextID  atomic.Int64
	// LastBytes is the size of the last response body read.
	LastBytes int
	light     bool
}

// Open starts a session at revision version (Stateless: no handshake).
func Open(ctx context.Context, client *http.Client, url, version string) (*Session, error) {
	s := &Session{URL: url, Version: version, client: client}
	if version == Stateless {
		return s, nil
	}
	if _, _, err := s.Call(ctx, "initialize", initializeParams(version)); err != nil {
		return nil, err
	}
	return s, s.notify(ctx, "notifications/initialized")
}

// CallTool runs tools/call; see ToolResult.
func (s *Session) CallTool(ctx context.Context, name string, args any) (json.RawMessage, time.Duration, error) {
	res, d, err := s.call(ctx, "tools/call", name, map[string]any{"name": name, "arguments": args})
	if err != nil {
		return nil, d, err
	}
	body, err := ToolResult(res)
	return body, d, err
}

// CallToolCheck runs tools/call like CallTool but reads the answer in one
// pass, only for whether it is an error: the load generator's path, where
// decoding every result would cost the shared CPU more than the server.
func (s *Session) CallToolCheck(ctx context.Context, name string, args any) (time.Duration, error) {
	s.light = true
	defer func() { s.light = false }()
	res, d, err := s.call(ctx, "tools/call", name, map[string]any{"name": name, "arguments": args})
	if err == nil && res != nil {
		// An event stream was read whole: look at the result.
		_, err = ToolResult(res)
	}
	return d, err
}

// Call sends one request and returns its result and latency.
func (s *Session) Call(ctx context.Context, method string, params map[string]any) (json.RawMessage, time.Duration, error) {
	return s.call(ctx, method, "", params)
}

// HTTPStatusError is a response whose status is not 2xx.
type HTTPStatusError struct{ Status int }

func (e *HTTPStatusError) Error() string { return "HTTP status " + strconv.Itoa(e.Status) }

func (s *Session) post(ctx context.Context, method, name string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if method != "initialize" {
		req.Header.Set("Mcp-Protocol-Version", s.Version)
	}
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
	if s.Version == Stateless && !strings.HasPrefix(method, "notifications/") {
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
	}
	return s.client.Do(req)
}

func (s *Session) call(ctx context.Context, method, name string, params map[string]any) (json.RawMessage, time.Duration, error) {
	if s.Version == Stateless {
		// Without a session, every request carries what initialize would
		// have said.
		params["_meta"] = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    Stateless,
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "memgate-bench", "version": "0.1"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		}
	}
	id := s.nextID.Add(1)
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	resp, err := s.post(ctx, method, name, body)
	if err != nil {
		return nil, time.Since(start), err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		io.Copy(io.Discard, resp.Body)
		return nil, time.Since(start), &HTTPStatusError{resp.StatusCode}
	}
	if method == "initialize" {
		s.id = resp.Header.Get("Mcp-Session-Id")
	}
	if s.light && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		err := checkResponse(resp)
		return nil, time.Since(start), err
	}
	m, n, err := readResponse(resp, id)
	d := time.Since(start)
	s.LastBytes = n
	if err != nil {
		return nil, d, err
	}
	if m.Error != nil {
		return nil, d, &RPCError{m.Error.Code}
	}
	return m.Result, d, nil
}

// checkResponse reads a JSON response in one pass and returns its error:
// a JSON-RPC error, or a tool error with isError.
func checkResponse(resp *http.Response) error {
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var m struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
		Result struct {
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return errors.New("a response body that is not JSON-RPC")
	}
	if m.Error != nil {
		return &RPCError{m.Error.Code}
	}
	if m.Result.IsError {
		var full message
		json.Unmarshal(b, &full)
		_, err := ToolResult(full.Result)
		return err
	}
	return nil
}

// readResponse reads the JSON-RPC response with id from a JSON body or an
// event stream.
func readResponse(resp *http.Response, id int64) (*message, int, error) {
	want := strconv.FormatInt(id, 10)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, len(b), err
		}
		var m message
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, len(b), errors.New("a response body that is not JSON-RPC")
		}
		return &m, len(b), nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	n := 0
	for sc.Scan() {
		line := sc.Bytes()
		n += len(line) + 1
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		var m message
		if json.Unmarshal(bytes.TrimSpace(data), &m) != nil || m.Method != "" || string(m.ID) != want {
			continue
		}
		return &m, n, nil
	}
	if err := sc.Err(); err != nil {
		return nil, n, err
	}
	return nil, n, errors.New("the event stream ended without the response")
}

func (s *Session) notify(ctx context.Context, method string) error {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method})
	resp, err := s.post(ctx, method, "", body)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return &HTTPStatusError{resp.StatusCode}
	}
	return nil
}

// Close ends a stateful session with DELETE; errors are ignored.
func (s *Session) Close(ctx context.Context) {
	if s.id == "" {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.URL, nil)
	if err != nil {
		return
	}
	req.Header.Set("Mcp-Session-Id", s.id)
	req.Header.Set("Mcp-Protocol-Version", s.Version)
	if resp, err := s.client.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// Server is an HTTP server process that prints "... listening on URL" on
// its stdout once bound.
type Server struct {
	Name   string
	URL    string
	cmd    *exec.Cmd
	stderr *tailBuffer
	waitMu sync.Mutex
	waited bool
	err    error
}

// StartServer starts argv and waits up to timeout for the line that names
// its URL.
func StartServer(name string, argv, env []string, timeout time.Duration) (*Server, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	stderr := &tailBuffer{max: 8 << 10}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := &Server{Name: name, cmd: cmd, stderr: stderr}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if _, url, ok := strings.Cut(line, " listening on "); ok {
				select {
				case found <- strings.TrimSpace(url):
				default:
				}
			}
		}
	}()
	select {
	case s.URL = <-found:
		return s, nil
	case <-time.After(timeout):
		s.Kill()
		return nil, fmt.Errorf("%s: no listening line within %s; stderr: %s", name, timeout, strings.TrimSpace(stderr.String()))
	}
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Signal sends sig to the server.
func (s *Server) Signal(sig syscall.Signal) error { return s.cmd.Process.Signal(sig) }

// Stderr is the end of what the server wrote on stderr.
func (s *Server) Stderr() string { return strings.TrimSpace(s.stderr.String()) }

// Stop sends SIGTERM and waits up to timeout for the exit, then kills it.
// It returns the exit error (nil for status 0).
func (s *Server) Stop(timeout time.Duration) error {
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: exit: %w; stderr: %s", s.Name, err, s.Stderr())
		}
		return nil
	case <-time.After(timeout):
		s.Kill()
		return fmt.Errorf("%s: did not stop within %s of SIGTERM", s.Name, timeout)
	}
}

// Kill ends the server with SIGKILL and reaps it.
func (s *Server) Kill() {
	s.cmd.Process.Kill()
	s.wait()
}

func (s *Server) wait() error {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	if !s.waited {
		s.err, s.waited = s.cmd.Wait(), true
	}
	return s.err
}
