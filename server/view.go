package server

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
)

// Views. With Options.View set (--include-namespace), search and get read
// the namespaces of the caller's view: the call's own namespace first, then
// the included ones it may use. get takes the first namespace that holds
// the id; search ranks the memories of them all as one collection (see
// Ranker) and merges them by score. Every memory a tool returns then says
// its namespace; remember, forget, list, export, stats and the resources
// stay on the call's own namespace.
//
// Each included namespace is leased for reading, like the call's own: one
// with no store on disk costs no slot and creates nothing, and when the
// slots are leased the call fails with too_many_stores.

// Ranker is a store that ranks on the scale of a view. Corpus returns what
// BM25 knows of the store for the words of text; SearchWith is Search with
// the corpus of the view's other stores added to the store's own, so that
// each memory scores as it would in one store holding the whole view, and
// returns only the memories that score above above (0: all of the limit).
type Ranker interface {
	Corpus(ctx context.Context, text string) (memgate.Corpus, error)
	SearchWith(ctx context.Context, q memgate.Query, others memgate.Corpus, above float64) (memgate.Result, error)
}

// viewKey carries the namespaces of a call's view in its context.
type viewKey struct{}

// withView returns ctx carrying the view of a call by p to namespace ns,
// when the server has views and the tool reads through them.
func (s *Server) withView(ctx context.Context, t toolDef, p *memgate.Principal, ns memgate.Namespace) context.Context {
	if s.opts.View == nil || t.tool.Name != ToolSearch && t.tool.Name != ToolGet {
		return ctx
	}
	return context.WithValue(ctx, viewKey{}, s.view(p, ns))
}

// view returns the namespaces of the view of a call by p to ns: ns first.
func (s *Server) view(p *memgate.Principal, ns memgate.Namespace) []memgate.Namespace {
	v := s.opts.View(p, ns)
	if len(v) == 0 || v[0] != ns {
		v = append([]memgate.Namespace{ns}, slices.DeleteFunc(v, func(n memgate.Namespace) bool { return n == ns })...)
	}
	return v
}

// viewOf returns the view a context carries, nil for none.
func viewOf(ctx context.Context) []memgate.Namespace {
	v, _ := ctx.Value(viewKey{}).([]memgate.Namespace)
	return v
}

// inView marks m with namespace ns when the server has views: a client that
// reads several namespaces learns where each memory lives.
func (s *Server) inView(m memgate.Memory, ns memgate.Namespace) memgate.Memory {
	if s.opts.View != nil {
		m.Namespace = string(ns)
	}
	return m
}

// getView looks for memory id in each namespace of view in order, the
// first of them in st, already leased, and returns the first found.
func (s *Server) getView(ctx context.Context, st Store, view []memgate.Namespace, id string) (memgate.Memory, error) {
	m, err := st.Get(ctx, id)
	if err == nil || memgate.ErrorCode(err) != memgate.CodeNotFound {
		return s.inView(m, view[0]), err
	}
	for _, ns := range view[1:] {
		m, ferr := s.getIn(ctx, ns, id)
		if ferr == nil {
			return s.inView(m, ns), nil
		}
		if memgate.ErrorCode(ferr) != memgate.CodeNotFound {
			return memgate.Memory{}, ferr
		}
	}
	return memgate.Memory{}, err
}

// getIn reads memory id of namespace ns, leasing its store for the read
// alone.
func (s *Server) getIn(ctx context.Context, ns memgate.Namespace, id string) (memgate.Memory, error) {
	st, release, err := s.leaseRead(ctx, ns)
	if err != nil {
		return memgate.Memory{}, err
	}
	defer release()
	return st.Get(ctx, id)
}

var errNoRanker = errors.New("a store of a view cannot rank on the view's scale")

// searchView answers q over the namespaces of view, the first of them in
// st, already leased. With words, it ranks in two phases: every store's
// corpus for the query's terms, then every store's ranking with the others'
// corpora added, so that lexical scores compare across stores; the
// rankings merge by lexical score (of equal scores, the earlier namespace's
// first) and score is lexical over the best of them all. Without words,
// the memories that pass the narrowing merge newest first. Limit and
// budget hold over the merged hits.
//
// The stores rank one after another, in the view's order: once the limit
// of hits is reached, a later store reads only the memories that would
// join it. A search uses one core, as a search of one store does.
func (s *Server) searchView(ctx context.Context, st Store, view []memgate.Namespace, q memgate.Query) (memgate.Result, error) {
	stores := []Store{st}
	for _, ns := range view[1:] {
		o, release, err := s.leaseRead(ctx, ns)
		if err != nil {
			return memgate.Result{}, err
		}
		defer release()
		stores = append(stores, o)
	}
	sub := q
	sub.Budget = 0 // the budget is the merged answer's
	results := make([]memgate.Result, len(stores))
	if strings.TrimSpace(q.Text) == "" {
		for i, st := range stores {
			var err error
			if results[i], err = st.Search(ctx, sub); err != nil {
				return memgate.Result{}, err
			}
		}
		return mergeView(view, results, q, false), nil
	}
	rankers := make([]Ranker, len(stores))
	corpora := make([]memgate.Corpus, len(stores))
	for i, st := range stores {
		r, ok := st.(Ranker)
		if !ok {
			return memgate.Result{}, memgate.Internal("server.search", errNoRanker)
		}
		rankers[i] = r
		var err error
		if corpora[i], err = r.Corpus(ctx, q.Text); err != nil {
			return memgate.Result{}, err
		}
	}
	limit := cmp.Or(q.Limit, memgate.DefaultSearchLimit)
	var scores []float64 // of every hit so far, best first
	for i, r := range rankers {
		var others memgate.Corpus
		for j, c := range corpora {
			var ok bool
			if j != i {
				if others, ok = others.Add(c); !ok {
					return memgate.Result{}, memgate.Internal("server.search", errOtherTerms)
				}
			}
		}
		above := 0.0
		if len(scores) >= limit {
			above = scores[limit-1]
		}
		var err error
		if results[i], err = r.SearchWith(ctx, sub, others, above); err != nil {
			return memgate.Result{}, err
		}
		for _, h := range results[i].Hits {
			scores = append(scores, h.LexicalScore)
		}
		slices.SortFunc(scores, func(a, b float64) int { return cmp.Compare(b, a) })
	}
	return mergeView(view, results, q, true), nil
}

var errOtherTerms = errors.New("the stores of a view analyse the query differently")

// mergeView merges the results of the stores of view into the answer to q:
// by lexical score when ranked, else newest first; cut to the limit, then
// to the budget.
func mergeView(view []memgate.Namespace, results []memgate.Result, q memgate.Query, ranked bool) memgate.Result {
	out := memgate.Result{Hits: []memgate.Hit{}, Receipt: results[0].Receipt}
	out.Receipt.Candidates = 0
	for i, r := range results {
		out.Receipt.Candidates += r.Receipt.Candidates
		out.Receipt.Truncated = out.Receipt.Truncated || r.Receipt.Truncated
		for _, h := range r.Hits {
			h.Namespace = string(view[i])
			out.Hits = append(out.Hits, h)
		}
	}
	// Stable: of equal keys, the earlier namespace's, then its store's order.
	if ranked {
		slices.SortStableFunc(out.Hits, func(a, b memgate.Hit) int { return cmp.Compare(b.LexicalScore, a.LexicalScore) })
	} else {
		slices.SortStableFunc(out.Hits, func(a, b memgate.Hit) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
	}
	limit := cmp.Or(q.Limit, memgate.DefaultSearchLimit)
	out.Hits = out.Hits[:min(limit, len(out.Hits))]
	if ranked && len(out.Hits) > 0 {
		best := out.Hits[0].LexicalScore
		for i := range out.Hits {
			if out.Hits[i].Score = 1; best > 0 {
				out.Hits[i].Score = out.Hits[i].LexicalScore / best
			}
		}
	}
	if n := budgetCut(out.Hits, q.Budget); n < len(out.Hits) {
		out.Hits = out.Hits[:n]
		out.Receipt.Truncated = true
	}
	out.Receipt.Namespaces = make([]string, len(view))
	for i, ns := range view {
		out.Receipt.Namespaces[i] = string(ns)
	}
	return out
}

// budgetCut returns how many of hits fit in budget tokens (0: no budget),
// counted as a store counts them: a token per four bytes of text, rounded
// up, stopping at the first hit that passes it.
func budgetCut(hits []memgate.Hit, budget int) int {
	if budget <= 0 {
		return len(hits)
	}
	total := 0
	for i, h := range hits {
		if total += (len(h.Text) + 3) / 4; total > budget {
			return i
		}
	}
	return len(hits)
}

// errNotInView refuses a resource of a namespace outside the caller's view
// on a server without the namespace argument.
var errNotInView = &memgate.Error{Code: memgate.CodeNotFound, Message: "no memory has this id"}

// withViewStore is withStore for memgate://namespace/{ns}/memory/{id} on a
// server with views: a namespace of the caller's view is read as get reads
// it; any other only where the namespace argument could name it.
func (s *Server) withViewStore(ctx context.Context, extra *mcp.RequestExtra, ns memgate.Namespace, fn func(Store, memgate.Namespace) error) (memgate.Namespace, error) {
	p := principalOf(ctx, extra)
	own, err := s.resolve(p, "")
	if err != nil {
		return "", err
	}
	if !slices.Contains(s.view(p, own), ns) {
		if s.opts.NamespaceArg {
			return s.withStore(ctx, extra, string(ns), fn)
		}
		return own, errNotInView
	}
	st, release, err := s.leaseRead(ctx, ns)
	if err != nil {
		return ns, err
	}
	defer release()
	return ns, fn(st, ns)
}
