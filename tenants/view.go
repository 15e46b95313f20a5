package tenants

import (
	"context"
	"slices"

	"github.com/memgate/memgate"
)

// View returns the namespaces a search or get of principal p (nil when the
// transport authenticates nobody) reads when its namespace is ns and the
// server includes the namespaces include (--include-namespace): ns first,
// then each included namespace p may use, in order, each once.
//
// p may use an included namespace as it may use one named by the namespace
// argument: when its token names the namespaces it may use, only those;
// under the token strategy a token that names none (a per-user namespace
// derived from its subject) reads only its own. A namespace p may not use
// is left out, silently: a view widens what a caller reads, never what it
// may.
func (r *Resolver) View(p *memgate.Principal, ns memgate.Namespace, include []memgate.Namespace) []memgate.Namespace {
	out := []memgate.Namespace{ns}
	for _, in := range include {
		if slices.Contains(out, in) || !r.mayInclude(p, in) {
			continue
		}
		out = append(out, in)
	}
	return out
}

func (r *Resolver) mayInclude(p *memgate.Principal, ns memgate.Namespace) bool {
	if r.Strategy == Token && (p == nil || len(p.Namespaces) == 0) {
		return false
	}
	return p == nil || p.MayUse(string(ns))
}

// Corpus is an empty store's: nothing.
func (noStore) Corpus(context.Context, string) (memgate.Corpus, error) { return memgate.Corpus{}, nil }

// SearchWith is Search: an empty store has no hits on any scale.
func (n noStore) SearchWith(ctx context.Context, q memgate.Query, _ memgate.Corpus, _ float64) (memgate.Result, error) {
	return n.Search(ctx, q)
}
