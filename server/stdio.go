package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
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
//
// The connection is memgate's own (stdioConn), through the SDK's public
// Transport and Connection: each line is parsed once, by the check that
// decides whether the SDK may see it, and handed over decoded; each answer
// is written as the SDK encoded its result, without compacting it again.
func (s *Server) RunStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	lw := &lockedWriter{w: out}
	conn := newStdioConn(ctx, in, lw, int64(s.maxReply), s.obs.tracer != nil)
	// The calls' contexts come from this one: their spans say pipe.
	ctx2 := context.WithValue(context.WithValue(ctx, transportKey{}, true), stdioConnKey{}, conn)
	err := s.mcp.Run(ctx2, stdioTransport{conn})
	conn.Close() // the reader stops at its next line
	switch {
	case err == nil, ctx.Err() != nil, errors.Is(err, io.EOF), errors.Is(err, mcp.ErrConnectionClosed):
		return nil
	}
	return err
}

// lockedWriter lets the reader answer a bad line without cutting into a
// message the session is writing (each message is one Write).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// stdioTransport hands the SDK its one connection.
type stdioTransport struct{ c *stdioConn }

func (t stdioTransport) Connect(context.Context) (mcp.Connection, error) { return t.c, nil }

// stdioConn is the SDK's connection to a stdio client. A goroutine reads
// the lines of in, answers those that are not messages memgate accepts
// itself, and passes the others on decoded (message.Read); Read takes them.
// Every response is one call answered, so the reader knows, when in ends,
// when every call read has its answer. A call the session refuses before
// initialize (which the SDK answers with code 0, quoting the method) gets
// -32600 and a fixed message. When spans are on, each call read carries its
// JSON-RPC id to its span (RequestIDHeader).
//
// A batch (the 2025-03-26 revision) is taken as the SDK's own stdio
// connection takes it: its messages are read one by one, its answers
// gathered and written together in one array, within the bound of
// batchBound. A batch in a session of a later revision is refused with
// -32600 (where the SDK's own connection ends the session).
type stdioConn struct {
	out      *lockedWriter
	batchOut batchBound
	traced   bool
	calls    *inflight
	incoming chan lineOrErr

	closeOnce sync.Once
	closed    chan struct{}

	queue []jsonrpc.Message // the rest of the batch last read (reads are serial)

	requested string // the revision the first initialize read asks for (the reader's)

	mu      sync.Mutex
	batches map[jsonrpc.ID]*msgBatch
	tools   map[jsonrpc.ID]*toolCall        // the tools/call calls in flight
	extras  map[*mcp.RequestExtra]*toolCall // the same, by what their requests carry
}

// toolCall is a tools/call in flight: the Extra its request carries, by
// which encodeOnce finds it, and the answer's result once encoded. Outside
// a batch the result is encoded inside the whole answer line, in a buffer
// of answerBuffers (line), which Write writes as it is and gives back.
type toolCall struct {
	id     jsonrpc.ID
	extra  *mcp.RequestExtra
	result []byte
	line   *[]byte
}

// lineOrErr is one message the reader passes on, a batch's messages, or
// the error that ends the input.
type lineOrErr struct {
	msg   jsonrpc.Message
	batch []jsonrpc.Message
	err   error
}

// msgBatch gathers the answers to the calls of one batch, in order.
type msgBatch struct {
	unresolved map[jsonrpc.ID]int
	responses  []*jsonrpc.Response
	ids        []jsonrpc.ID // its calls', in flight until the array is written
}

func newStdioConn(ctx context.Context, in io.Reader, out *lockedWriter, maxReply int64, traced bool) *stdioConn {
	c := &stdioConn{out: out, batchOut: batchBound{out, maxReply}, traced: traced, calls: newInflight(),
		incoming: make(chan lineOrErr), closed: make(chan struct{})}
	go c.readLines(ctx, in)
	return c
}

// readLines reads in, one message per line, until its end, then waits for
// the calls in flight and reports io.EOF.
func (c *stdioConn) readLines(ctx context.Context, in io.Reader) {
	br := bufio.NewReaderSize(in, 64<<10)
	var buf []byte
	pass := func(v lineOrErr) bool {
		select {
		case c.incoming <- v:
			return true
		case <-c.closed:
			return false
		}
	}
	for {
		var tooLong bool
		var err error
		buf, tooLong, err = readLine(br, buf[:0], maxStdioLine)
		if err != nil {
			if err == io.EOF {
				c.calls.wait(ctx, drainTimeout)
			}
			pass(lineOrErr{err: err})
			return
		}
		if tooLong {
			if !c.refuse(&jsonrpc.Response{Error: errLineTooLong}) {
				return
			}
			continue
		}
		line := bytes.TrimSpace(buf)
		if len(line) == 0 {
			continue
		}
		// The messages keep slices of their line (params) while their
		// calls run: a line of its own, not the scanner's buffer.
		line = bytes.Clone(line)
		if line[0] == '[' {
			if !c.batchesAllowed() {
				if !c.refuse(&jsonrpc.Response{Error: message.ErrBatchRevision}) {
					return
				}
				continue
			}
			batch, refusal := message.ReadBatch(line)
			if refusal != nil {
				if !c.refuse(&jsonrpc.Response{Error: refusal}) {
					return
				}
				continue
			}
			var ids []jsonrpc.ID
			for _, m := range batch {
				if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() {
					ids = append(ids, req.ID)
				}
			}
			if !c.calls.room(ctx, c.closed, len(ids)) {
				return
			}
			if !c.calls.begin(ids...) { // answered together, in one array
				if !c.refuse(&jsonrpc.Response{Error: errBatchIDInFlight}) {
					return
				}
				continue
			}
			if !pass(lineOrErr{batch: batch}) {
				return
			}
			continue
		}
		msg, answer, call := message.Read(line)
		if answer != nil {
			if !c.refuse(answer) {
				return
			}
			continue
		}
		if call {
			c.noteInitialize(msg.(*jsonrpc.Request))
			id := msg.(*jsonrpc.Request).ID
			if !c.calls.room(ctx, c.closed, 1) {
				return
			}
			if !c.calls.begin(id) {
				if !c.refuse(&jsonrpc.Response{ID: id, Error: errIDInFlight}) {
					return
				}
				continue
			}
		}
		if !pass(lineOrErr{msg: msg}) {
			return
		}
	}
}

// noteInitialize keeps the revision the session's first initialize asks
// for (the reader's alone: it reads one line at a time).
func (c *stdioConn) noteInitialize(req *jsonrpc.Request) {
	if req.Method != "initialize" || c.requested != "" {
		return
	}
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(req.Params, &p) == nil && p.ProtocolVersion != "" {
		c.requested = p.ProtocolVersion
	}
}

// batchesAllowed reports whether the session's revision has batches: one
// before 2025-06-18 that the SDK speaks, which is then the revision it
// agrees (it answers any other with a later one), or none asked for yet
// (then every call of a batch is refused as coming before initialize).
// Deciding as the line is read, not when initialize is answered, gives a
// batch that follows initialize closely the same answer as one that
// follows it late.
func (c *stdioConn) batchesAllowed() bool {
	return c.requested == "" ||
		c.requested < revisionNoBatches && slices.Contains(mcp.SupportedProtocolVersions(), c.requested)
}

// errLineTooLong answers a line longer than maxStdioLine, which is read
// to its end and dropped: its id is not known.
var errLineTooLong = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
	Message: fmt.Sprintf("invalid request: a line of more than %d MiB", maxStdioLine>>20)}

// readLine appends to buf the next line of br, without its newline, and
// reports a line longer than max bytes as tooLong (read to its end,
// nothing of it kept). A last line without a newline is a line; io.EOF
// comes after it.
func readLine(br *bufio.Reader, buf []byte, max int) (line []byte, tooLong bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		switch {
		case tooLong:
		case len(buf)+len(frag) > max+2: // "\r\n" is no part of the line
			tooLong, buf = true, buf[:0]
		default:
			buf = append(buf, frag...)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && (len(buf) > 0 || tooLong):
		case err != nil:
			return buf, tooLong, err
		}
		buf = bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte{'\n'}), []byte{'\r'})
		if len(buf) > max {
			tooLong, buf = true, buf[:0]
		}
		return buf, tooLong, nil
	}
}

// A call whose id is that of a call still in flight would have no answer
// of its own: it is refused, as the SDK refuses it over HTTP, and so is a
// batch that repeats an id or one in flight.
var (
	errIDInFlight      = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: the id of a call in flight"}
	errBatchIDInFlight = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: a batch repeats an id, or the id of a call in flight"}
)

// refuse writes the answer to a line memgate refuses; false if out failed.
func (c *stdioConn) refuse(answer *jsonrpc.Response) bool {
	b, err := jsonrpc.EncodeMessage(answer)
	if err == nil {
		_, err = c.out.Write(append(b, '\n'))
	}
	if err != nil {
		c.Close()
		return false
	}
	return true
}

func (c *stdioConn) SessionID() string { return "" }

func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

// revisionNoBatches is the first protocol revision without JSON-RPC
// batches.
const revisionNoBatches = "2025-06-18"

func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(c.queue) > 0 {
		next := c.queue[0]
		c.queue = c.queue[1:]
		return c.took(next), nil
	}
	var v lineOrErr
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case v = <-c.incoming:
	case <-c.closed:
		return nil, io.EOF
	}
	if v.err != nil {
		return nil, v.err
	}
	if v.batch == nil {
		return c.took(v.msg), nil
	}
	// The reader let no batch in of a revision without batches, and none
	// whose ids repeat or are in flight.
	var batch *msgBatch
	for _, m := range v.batch {
		if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() {
			if batch == nil {
				batch = &msgBatch{unresolved: map[jsonrpc.ID]int{}}
			}
			batch.unresolved[req.ID] = len(batch.responses)
			batch.responses = append(batch.responses, nil)
			batch.ids = append(batch.ids, req.ID)
		}
	}
	if batch != nil {
		c.mu.Lock()
		if c.batches == nil {
			c.batches = map[jsonrpc.ID]*msgBatch{}
		}
		for id := range batch.unresolved {
			c.batches[id] = batch
		}
		c.mu.Unlock()
	}
	c.queue = v.batch[1:]
	return c.took(v.batch[0]), nil
}

// took notes what the session needs of a message read: a tool call's
// Extra, by which encodeOnce finds it, and, when spans are on, a call's id
// for its span.
func (c *stdioConn) took(m jsonrpc.Message) jsonrpc.Message {
	req, ok := m.(*jsonrpc.Request)
	if !ok || !req.IsCall() {
		return m
	}
	if c.traced && req.Extra == nil {
		req.Extra = stdioExtra(req.ID)
	}
	if req.Method == "tools/call" {
		extra, _ := req.Extra.(*mcp.RequestExtra)
		if extra == nil && req.Extra == nil {
			extra = &mcp.RequestExtra{}
			req.Extra = extra
		}
		c.mu.Lock()
		if _, dup := c.tools[req.ID]; extra != nil && !dup {
			if c.tools == nil {
				c.tools, c.extras = map[jsonrpc.ID]*toolCall{}, map[*mcp.RequestExtra]*toolCall{}
			}
			t := &toolCall{id: req.ID, extra: extra}
			c.tools[req.ID], c.extras[extra] = t, t
		}
		c.mu.Unlock()
	}
	return m
}

// encode encodes res, the result of the call whose request is req, as the
// answer to that call (appendResult), and keeps it for Write; false if res
// is not of a shape encoded here, or no call in flight carries req's Extra.
// Outside a batch the whole answer line is written at once into a pooled
// buffer: a search answer is written once, into memory already in use,
// where encoding the result alone and copying it into the line allocated
// and zeroed twice its size.
func (c *stdioConn) encode(method string, req mcp.Request, res mcp.Result) bool {
	extra := req.GetExtra()
	c.mu.Lock()
	t := c.extras[extra]
	var inBatch bool
	if t != nil {
		_, inBatch = c.batches[t.id]
	}
	c.mu.Unlock()
	if t == nil {
		return false
	}
	var buf *[]byte
	var b []byte
	head := 0
	if !inBatch {
		buf = answerBuffers.Get().(*[]byte)
		var ok bool
		if b, ok = appendResponseHead((*buf)[:0], t.id); !ok {
			answerBuffers.Put(buf)
			buf, b = nil, nil
		}
		head = len(b)
	}
	b, ok := appendResult(b, method, req, res)
	if !ok {
		if buf != nil {
			answerBuffers.Put(buf)
		}
		return false
	}
	result := b[head:]
	if buf != nil {
		b = append(b, '}', '\n')
		*buf = b
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.extras[extra] != t {
		if buf != nil {
			answerBuffers.Put(buf)
		}
		return false
	}
	t.result, t.line = result, buf
	return true
}

// release gives the buffer of a line encoded and not written back.
func (t *toolCall) release() {
	if t.line != nil && cap(*t.line) <= maxPooledAnswer {
		answerBuffers.Put(t.line)
	}
	t.line = nil
}

// errNotInitialized answers a call that comes before initialize (over
// stdio), and errInitializedAlready a second initialize (scrubErrors).
var (
	errNotInitialized     = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: the session is not initialized"}
	errInitializedAlready = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: the session is initialized already"}
)

func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		b, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			return err
		}
		_, err = c.out.Write(append(b, '\n'))
		return err
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
	// A call is in flight until its answer is written: a batch's calls
	// until their array is (an answer held for it holds its memory).
	var answered []jsonrpc.ID
	defer func() { c.calls.end(answered...) }()
	c.mu.Lock()
	var line *[]byte // the whole answer, encoded with its result
	if t := c.tools[resp.ID]; t != nil && (t.result == nil || bytes.Equal(resp.Result, placeholderJSON)) {
		delete(c.tools, resp.ID)
		delete(c.extras, t.extra)
		switch {
		case t.result == nil || resp.Error != nil:
		case t.line != nil:
			line, t.line = t.line, nil
		default:
			resp = &jsonrpc.Response{ID: resp.ID, Result: t.result}
		}
		t.release()
	}
	batch, inBatch := c.batches[resp.ID]
	var answers []*jsonrpc.Response
	if inBatch {
		batch.responses[batch.unresolved[resp.ID]] = resp
		delete(batch.unresolved, resp.ID)
		delete(c.batches, resp.ID)
		if len(batch.unresolved) == 0 {
			answers, answered = batch.responses, batch.ids
		}
	} else {
		answered = []jsonrpc.ID{resp.ID}
	}
	c.mu.Unlock()
	if line != nil {
		_, err := c.out.Write(*line)
		if cap(*line) <= maxPooledAnswer {
			answerBuffers.Put(line)
		}
		return err
	}
	if inBatch {
		if answers == nil {
			return nil
		}
		b := []byte{'['}
		for i, a := range answers {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendResponse(b, a); err != nil {
				return err
			}
		}
		_, err := c.batchOut.Write(append(b, ']', '\n'))
		return err
	}
	buf := answerBuffers.Get().(*[]byte)
	defer answerBuffers.Put(buf)
	b, err := appendResponse((*buf)[:0], resp)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = c.out.Write(b)
	if cap(b) <= maxPooledAnswer {
		*buf = b
	}
	return err
}

// answerBuffers hold the bytes of answers while they are written.
var answerBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// maxPooledAnswer is the largest buffer kept for another answer.
const maxPooledAnswer = 256 << 10

// appendResponse appends resp as jsonrpc.EncodeMessage writes it. A result
// is the SDK's own encoding of it, already compact: it is copied, where
// EncodeMessage would compact it once more. Anything else goes through
// EncodeMessage.
func appendResponse(b []byte, resp *jsonrpc.Response) ([]byte, error) {
	if resp.Error == nil && len(resp.Result) > 0 {
		if b2, ok := appendResponseHead(b, resp.ID); ok {
			b = append(b2, resp.Result...)
			return append(b, '}'), nil
		}
	}
	e, err := jsonrpc.EncodeMessage(resp)
	return append(b, e...), err
}

// appendResponseHead appends what EncodeMessage writes of a response
// before its result, for an id that is a number or a string without
// escapes; false for any other.
func appendResponseHead(b []byte, id jsonrpc.ID) ([]byte, bool) {
	switch id := id.Raw().(type) {
	case int64:
		b = append(b, `{"jsonrpc":"2.0","id":`...)
		b = strconv.AppendInt(b, id, 10)
		return append(b, `,"result":`...), true
	case string:
		if message.PlainString(id) {
			b = append(b, `{"jsonrpc":"2.0","id":"`...)
			b = append(b, id...)
			return append(b, `","result":`...), true
		}
	}
	return b, false
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

// inflight holds the ids of the calls read and not yet answered.
type inflight struct {
	mu      sync.Mutex
	ids     map[jsonrpc.ID]struct{}
	changed chan struct{} // closed, and replaced, at every change
}

func newInflight() *inflight {
	return &inflight{ids: map[jsonrpc.ID]struct{}{}, changed: make(chan struct{})}
}

// maxStdioInflight bounds the calls of a stdio session in flight: past
// it, the next line is read once one is answered. A client that does not
// read its answers stops being read (each call in flight holds its answer,
// up to --max-response-bytes) instead of making the process grow without
// bound. A batch of MaxBatch calls fits.
const maxStdioInflight = message.MaxBatch

// room waits until n more calls fit within maxStdioInflight (any n fits
// when none is in flight); false if ctx is done or closed is closed first.
func (f *inflight) room(ctx context.Context, closed <-chan struct{}, n int) bool {
	for {
		f.mu.Lock()
		in, changed := len(f.ids), f.changed
		f.mu.Unlock()
		if in == 0 || in+n <= maxStdioInflight {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		case <-closed:
			return false
		}
	}
}

// begin puts ids in flight; false, with none of them put, when one is in
// flight already or ids repeats one.
func (f *inflight) begin(ids ...jsonrpc.ID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, id := range ids {
		if _, ok := f.ids[id]; ok || slices.Contains(ids[:i], id) {
			return false
		}
	}
	for _, id := range ids {
		f.ids[id] = struct{}{}
	}
	return true
}

// end takes the calls of ids out of flight: they are answered.
func (f *inflight) end(ids ...jsonrpc.ID) {
	if len(ids) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		delete(f.ids, id)
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

// wait returns once no call is in flight, ctx is done, or after timeout.
func (f *inflight) wait(ctx context.Context, timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		n, changed := len(f.ids), f.changed
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
