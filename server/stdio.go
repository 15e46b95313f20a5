package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxStdioLine bounds one message on stdin, as the SDK's own framing does.
const maxStdioLine = mcp.DefaultMaxLineLength

// drainTimeout bounds the wait, once stdin has ended, for the answers to the
// calls already read.
const drainTimeout = 30 * time.Second

// RunStdio serves one client over in and out (newline-delimited JSON-RPC)
// until in reaches its end, which is a clean return (nil), or ctx is done,
// which is one too. Only protocol is ever written to out.
//
// Two things differ from the SDK's own stdio loop. The SDK ends a session at
// the first line it cannot decode; here a line that is not JSON is answered
// with -32700, a JSON value that is not a JSON-RPC message with -32600, and
// the session goes on. And the SDK cancels the calls in flight when its
// input ends; here the end of in waits (up to drainTimeout) for the answers
// to every call already read, so `printf ... | memgate` gets all of them.
func (s *Server) RunStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	lw := &lockedWriter{w: out}
	calls := newInflight()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(filterLines(ctx, in, pw, lw, calls)) }()
	err := s.mcp.Run(ctx, &mcp.IOTransport{Reader: pr, Writer: answerCounter{lw, calls, int64(s.maxReply)}})
	pr.Close() // the filter stops at its next line
	switch {
	case err == nil, ctx.Err() != nil, errors.Is(err, io.EOF), errors.Is(err, mcp.ErrConnectionClosed):
		return nil
	}
	return err
}

// lockedWriter lets the filter answer a bad line without cutting into a
// message the SDK is writing (the SDK writes each message in one call).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// answerCounter is the SDK's side of stdout: it counts the responses that
// go out, so the filter knows when every call read has its answer, and
// bounds the answer to a batch.
type answerCounter struct {
	w     *lockedWriter
	calls *inflight
	limit int64 // the bound of a batch's answers together
}

func (a answerCounter) Write(p []byte) (int, error) {
	if b := bytes.TrimSpace(p); len(b) > 0 && b[0] == '[' {
		return a.writeBatch(p, b)
	}
	n, err := a.w.Write(p)
	if isResponse(p) {
		a.calls.add(-1)
	}
	return n, err
}

// writeBatch writes the SDK's answer to a batch (the 2025-03-26 revision),
// which over stdio runs whole before it answers: within the bound as it
// is, past it as an error to each call, saying that it ran.
func (a answerCounter) writeBatch(p, b []byte) (int, error) {
	var answers []struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal(b, &answers)
	defer a.calls.add(-len(answers))
	if int64(len(b)) <= a.limit {
		return a.w.Write(p)
	}
	out := []byte{'['}
	for i, ans := range answers {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, batchError(ans.ID, errBatchRan)...)
	}
	if _, err := a.w.Write(append(out, ']', '\n')); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (answerCounter) Close() error { return nil }

// isResponse reports whether p, one message as the SDK encodes it, is a
// response: {"jsonrpc":"2.0","id":ID, then no "method". (The SDK writes the
// fields in that order; TestRunStdioSurvivesBadLines would notice a change.)
func isResponse(p []byte) bool {
	rest, ok := bytes.CutPrefix(p, []byte(`{"jsonrpc":"2.0","id":`))
	if !ok || len(rest) == 0 {
		return false
	}
	if rest[0] == '"' {
		i := 1
		for i < len(rest) && rest[i] != '"' {
			if rest[i] == '\\' {
				i++
			}
			i++
		}
		if i >= len(rest) {
			return false
		}
		rest = rest[i+1:]
	} else if i := bytes.IndexByte(rest, ','); i >= 0 {
		rest = rest[i:]
	}
	return !bytes.HasPrefix(rest, []byte(`,"method"`))
}

// inflight counts the calls read and not yet answered.
type inflight struct {
	mu      sync.Mutex
	n       int
	changed chan struct{} // closed, and replaced, at every change
}

func newInflight() *inflight { return &inflight{changed: make(chan struct{})} }

func (f *inflight) add(d int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n += d
	close(f.changed)
	f.changed = make(chan struct{})
}

// wait returns once no call is in flight, ctx is done, or after timeout.
func (f *inflight) wait(ctx context.Context, timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		n, changed := f.n, f.changed
		f.mu.Unlock()
		if n <= 0 {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		}
	}
}

// filterLines copies the messages of in to sdk, one per line, and answers
// the lines that are not messages on out itself. At the end of in it waits
// for the calls in flight, then returns nil.
func filterLines(ctx context.Context, in io.Reader, sdk, out io.Writer, calls *inflight) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), maxStdioLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		answer, call := checkLine(line)
		if answer != nil {
			b, err := jsonrpc.EncodeMessage(answer)
			if err == nil {
				_, err = out.Write(append(b, '\n'))
			}
			if err != nil {
				return err
			}
			continue
		}
		if call {
			calls.add(1)
		}
		if line[0] == '[' {
			calls.add(batchCalls(line)) // answered together, in one array
		}
		if _, err := sdk.Write(append(line, '\n')); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	calls.wait(ctx, drainTimeout)
	return nil
}

// batchCalls is the number of calls in a batch checkLine let through.
func batchCalls(line []byte) int {
	msgs, _ := splitBatch(line)
	n := 0
	for _, m := range msgs {
		if _, call := checkMessage(m); call {
			n++
		}
	}
	return n
}

// checkLine returns the error response to a line that is not a JSON-RPC
// message memgate accepts (nil to hand the line to the SDK; see
// checkMessage), and whether the line is a call the SDK will answer. A
// batch (the 2025-03-26 revision) of more than MaxBatch messages, or with
// one that checkMessage refuses, is refused whole; a batch is not counted.
func checkLine(line []byte) (*jsonrpc.Response, bool) {
	if line[0] != '[' {
		return checkMessage(line)
	}
	if err := checkBatch(line); err != nil {
		return &jsonrpc.Response{Error: err}, false
	}
	return nil, false
}
