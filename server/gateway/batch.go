package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/message"
)

// revisionNoBatches is the first revision without JSON-RPC batches: the
// SDK refuses a batch of it or of a later one itself, and serves a batch of
// an earlier one (2025-03-26, which a request without the header is taken
// for, and 2024-11-05), which is screened here.
const revisionNoBatches = "2025-06-18"

type batchKey struct{}

// errBatchVersion refuses a batch whose MCP-Protocol-Version is no
// revision at all, which the SDK's refusal would quote.
var errBatchVersion = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
	Message: "invalid request: MCP-Protocol-Version is not a protocol revision"}

// checkMessages answers, before the SDK, the POST bodies memgate refuses
// (checkMessage, splitBatch) with a JSON-RPC error in JSON and 400. A batch
// of the revision that has them is marked for serveBatch.
func (g *Gateway) checkMessages(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		r.Header.Del(server.RequestIDHeader) // only the gateway sets it
		body, _ := r.Context().Value(bodyKey{}).([]byte)
		trimmed := bytes.TrimSpace(body)
		if r.Method != http.MethodPost || len(trimmed) == 0 {
			return next(c)
		}
		if trimmed[0] != '[' {
			if refusal, _ := message.Check(trimmed); refusal != nil {
				return g.refuseMessage(c, refusal)
			}
			if g.traced() {
				var m struct {
					ID json.RawMessage `json:"id"`
				}
				json.Unmarshal(trimmed, &m) // message.Check let it through
				setID(r.Header, m.ID)
			}
			return next(c)
		}
		switch v := r.Header.Get("Mcp-Protocol-Version"); {
		case v != "" && !revisionShape.MatchString(v):
			return g.refuseMessage(c, &jsonrpc.Response{Error: errBatchVersion})
		case v >= revisionNoBatches:
			// The SDK's refusal would be plain text: the same comparison as
			// its own, answered in JSON.
			return g.refuseMessage(c, &jsonrpc.Response{Error: message.ErrBatchRevision})
		}
		msgs, err := message.SplitBatch(trimmed)
		if err != nil {
			return g.refuseMessage(c, &jsonrpc.Response{Error: err})
		}
		c.SetRequest(r.WithContext(context.WithValue(r.Context(), batchKey{}, msgs)))
		return next(c)
	}
}

// refuseMessage answers a message refused before the SDK: 400, or 404 for
// an unknown method of the stateless revision.
func (g *Gateway) refuseMessage(c echo.Context, refusal *jsonrpc.Response) error {
	e, _ := refusal.Error.(*jsonrpc.Error)
	reason := "malformed message"
	if e != nil {
		reason = e.Message
	}
	status := http.StatusBadRequest
	if e != nil && e.Code == jsonrpc.CodeMethodNotFound && isStateless(c.Request()) {
		status = http.StatusNotFound // what the 2026-07-28 revision asks, as the SDK answers
	}
	g.log.Debug("http refused", "op", "http.admit", "status", status, "reason", reason)
	g.refused(c.Request().Context(), "malformed message")
	return c.JSONBlob(status, message.Encode(refusal))
}

// serveBatch serves a batch one message at a time through the session
// handler, and answers with the array of their answers, so that all of
// them together stay within MaxResponseBytes: the gateway never holds more
// than that, plus the answer being made. Each answer must leave room for
// an error answer to every call after it. The first answer that does not
// is replaced by an error saying that its call ran; no later message runs,
// and each later call is answered with an error saying that it did not. A
// client thus learns, call by call, what was done. A message the SDK
// refuses at the HTTP level (an unknown session, say) ends the batch with
// that refusal.
func (g *Gateway) serveBatch(c echo.Context, msgs []json.RawMessage) error {
	r, w := c.Request(), c.Response()
	limit := g.opts.MaxResponseBytes
	ids := make([]json.RawMessage, len(msgs)) // nil: a notification
	room := make([]int64, len(msgs)+1)        // room[i]: the error answers of calls i and after
	for i := len(msgs) - 1; i >= 0; i-- {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal(msgs[i], &m) // splitBatch checked every message
		if len(m.ID) > 0 && string(m.ID) != "null" {
			ids[i] = m.ID
			room[i] = int64(len(message.BatchError(m.ID, message.ErrBatchNotRun))) + 1
		}
		room[i] += room[i+1]
	}
	var out bytes.Buffer
	out.WriteByte('[')
	answers := 0
	add := func(answer []byte) {
		if answers > 0 {
			out.WriteByte(',')
		}
		out.Write(answer)
		answers++
	}
	for i, msg := range msgs {
		sub := r.Clone(r.Context())
		sub.Body = io.NopCloser(bytes.NewReader(msg))
		sub.ContentLength = int64(len(msg))
		if g.traced() {
			setID(sub.Header, ids[i])
		}
		// out, a comma, this answer, the room of the calls after it and
		// the closing bracket.
		part := &batchPart{header: http.Header{}, limit: limit - int64(out.Len()) - 2 - room[i+1]}
		g.sessions.ServeHTTP(g.answers(part, sub), sub)
		switch {
		case part.over:
			add(message.BatchError(ids[i], message.ErrBatchRan)) // a call: only answers pass the bound
			for j := i + 1; j < len(msgs); j++ {
				if ids[j] != nil {
					add(message.BatchError(ids[j], message.ErrBatchNotRun))
				}
			}
			out.WriteByte(']')
			return c.JSONBlob(http.StatusOK, out.Bytes())
		case part.status == http.StatusAccepted:
			continue
		case part.status != http.StatusOK:
			for k, v := range part.header {
				w.Header()[k] = v
			}
			w.WriteHeader(part.status)
			_, err := w.Write(part.body.Bytes())
			return err
		}
		add(bytes.TrimSpace(part.body.Bytes()))
	}
	if answers == 0 {
		w.WriteHeader(http.StatusAccepted)
		return nil
	}
	out.WriteByte(']')
	return c.JSONBlob(http.StatusOK, out.Bytes())
}

var errPartTooLarge = errors.New("server: a batch's answers pass the response bound")

// batchPart records the answer to one message of a batch, up to limit
// bytes.
type batchPart struct {
	header http.Header
	status int
	body   bytes.Buffer
	limit  int64
	over   bool
}

func (p *batchPart) Header() http.Header { return p.header }

func (p *batchPart) WriteHeader(status int) {
	if p.status == 0 {
		p.status = status
	}
}

func (p *batchPart) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	if int64(p.body.Len()+len(b)) > p.limit {
		p.over = true
		return 0, errPartTooLarge
	}
	return p.body.Write(b)
}

// setID passes a message's JSON-RPC id (a string, or an integer) to the
// span of its call, in the request header h (server.RequestIDHeader).
func setID(h http.Header, id json.RawMessage) {
	if len(id) == 0 || string(id) == "null" {
		return
	}
	var s string
	if id[0] != '"' {
		s = string(id)
	} else if json.Unmarshal(id, &s) != nil {
		return
	}
	h.Set(server.RequestIDHeader, s)
}
