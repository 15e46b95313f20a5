package tenants

import (
	"context"
	"slices"
	"testing"

	"github.com/memgate/memgate"
)

func TestView(t *testing.T) {
	include := []memgate.Namespace{"global", "team", "global", "proj"}
	limited := &memgate.Principal{Subject: "alice", Namespaces: []string{"proj", "team"}}
	own := &memgate.Principal{Subject: "bob", Namespace: "bobs"}
	open := &memgate.Principal{Subject: "carol"}
	for _, tc := range []struct {
		name string
		r    Resolver
		p    *memgate.Principal
		want []memgate.Namespace
	}{
		{"without a caller, every included namespace, once, after the call's", Resolver{Strategy: Fixed}, nil,
			[]memgate.Namespace{"proj", "global", "team"}},
		{"a token's namespace list leaves the others out", Resolver{Strategy: Token}, limited,
			[]memgate.Namespace{"proj", "team"}},
		{"a token with no list may use every namespace under the fixed strategy", Resolver{Strategy: Fixed}, open,
			[]memgate.Namespace{"proj", "global", "team"}},
		{"a token with no list reads its own alone under the token strategy", Resolver{Strategy: Token}, own,
			[]memgate.Namespace{"proj"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.View(tc.p, "proj", include); !slices.Equal(got, tc.want) {
				t.Fatalf("view %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNoStoreRanksNothing(t *testing.T) {
	var n noStore
	c, err := n.Corpus(context.Background(), "anything")
	if err != nil || c.Memories != 0 || c.Length != 0 {
		t.Fatalf("corpus %+v, %v", c, err)
	}
	r, err := n.SearchWith(context.Background(), memgate.Query{Text: "anything"}, memgate.Corpus{Memories: 3, Length: 9}, 0)
	if err != nil || len(r.Hits) != 0 || r.Hits == nil {
		t.Fatalf("search %+v, %v", r, err)
	}
}
