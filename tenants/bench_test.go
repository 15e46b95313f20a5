package tenants

import (
	"context"
	"fmt"
	"testing"

	"github.com/memgate/memgate"
)

// BenchmarkLeaseHit leases a store that is already open.
func BenchmarkLeaseHit(b *testing.B) {
	p := newPool(b, Options{MaxStores: 16})
	ctx := context.Background()
	if _, r, err := p.Lease(ctx, "hot"); err != nil {
		b.Fatal(err)
	} else {
		r()
	}
	b.ReportAllocs()
	for b.Loop() {
		_, release, err := p.Lease(ctx, "hot")
		if err != nil {
			b.Fatal(err)
		}
		release()
	}
}

// BenchmarkLeaseMiss leases stores in turn from a pool too small for them:
// every lease closes the least recently used store and opens another.
func BenchmarkLeaseMiss(b *testing.B) {
	const stores, max = 64, 4
	p := newPool(b, Options{MaxStores: max})
	ctx := context.Background()
	names := make([]memgate.Namespace, stores)
	for i := range names {
		names[i] = memgate.Namespace(fmt.Sprint("ns", i))
		s, r, err := p.Lease(ctx, names[i])
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.Put(ctx, memgate.Write{Text: "a memory to open"}); err != nil {
			b.Fatal(err)
		}
		r()
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_, release, opened, err := p.LeaseOpened(ctx, names[i%stores])
		if err != nil {
			b.Fatal(err)
		}
		if !opened {
			b.Fatal("a lease in turn over more stores than slots must open one")
		}
		release()
		i++
	}
}
