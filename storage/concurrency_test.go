package storage

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/memgate/memgate"
)

// Many goroutines read a version and write with if_version: in every round
// exactly one wins, and every loser learns the winner's version.
func TestCompareAndSetRace(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	const writers, rounds = 16, 30
	put(t, s, memgate.Write{ID: "counter", Text: "0"})
	for round := range rounds {
		cur, err := s.Get(ctx, "counter")
		if err != nil {
			t.Fatal(err)
		}
		var (
			wins      atomic.Int32
			wg        sync.WaitGroup
			mu        sync.Mutex
			winner    int64
			conflicts []any
		)
		for w := range writers {
			wg.Go(func() {
				m, _, err := s.Put(ctx, memgate.Write{ID: "counter", Text: fmt.Sprint(round, w), IfVersion: &cur.Version})
				mu.Lock()
				defer mu.Unlock()
				switch memgate.ErrorCode(err) {
				case "":
					wins.Add(1)
					winner = m.Version
				case memgate.CodeVersionConflict:
					conflicts = append(conflicts, err.(*memgate.Error).Details["current_version"])
				default:
					t.Errorf("unexpected error: %v", err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d winners, want exactly 1", round, wins.Load())
		}
		for _, v := range conflicts {
			if v != uint64(winner) {
				t.Fatalf("round %d: a loser saw current_version %v, the winner wrote %d", round, v, winner)
			}
		}
	}
}

// Concurrent writers share commits; every acknowledged write is readable and
// counted exactly once.
func TestConcurrentWritersAllLand(t *testing.T) {
	s := openTest(t, func(o *Options) { o.NoSync = false })
	ctx := context.Background()
	const writers, each = 32, 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, _, err := s.Put(ctx, memgate.Write{ID: fmt.Sprintf("w%d-%d", w, i), Text: fmt.Sprintf("writer %d item %d", w, i)}); err != nil {
					t.Errorf("put: %v", err)
				}
			}
		})
	}
	wg.Wait()
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Count != writers*each {
		t.Fatalf("count = %d, want %d", st.Count, writers*each)
	}
	for w := range writers {
		for i := range each {
			if _, err := s.Get(ctx, fmt.Sprintf("w%d-%d", w, i)); err != nil {
				t.Fatalf("acknowledged write w%d-%d missing: %v", w, i, err)
			}
		}
	}
}
