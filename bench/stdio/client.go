package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is one MCP server process spoken to in raw JSON-RPC lines over its
// stdin and stdout, one call in flight at a time.
type child struct {
	name   string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *tailBuffer
	nextID int64
	buf    []byte // the request being written
	// lastBytes is the size of the last response line read, newline
	// included.
	lastBytes int

	closeOnce sync.Once
	closeErr  error
}

// startChild starts argv with extra environment variables env and returns
// once the process runs (before initialize).
func startChild(name string, argv, env []string) (*child, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("%s: no command", name)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	stderr := &tailBuffer{max: 4 << 10}
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &child{name: name, cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20), stderr: stderr}, nil
}

// pid is the server's process id, for /proc.
func (c *child) pid() int { return c.cmd.Process.Pid }

// initialize runs the MCP handshake and returns the latency of initialize.
func (c *child) initialize() (time.Duration, error) {
	_, d, err := c.request("initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "memgate-bench-stdio", "version": "0.1"},
	})
	if err != nil {
		return 0, err
	}
	return d, c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
}

// callTool runs tools/call and returns the result (its structuredContent
// when there is one) and the latency: from just before the request is
// written to just after the line of its response is read. A tool error
// (isError) is an error.
func (c *child) callTool(name string, args any) (json.RawMessage, time.Duration, error) {
	res, d, err := c.request("tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		return nil, d, err
	}
	var r struct {
		IsError           bool            `json:"isError"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, d, fmt.Errorf("%s: %s: result: %w", c.name, name, err)
	}
	if r.IsError {
		return nil, d, fmt.Errorf("%s: %s: tool error%s", c.name, name, errorCode(r.StructuredContent))
	}
	if len(r.StructuredContent) > 0 {
		return r.StructuredContent, d, nil
	}
	return res, d, nil
}

// errorCode returns ": <code>" for memgate's error envelope. The message
// is left out: this harness never prints what a server says about a call,
// in case it quotes the memory.
func errorCode(sc json.RawMessage) string {
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(sc, &env) == nil && env.Error.Code != "" {
		return ": " + env.Error.Code
	}
	return ""
}

type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code int `json:"code"`
	} `json:"error"`
}

// request sends one request and waits for its response, skipping the
// server's notifications and refusing its requests.
func (c *child) request(method string, params any) (json.RawMessage, time.Duration, error) {
	c.nextID++
	id := c.nextID
	req := struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int64  `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", id, method, params}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, 0, err
	}
	c.buf = append(append(c.buf[:0], b...), '\n')
	want := strconv.FormatInt(id, 10)

	start := time.Now()
	if _, err := c.in.Write(c.buf); err != nil {
		return nil, 0, c.failure(method, err)
	}
	for {
		line, err := c.out.ReadBytes('\n')
		end := time.Now()
		if err != nil {
			return nil, 0, c.failure(method, err)
		}
		var m message
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, 0, fmt.Errorf("%s: %s: a line that is not JSON-RPC (%d bytes)", c.name, method, len(line))
		}
		switch {
		case m.Method != "" && len(m.ID) > 0: // a request from the server
			if err := c.send(map[string]any{"jsonrpc": "2.0", "id": m.ID,
				"error": map[string]any{"code": -32601, "message": "not supported by the benchmark"}}); err != nil {
				return nil, 0, c.failure(method, err)
			}
			continue
		case m.Method != "" || string(m.ID) != want: // a notification, or not ours
			continue
		}
		c.lastBytes = len(line)
		if m.Error != nil {
			return nil, end.Sub(start), fmt.Errorf("%s: %s: JSON-RPC error %d", c.name, method, m.Error.Code)
		}
		return m.Result, end.Sub(start), nil
	}
}

func (c *child) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = c.in.Write(append(b, '\n'))
	return err
}

// failure wraps a broken pipe with the end of the server's stderr.
func (c *child) failure(method string, err error) error {
	return fmt.Errorf("%s: %s: %w; stderr: %s", c.name, method, err, strings.TrimSpace(c.stderr.String()))
}

// signal sends sig to the server.
func (c *child) signal(sig syscall.Signal) error { return c.cmd.Process.Signal(sig) }

// close ends the server's stdin and waits for it to exit, which for memgate
// includes flushing its stores; after timeout it is killed. Only the first
// call does anything; later ones return its error.
func (c *child) close(timeout time.Duration) error {
	c.closeOnce.Do(func() { c.closeErr = c.shutdown(timeout) })
	return c.closeErr
}

func (c *child) shutdown(timeout time.Duration) error {
	c.in.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: exit: %w; stderr: %s", c.name, err, strings.TrimSpace(c.stderr.String()))
		}
		return nil
	case <-time.After(timeout):
		c.cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s: did not exit within %s of the end of its input", c.name, timeout)
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = bytes.Clone(t.b[over:])
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
