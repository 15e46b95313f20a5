package main

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
)

// The store commands' work through the control socket of the server that
// holds their store (control.go): the same output as their direct work.

func (a *app) statsThrough(r *remote, ns memgate.Namespace) error {
	return r.json(a.ctx, http.MethodGet, "/control/v1/stats/"+string(ns), nil, a.stdout)
}

// postThrough posts to the admin route of ns at part, the escaped id, rest.
func (a *app) postThrough(part, id, rest string) func(r *remote, ns memgate.Namespace) error {
	return func(r *remote, ns memgate.Namespace) error {
		return r.json(a.ctx, http.MethodPost, nsPath(ns, part, url.PathEscape(id), rest), nil, a.stdout)
	}
}

// pageQuery is ?cursor=&limit= of a list, without what is left out.
func pageQuery(cursor string, limit int) string {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

func (c *candidatesListCmd) through(a *app, limit int) func(r *remote, ns memgate.Namespace) error {
	return func(r *remote, ns memgate.Namespace) error {
		return r.json(a.ctx, http.MethodGet, nsPath(ns, "/candidates", pageQuery(c.Cursor, limit)), nil, a.stdout)
	}
}

func (c *trashListCmd) through(a *app, limit int) func(r *remote, ns memgate.Namespace) error {
	return func(r *remote, ns memgate.Namespace) error {
		return r.json(a.ctx, http.MethodGet, nsPath(ns, "/trash", pageQuery(c.Cursor, limit)), nil, a.stdout)
	}
}

func (c *backupCmd) through(a *app, out *output) func(r *remote, ns memgate.Namespace) error {
	return func(r *remote, ns memgate.Namespace) error {
		resp, err := r.do(a.ctx, http.MethodGet, nsPath(ns, "/backup"), nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var n int64
		err = out.writeTo(func(w io.Writer) (err error) {
			n, err = io.Copy(w, resp.Body)
			return err
		})
		if err != nil {
			return err
		}
		return a.printJSON(map[string]any{"namespace": ns, "bytes": n})
	}
}

func (c *exportCmd) through(a *app, out *output) func(r *remote, ns memgate.Namespace) error {
	return func(r *remote, ns memgate.Namespace) error {
		resp, err := r.do(a.ctx, http.MethodGet, nsPath(ns, "/export"), nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if out == nil {
			_, err := io.Copy(a.stdout, resp.Body)
			return err
		}
		lines := 0
		err = out.writeTo(func(w io.Writer) error {
			_, err := io.Copy(lineCounter{w, &lines}, resp.Body)
			return err
		})
		if err != nil {
			return err
		}
		return a.printJSON(map[string]any{"count": max(lines-1, 0)}) // the header line is no memory
	}
}

// lineCounter counts the newlines written through it.
type lineCounter struct {
	w io.Writer
	n *int
}

func (l lineCounter) Write(p []byte) (int, error) {
	*l.n += bytes.Count(p, []byte("\n"))
	return l.w.Write(p)
}

func (c *importCmd) through(a *app, body io.Reader) func(r *remote, ns memgate.Namespace) error {
	return func(r *remote, ns memgate.Namespace) error {
		path := nsPath(ns, "/import?on_conflict="+url.QueryEscape(c.OnConflict))
		err := r.json(a.ctx, http.MethodPost, path, io.NopCloser(body), a.stdout)
		e, ok := err.(*memgate.Error)
		if !ok {
			return err
		}
		// How far it got, as a direct import says it.
		var rep storage.ImportReport
		if m, ok := e.Details["report"].(map[string]any); ok {
			if n, ok := m["imported"].(float64); ok {
				rep.Imported = int(n)
			}
			delete(e.Details, "report")
			if len(e.Details) == 0 {
				e.Details = nil
			}
			return importError(e, rep)
		}
		return e
	}
}
