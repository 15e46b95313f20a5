package driver

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

// Stdio is one MCP server process spoken to in raw JSON-RPC lines over its
// stdin and stdout. Call keeps one request in flight; Pipeline writes many
// before reading their answers. It is not safe for concurrent use.
type Stdio struct {
	Name   string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *tailBuffer
	nextID int64
	buf    []byte
	// LastBytes is the size of the last response line read.
	LastBytes int
	// LastRead is how long Call's last call took to the read of its
	// response line, before the client decoded it: the latency Call
	// returns includes that decoding (json.Unmarshal of the whole line).
	LastRead time.Duration
	start    time.Time

	closeOnce sync.Once
	closeErr  error
}

// StartStdio starts argv in folder dir ("" for this one) with env added to
// this process's environment, and returns once it runs (before initialize).
func StartStdio(name string, argv, env []string, dir string) (*Stdio, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("%s: no command", name)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = dir
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
	return &Stdio{Name: name, cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20), stderr: stderr}, nil
}

// Pid is the server's process id, for /proc.
func (c *Stdio) Pid() int { return c.cmd.Process.Pid }

// Initialize runs the MCP handshake at revision 2025-06-18.
func (c *Stdio) Initialize() error {
	_, _, err := c.Call("initialize", initializeParams("2025-06-18"))
	if err != nil {
		return err
	}
	return c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
}

func initializeParams(version string) map[string]any {
	return map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "memgate-bench", "version": "0.1"},
	}
}

// CallTool runs tools/call and returns what ToolResult makes of its result,
// and the latency.
func (c *Stdio) CallTool(name string, args any) (json.RawMessage, time.Duration, error) {
	res, d, err := c.Call("tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		return nil, d, err
	}
	body, err := ToolResult(res)
	if err != nil {
		return nil, d, fmt.Errorf("%s: %s: %w", c.Name, name, err)
	}
	return body, d, nil
}

type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code int `json:"code"`
	} `json:"error"`
}

func (c *Stdio) encode(method string, params any) (int64, error) {
	c.nextID++
	req := struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int64  `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", c.nextID, method, params}
	b, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	c.buf = append(append(c.buf, b...), '\n')
	return c.nextID, nil
}

// Call sends one request and waits for its response, skipping the server's
// notifications and refusing its requests.
func (c *Stdio) Call(method string, params any) (json.RawMessage, time.Duration, error) {
	c.buf = c.buf[:0]
	id, err := c.encode(method, params)
	if err != nil {
		return nil, 0, err
	}
	c.start = time.Now()
	if _, err := c.in.Write(c.buf); err != nil {
		return nil, 0, c.failure(method, err)
	}
	res, err := c.await(method, id)
	return res, time.Since(c.start), err
}

// Pipeline writes one tools/call per argument set at once, then reads every
// answer, and returns the results in order (an error for each that failed).
func (c *Stdio) Pipeline(tool string, args []any) ([]json.RawMessage, []error, error) {
	c.buf = c.buf[:0]
	first := c.nextID + 1
	for _, a := range args {
		if _, err := c.encode("tools/call", map[string]any{"name": tool, "arguments": a}); err != nil {
			return nil, nil, err
		}
	}
	if _, err := c.in.Write(c.buf); err != nil {
		return nil, nil, c.failure(tool, err)
	}
	res := make([]json.RawMessage, len(args))
	errs := make([]error, len(args))
	for seen := 0; seen < len(args); {
		m, err := c.next(tool)
		if err != nil {
			return nil, nil, err
		}
		id, err := strconv.ParseInt(string(m.ID), 10, 64)
		if err != nil || id < first || id >= first+int64(len(args)) {
			continue
		}
		i := id - first
		seen++
		if m.Error != nil {
			errs[i] = &RPCError{m.Error.Code}
			continue
		}
		res[i], errs[i] = ToolResult(m.Result)
	}
	return res, errs, nil
}

// next reads the next response line, answering server requests and
// skipping notifications.
func (c *Stdio) next(method string) (*message, error) {
	for {
		line, err := c.out.ReadBytes('\n')
		if err != nil {
			return nil, c.failure(method, err)
		}
		c.LastRead = time.Since(c.start)
		var m message
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("%s: %s: a line that is not JSON-RPC (%d bytes)", c.Name, method, len(line))
		}
		if m.Method != "" {
			if len(m.ID) > 0 {
				if err := c.send(map[string]any{"jsonrpc": "2.0", "id": m.ID,
					"error": map[string]any{"code": -32601, "message": "not supported by the benchmark"}}); err != nil {
					return nil, c.failure(method, err)
				}
			}
			continue
		}
		c.LastBytes = len(line)
		return &m, nil
	}
}

func (c *Stdio) await(method string, id int64) (json.RawMessage, error) {
	want := strconv.FormatInt(id, 10)
	for {
		m, err := c.next(method)
		if err != nil {
			return nil, err
		}
		if string(m.ID) != want {
			continue
		}
		if m.Error != nil {
			return nil, fmt.Errorf("%s: %s: %w", c.Name, method, &RPCError{m.Error.Code})
		}
		return m.Result, nil
	}
}

func (c *Stdio) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = c.in.Write(append(b, '\n'))
	return err
}

func (c *Stdio) failure(method string, err error) error {
	return fmt.Errorf("%s: %s: %w; stderr: %s", c.Name, method, err, strings.TrimSpace(c.stderr.String()))
}

// Signal sends sig to the server.
func (c *Stdio) Signal(sig syscall.Signal) error { return c.cmd.Process.Signal(sig) }

// Kill ends the server with SIGKILL and reaps it.
func (c *Stdio) Kill() {
	c.closeOnce.Do(func() {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	})
}

// Close ends the server's stdin and waits for it to exit (for memgate that
// includes flushing its stores); after timeout it is killed. Only the first
// call does anything.
func (c *Stdio) Close(timeout time.Duration) error {
	c.closeOnce.Do(func() { c.closeErr = c.shutdown(timeout) })
	return c.closeErr
}

func (c *Stdio) shutdown(timeout time.Duration) error {
	c.in.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: exit: %w; stderr: %s", c.Name, err, strings.TrimSpace(c.stderr.String()))
		}
		return nil
	case <-time.After(timeout):
		c.cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s: did not exit within %s of the end of its input", c.Name, timeout)
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
