package tenants

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
)

func TestLeaseReadCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	p := newPool(t, Options{Dir: dir, MaxStores: 1})
	ctx := context.Background()
	_, holdRelease, err := p.Lease(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	// The only slot is leased, and reads of namespaces without a store
	// still answer: they take no slot.
	for _, ns := range []memgate.Namespace{"a", "b", "c"} {
		s, release, err := p.LeaseRead(ctx, ns)
		if err != nil {
			t.Fatalf("read lease of %s: %v", ns, err)
		}
		if _, err := s.Get(ctx, "x"); memgate.ErrorCode(err) != memgate.CodeNotFound {
			t.Fatalf("get: %v, want not_found", err)
		}
		release()
	}
	entries, err := os.ReadDir(filepath.Join(dir, "stores"))
	if err != nil || len(entries) != 1 || entries[0].Name() != "held" {
		t.Fatalf("stores folder after reads: %v %v", entries, err)
	}
	// A store that exists is leased as usual: held's is the real one.
	s, release, err := p.LeaseRead(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*storage.Store); !ok {
		t.Fatalf("read lease of an existing store gave %T", s)
	}
	release()
	holdRelease()
}

// The answers without a store are those of a real, empty store.
func TestNoStoreAnswersAsAnEmptyStore(t *testing.T) {
	ctx := context.Background()
	real, err := storage.Open(filepath.Join(t.TempDir(), storage.FileName), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	same := func(what string, a, b any) {
		t.Helper()
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			t.Errorf("%s: empty store %s, no store %s", what, ja, jb)
		}
	}
	var none noStore
	_, e1 := real.Get(ctx, "x")
	_, e2 := none.Get(ctx, "x")
	same("get", e1, e2)
	same("delete", real.Delete(ctx, "x", nil), none.Delete(ctx, "x", nil))
	r1, e1 := real.Search(ctx, memgate.Query{Text: "anything at all"})
	r2, e2 := none.Search(ctx, memgate.Query{Text: "anything at all"})
	same("search", []any{r1, e1}, []any{r2, e2})
	p1, e1 := real.List(ctx, memgate.ListQuery{})
	p2, e2 := none.List(ctx, memgate.ListQuery{})
	if len(p1.Memories) != 0 || len(p2.Memories) != 0 || p1.NextCursor != p2.NextCursor || e1 != nil || e2 != nil {
		t.Errorf("list: %+v %v, %+v %v", p1, e1, p2, e2)
	}
	var b1, b2 bytes.Buffer
	n1, c1, e1 := real.Export(ctx, &b1, "", 10)
	n2, c2, e2 := none.Export(ctx, &b2, "", 10)
	same("export", []any{n1, c1, e1, b1.String()}, []any{n2, c2, e2, b2.String()})
	s1, _ := real.Stats(ctx)
	s2, _ := none.Stats(ctx)
	s1.StoreBytes = 0 // a file that exists has a size
	same("stats", s1, s2)
	if _, _, err := none.Put(ctx, memgate.Write{Text: "x"}); memgate.ErrorCode(err) != memgate.CodeInternal {
		t.Errorf("a write without a store: %v", err)
	}
}
