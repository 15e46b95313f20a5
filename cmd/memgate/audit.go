package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/admin"
	"github.com/memgate/memgate/tenants"
)

// auditEvery is how often the audit log's buffered lines are written and
// fsynced: a batch, not a sync per line.
const auditEvery = 200 * time.Millisecond

// auditEntry is one line of the audit log (--audit-log). It holds who,
// which namespace, which operation, its outcome code and how long it took,
// and a request id of its own making: never a memory's text, id, a query,
// a cursor or a token.
type auditEntry struct {
	Time       time.Time `json:"time"`
	Subject    string    `json:"subject,omitempty"`
	Namespace  string    `json:"namespace,omitempty"`
	Op         string    `json:"op"`
	Code       string    `json:"code"` // "ok" or the error code
	DurationMS float64   `json:"duration_ms"`
	RequestID  string    `json:"request_id"`
}

// auditLog appends entries to a file ("-": stderr), writes and fsyncs them
// in batches, and reopens the file on SIGHUP, after a rotation moved it.
type auditLog struct {
	path string
	log  func(msg string, args ...any)

	mu    sync.Mutex
	f     *os.File // nil for stderr
	out   io.Writer
	buf   *bufio.Writer
	dirty bool

	stop chan struct{}
	done chan struct{}
}

func openAudit(path string, stderr io.Writer, warn func(string, ...any)) (*auditLog, error) {
	l := &auditLog{path: path, log: warn, stop: make(chan struct{}), done: make(chan struct{})}
	if path == "-" {
		l.out = stderr
	} else {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, usageError{err}
		}
		l.f, l.out = f, f
	}
	l.buf = bufio.NewWriterSize(l.out, 64<<10)
	hup := make(chan os.Signal, 1)
	if l.f != nil {
		signal.Notify(hup, syscall.SIGHUP)
	}
	go func() {
		defer close(l.done)
		defer signal.Stop(hup)
		t := time.NewTicker(auditEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				l.flush()
			case <-hup:
				l.reopen()
			case <-l.stop:
				return
			}
		}
	}()
	return l, nil
}

// record adds one entry; it reaches the disk with the next batch.
func (l *auditLog) record(e auditEntry) {
	if l == nil {
		return
	}
	var id [8]byte
	rand.Read(id[:])
	e.RequestID = hex.EncodeToString(id[:])
	if e.Code == "" {
		e.Code = "ok"
	}
	b, _ := json.Marshal(e)
	l.mu.Lock()
	l.buf.Write(append(b, '\n'))
	l.dirty = true
	l.mu.Unlock()
}

// flush writes the buffered lines and fsyncs them.
func (l *auditLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.dirty {
		return
	}
	l.dirty = false
	err := l.buf.Flush()
	if err == nil && l.f != nil {
		err = l.f.Sync()
	}
	if err != nil {
		l.log("audit log write failed", "op", "cmd.audit", "error", err)
	}
}

// reopen flushes to the file as it was, then opens the path again: after a
// rotation renamed the file, new lines go to a new one.
func (l *auditLog) reopen() {
	l.flush()
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		l.log("audit log reopen failed; writing on to the old file", "op", "cmd.audit", "error", err)
		return
	}
	l.mu.Lock()
	old := l.f
	l.f, l.out = f, f
	l.buf.Reset(f)
	l.mu.Unlock()
	old.Close()
}

// close writes what is left and closes the file.
func (l *auditLog) close() {
	if l == nil {
		return
	}
	close(l.stop)
	<-l.done
	l.flush()
	if l.f != nil {
		l.f.Close()
	}
}

// auditAdmin is the admin API's audit hook.
func (l *auditLog) auditAdmin(a admin.Action) {
	e := auditEntry{Time: time.Now().UTC(), Op: a.Op, Namespace: string(a.Namespace), Code: string(a.Code),
		DurationMS: durationMS(a.Duration)}
	if toolName(a.Tool) {
		e.Op += " " + a.Tool
	}
	if p := server.PrincipalFrom(a.Request.Context()); p != nil {
		e.Subject = p.Subject
	}
	l.record(e)
}

func durationMS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// auditTools is MCP middleware that records each tools/call: its tool, the
// namespace the call resolves to (by the server's own resolver), the
// caller, and the outcome code.
func (l *auditLog) auditTools(r *tenants.Resolver) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			call, ok := req.(*mcp.CallToolRequest)
			if !ok || method != "tools/call" {
				return next(ctx, method, req)
			}
			start := time.Now()
			res, err := next(ctx, method, req)
			var p *memgate.Principal
			if extra := call.GetExtra(); extra != nil && extra.TokenInfo != nil {
				p, _ = extra.TokenInfo.Extra[server.TokenInfoPrincipal].(*memgate.Principal)
			}
			var args struct {
				Namespace string `json:"namespace"`
			}
			if call.Params != nil {
				json.Unmarshal(call.Params.Arguments, &args)
			}
			e := auditEntry{Time: start.UTC(), Op: "tools/call", DurationMS: durationMS(time.Since(start))}
			if call.Params != nil && toolName(call.Params.Name) {
				e.Op += " " + call.Params.Name
			}
			if ns, nerr := r.Resolve(p, args.Namespace); nerr == nil {
				e.Namespace = string(ns)
			} else if ns, nerr := memgate.ParseNamespace("namespace", args.Namespace); nerr == nil {
				e.Namespace = string(ns) // the one asked for, refused
			}
			if p != nil {
				e.Subject = p.Subject
			}
			e.Code = resultCode(res, err)
			l.record(e)
			return res, err
		}
	}
}

// resultCode is the error code of a tool's answer, "" for a success.
func resultCode(res mcp.Result, err error) string {
	if err != nil {
		return "protocol_error"
	}
	tr, ok := res.(*mcp.CallToolResult)
	if !ok || !tr.IsError {
		return ""
	}
	if te := resultError(tr); te != nil {
		if e, ok := te.(*toolError); ok {
			return string(e.Code)
		}
	}
	return string(memgate.CodeInternal)
}

// toolName reports whether a called name is one of memgate's tools (the
// benchmark build's noop among them): a name a client made up is left out.
func toolName(s string) bool {
	return slices.Contains(server.ToolNames, s) || s == "noop"
}

// toolMiddleware is the middleware the servers of the run wrap their
// requests in: the audit of tool calls, with --audit-log.
func (a *app) toolMiddleware(r *tenants.Resolver) []mcp.Middleware {
	if a.audit == nil {
		return nil
	}
	return []mcp.Middleware{a.audit.auditTools(r)}
}
