//go:build unix

package storage

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memgate/memgate"
)

// fault reads a page that is no longer mapped, as a read of a damaged
// file's pages beyond its end does.
func fault(t testing.TB) byte {
	b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Munmap(b); err != nil {
		t.Fatal(err)
	}
	return b[0]
}

// A fault inside a write marks the store damaged: the write and those
// queued with it fail with unavailable, later calls fail at once, and Close
// returns.
func TestFaultInAWriteMarksTheStoreDamaged(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	put(t, s, memgate.Write{ID: "before", Text: "written before the fault"})
	release := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, 4)
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs[0] = s.write.do(func(*txn) error {
			<-release
			fault(t)
			return nil
		})
	}()
	waitLeading(s.write)
	for i := 1; i < len(errs); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = s.Put(ctx, memgate.Write{ID: fmt.Sprint("m", i), Text: "queued behind a fault"})
		}()
	}
	queued(s.write, len(errs)-1)
	close(release)
	wg.Wait()
	if !wantDamaged(t, "faulting write", errs[0]) {
		return
	}
	for i, err := range errs[1:] {
		if err != nil {
			wantDamaged(t, fmt.Sprint("queued write ", i+1), err)
		}
	}
	_, _, err := s.Put(ctx, memgate.Write{ID: "after", Text: "a write after the fault"})
	wantDamaged(t, "write after the fault", err)
	_, err = s.Get(ctx, "before")
	wantDamaged(t, "read after the fault", err)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}
