package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/server/message"
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
	sdk := &mcp.IOTransport{Reader: pr, Writer: batchBound{lw, int64(s.maxReply)}}
	// The calls' contexts come from this one: their spans say pipe.
	err := s.mcp.Run(context.WithValue(ctx, transportKey{}, true), answerCounter{sdk, calls, s.obs.tracer != nil})
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

// answerCounter wraps the SDK's stdio transport as its LoggingTransport
// does, to see each message the server sends: every response is one call
// answered, so the filter knows when every call read has its answer. A call
// the session refuses before initialize (which the SDK answers with code 0,
// quoting the method) gets -32600 and a fixed message. When spans are on,
// each call read carries its JSON-RPC id to its span (RequestIDHeader).
type answerCounter struct {
	mcp.Transport
	calls  *inflight
	traced bool
}

func (a answerCounter) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := a.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return countingConn{c, a.calls, a.traced}, nil
}

type countingConn struct {
	mcp.Connection
	calls  *inflight
	traced bool
}

func (c countingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && c.traced && req.IsCall() && req.Extra == nil {
		req.Extra = stdioExtra(req.ID)
	}
	return msg, err
}

// errNotInitialized answers a call that comes before initialize.
var errNotInitialized = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: the session is not initialized"}

func (c countingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return c.Connection.Write(ctx, msg)
	}
	var rpc *jsonrpc.Error
	if resp.Error != nil && (!errors.As(resp.Error, &rpc) || rpc.Code == 0) {
		// An error no middleware saw: the SDK's session refusing a call
		// before initialize, or one without a code.
		e := errNotInitialized
		if !strings.Contains(resp.Error.Error(), "during session initialization") {
			e = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fixedMessages[jsonrpc.CodeInternalError]}
		}
		resp = &jsonrpc.Response{ID: resp.ID, Error: e}
	}
	defer c.calls.add(-1)
	return c.Connection.Write(ctx, resp)
}

// batchBound is the SDK's side of stdout. It bounds the answer to a batch
// (the 2025-03-26 revision), which over stdio runs whole before it answers
// in one array: within the bound as it is, past it as an error to each
// call, saying that it ran.
type batchBound struct {
	w     *lockedWriter
	limit int64 // the bound of a batch's answers together
}

func (a batchBound) Write(p []byte) (int, error) {
	b := bytes.TrimSpace(p)
	if len(b) == 0 || b[0] != '[' || int64(len(b)) <= a.limit {
		return a.w.Write(p)
	}
	var answers []struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal(b, &answers)
	out := []byte{'['}
	for i, ans := range answers {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, message.BatchError(ans.ID, message.ErrBatchRan)...)
	}
	if _, err := a.w.Write(append(out, ']', '\n')); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (batchBound) Close() error { return nil }

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
	msgs, _ := message.SplitBatch(line)
	n := 0
	for _, m := range msgs {
		if _, call := message.Check(m); call {
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
		return message.Check(line)
	}
	if err := message.CheckBatch(line); err != nil {
		return &jsonrpc.Response{Error: err}, false
	}
	return nil, false
}
