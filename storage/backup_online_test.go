package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate"
)

// An online backup taken while 64 writers go on restores to a store that
// holds every write acknowledged before the backup began.
func TestOnlineBackupUnder64Writers(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	const writers = 64
	acked := make([][]string, writers) // per writer, in order
	var counts [writers]atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				if _, _, err := s.Put(ctx, memgate.Write{ID: id, Text: "a memory written during a backup " + id}); err != nil {
					t.Error(err)
					return
				}
				acked[w] = append(acked[w], id)
				counts[w].Store(int64(i + 1))
			}
		})
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var n int64
		for w := range writers {
			n += counts[w].Load()
		}
		if n >= 256 {
			break
		}
	}
	var before [writers]int64
	for w := range writers {
		before[w] = counts[w].Load()
	}
	path := filepath.Join(t.TempDir(), "backup.db")
	if _, err := s.BackupFile(ctx, path); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	stop.Store(true)
	wg.Wait()

	b, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	total := 0
	for w := range writers {
		for _, id := range acked[w][:before[w]] {
			if _, err := b.Get(ctx, id); err != nil {
				t.Fatalf("%s, acknowledged before the backup began, is not in it: %v", id, err)
			}
			total++
		}
	}
	if total == 0 {
		t.Fatal("no write was acknowledged before the backup")
	}
	st, _ := b.Stats(ctx)
	t.Logf("%d writes acknowledged before the backup, %d in it", total, st.Count)
	os.Remove(path)
}
