package storage

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate"
)

// BenchmarkOnlineBackup is the figure of docs/PERFORMANCE.md: the p99 of 64
// writers on a store of 100,000 memories, without a backup and while
// backups of the live store follow one another. It reports both p99s and
// their ratio (target: at most 2).
//
//	go test -run '^$' -bench OnlineBackup -benchtime 1x ./storage/
func BenchmarkOnlineBackup(b *testing.B) {
	const memories, writers, window = 100_000, 64, 3 * time.Second
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "stores", "default", FileName)
	s, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var lines strings.Builder
	lines.WriteString(`{"memgate_export":1}` + "\n")
	for i := range memories {
		fmt.Fprintf(&lines, `{"id":"seed-%d","text":"seed memory %d about deploys, reviews and the staging pipeline of team %d"}`+"\n", i, i, i%97)
	}
	if _, err := s.Import(ctx, strings.NewReader(lines.String()), ImportSkip); err != nil {
		b.Fatal(err)
	}
	run := func(backup bool) (p99 time.Duration, backups int) {
		var stop atomic.Bool
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				var mine []time.Duration
				for i := 0; !stop.Load(); i++ {
					start := time.Now()
					if _, _, err := s.Put(ctx, memgate.Write{Text: fmt.Sprintf("writer %d note %d about the staging pipeline", w, i)}); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(start))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
		}
		done := make(chan int)
		go func() {
			n := 0
			for backup && !stop.Load() {
				if os.Getenv("BACKUP_DISCARD") != "" {
					if _, err := s.Backup(ctx, io.Discard); err != nil {
						b.Error(err)
					}
					n++
					continue
				}
				file := filepath.Join(b.TempDir(), "backup.db")
				if _, err := s.BackupFile(ctx, file); err != nil {
					b.Error(err)
				}
				os.Remove(file)
				n++
			}
			done <- n
		}()
		time.Sleep(window)
		stop.Store(true)
		wg.Wait()
		backups = <-done
		slices.Sort(lat)
		return lat[len(lat)*99/100], backups
	}
	// The import's index work goes on in the background for a while: a
	// first window lets it end, so that neither measured window pays it.
	run(false)
	for b.Loop() {
		base, _ := run(false)
		during, n := run(true)
		b.ReportMetric(float64(base.Microseconds())/1000, "p99-ms-without")
		b.ReportMetric(float64(during.Microseconds())/1000, "p99-ms-during")
		b.ReportMetric(float64(during)/float64(base), "p99-ratio")
		b.ReportMetric(float64(n), "backups")
	}
}
