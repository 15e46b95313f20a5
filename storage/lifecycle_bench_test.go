package storage

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate"
)

// BenchmarkWriteLifecycle puts memories without and with what the
// lifecycle adds to a write: the duplicate lookup (no id), the quotas
// checked in the commit, and an expiry (its key in the expiry index).
// Both write the text's hash. Writes are not synced, so the figure is the
// CPU of a write, not the disk's.
func BenchmarkWriteLifecycle(b *testing.B) {
	texts := benchText(20000)
	for _, tc := range []struct {
		name string
		opt  func(*Options)
		w    func(text string) memgate.Write
	}{
		{"plain", func(*Options) {}, func(text string) memgate.Write {
			return memgate.Write{Text: text, AllowDuplicate: true}
		}},
		{"dedup+quota+expiry", func(o *Options) { o.MaxMemories, o.MaxBytes = 1<<40, 1<<50 }, func(text string) memgate.Write {
			return memgate.Write{Text: text, TTL: time.Hour}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := openTest(b, tc.opt)
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := s.Write(ctx, tc.w(fmt.Sprint(i, " ", texts[i%len(texts)]))); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkSweepBesideWriters sweeps 10,000 expired memories out of a
// store of 100,000 while four writers put memories, and reports the
// writers' p99 latency with and without the sweep running.
func BenchmarkSweepBesideWriters(b *testing.B) {
	const n, expiring, writers, each = 100000, 10000, 4, 500
	for range b.N {
		b.StopTimer()
		var now time.Time
		var mu sync.Mutex
		now = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		s := openTest(b, func(o *Options) { o.NoSync = false; o.Now = clock })
		texts := benchText(n + writers*each*2)
		var sb strings.Builder
		for i := range n {
			if i%(n/expiring) == 0 {
				fmt.Fprintf(&sb, "{\"text\":%q,\"expires_at\":\"2026-12-02T00:30:00Z\"}\n", texts[i])
			} else {
				fmt.Fprintf(&sb, "{\"text\":%q}\n", texts[i])
			}
		}
		ctx := context.Background()
		if _, err := s.Import(ctx, strings.NewReader(sb.String()), ImportFail); err != nil {
			b.Fatal(err)
		}
		write := func(base int) []time.Duration {
			var wg sync.WaitGroup
			lat := make([][]time.Duration, writers)
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						t0 := time.Now()
						if _, _, err := s.Put(ctx, memgate.Write{Text: texts[n+base+w*each+i], AllowDuplicate: true}); err != nil {
							b.Error(err)
							return
						}
						lat[w] = append(lat[w], time.Since(t0))
					}
				})
			}
			wg.Wait()
			return slices.Concat(lat...)
		}
		alone := write(0)
		mu.Lock()
		now = now.Add(time.Hour)
		mu.Unlock()
		b.StartTimer()
		done := make(chan struct{})
		var swept int
		go func() {
			defer close(done)
			var err error
			if swept, _, err = s.Sweep(ctx, 0); err != nil {
				b.Error(err)
			}
		}()
		beside := write(writers * each)
		<-done
		if swept != expiring {
			b.Fatalf("swept %d, want %d", swept, expiring)
		}
		p99 := func(d []time.Duration) float64 {
			slices.Sort(d)
			return float64(d[len(d)*99/100]) / 1e6
		}
		b.ReportMetric(p99(alone), "p99-alone-ms")
		b.ReportMetric(p99(beside), "p99-beside-sweep-ms")
		b.ReportMetric(p99(beside)/p99(alone), "p99-ratio")
	}
}
