package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/internal/synthetic"
	"github.com/memgate/memgate/search"
)

// benchText makes n texts of about 176 bytes from a Zipf-distributed
// vocabulary of 20,000 made-up words (the bench module's synthetic corpus).
var benchText = synthetic.Texts

func benchStore(b testing.TB, n int, sync bool) (*Store, []string) {
	b.Helper()
	s := openTest(b, func(o *Options) { o.NoSync = !sync })
	texts := benchText(n + 10000)
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "{\"text\":%q}\n", texts[i])
	}
	if _, err := s.Import(context.Background(), strings.NewReader(sb.String()), ImportFail); err != nil {
		b.Fatal(err)
	}
	return s, texts[n:]
}

// BenchmarkPut is one memory per commit on a 10k store, without fsync: the
// CPU and page cost of a write.
func BenchmarkPut(b *testing.B) {
	s, texts := benchStore(b, 10000, false)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, _, err := s.Put(ctx, memgate.Write{Text: texts[i%len(texts)]}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkPutDurable is the same with fsync on every commit.
func BenchmarkPutDurable(b *testing.B) {
	s, texts := benchStore(b, 10000, true)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, _, err := s.Put(ctx, memgate.Write{Text: texts[i%len(texts)]}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkSearch is a three-word query on a 10k store.
func BenchmarkSearch(b *testing.B) {
	s, _ := benchStore(b, 10000, false)
	texts := benchText(10000)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		words := strings.Fields(texts[(i*7919)%len(texts)])
		q := strings.Join(words[:min(3, len(words))], " ")
		if _, err := s.Search(ctx, memgate.Query{Text: q}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkPutConcurrent is 64 writers sharing group commits, durably.
func BenchmarkPutConcurrent(b *testing.B) {
	s, texts := benchStore(b, 10000, true)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(32) // 64 goroutines on 2 cores
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if _, _, err := s.Put(ctx, memgate.Write{Text: texts[int(i)%len(texts)]}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkOpenClose opens a store of 100 memories, answers one search and
// closes it: the cost of a pool miss.
func BenchmarkOpenClose(b *testing.B) {
	s, _ := benchStore(b, 100, false)
	path := s.Path()
	s.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s, err := Open(path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Search(ctx, memgate.Query{Text: "lorem"}); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// commonTagStore is n memories that each carry the same 30 team tags and one
// of two others, as a team convention produces, and the 64 most common
// words of their text.
func commonTagStore(b testing.TB, n int) (*Store, []string, []string) {
	b.Helper()
	s := openTest(b, func(o *Options) { o.NoSync = true })
	texts := benchText(n)
	tags := make([]string, 0, 32)
	for i := range 30 {
		tags = append(tags, fmt.Sprintf("team-%02d", i))
	}
	var sb strings.Builder
	counts := map[string]int{}
	for i, text := range texts {
		own := append(tags[:30:30], []string{"side-a", "side-b"}[i%2])
		line, _ := json.Marshal(map[string]any{"text": text, "tags": own})
		sb.Write(line)
		sb.WriteByte('\n')
		for _, w := range strings.Fields(strings.ToLower(text)) {
			counts[strings.Trim(w, ".,;:()\"'")]++
		}
	}
	if _, err := s.Import(context.Background(), strings.NewReader(sb.String()), ImportFail); err != nil {
		b.Fatal(err)
	}
	words := make([]string, 0, len(counts))
	for w := range counts {
		if len(search.Terms(w)) == 1 {
			words = append(words, w)
		}
	}
	slices.SortFunc(words, func(a, b string) int { return counts[b] - counts[a] })
	return s, words[:min(64, len(words))], append(tags, "side-a", "side-b")
}

// BenchmarkSearchCommonTags is the 64 most common words narrowed by 32 tags
// every memory but none carries all of: the answer is empty, and its cost
// must not follow the store's size.
func BenchmarkSearchCommonTags(b *testing.B) {
	for _, n := range []int{10000, 40000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, words, tags := commonTagStore(b, n)
			ctx := context.Background()
			for _, c := range []struct {
				name string
				q    memgate.Query
			}{
				{"words+tags", memgate.Query{Text: strings.Join(words, " "), Tags: tags, Limit: 100}},
				{"tags", memgate.Query{Tags: tags, Limit: 100}},
				{"words+team-tags", memgate.Query{Text: strings.Join(words, " "), Tags: tags[:30], Limit: 100}},
				{"words", memgate.Query{Text: strings.Join(words, " "), Limit: 100}},
				{"words+tags-any", memgate.Query{Text: strings.Join(words, " "), Tags: tags, TagsMode: memgate.TagsAny, Limit: 100}},
			} {
				b.Run(c.name, func(b *testing.B) {
					b.ReportAllocs()
					start := cpuTime()
					for b.Loop() {
						if _, err := s.Search(ctx, c.q); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
				})
			}
			for _, order := range []string{memgate.OrderUpdatedDesc, memgate.OrderCreatedAsc} {
				for _, tt := range [][]string{tags[:30], tags} {
					b.Run(fmt.Sprint("list-", len(tt), "-tags-", order), func(b *testing.B) {
						b.ReportAllocs()
						start := cpuTime()
						for b.Loop() {
							if _, err := s.List(ctx, memgate.ListQuery{Tags: tt, Order: order, Limit: 100}); err != nil {
								b.Fatal(err)
							}
						}
						b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
					})
				}
			}
		})
	}
}

// cpuTime is the process's CPU time so far, user and system, in
// nanoseconds: benchmarks report it next to wall time, which a busy machine
// stretches.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkForgetLarge forgets a merged memory of 64 KiB from a 10k store:
// the memory is recorded as gone, and its postings purged at a later merge,
// which the loop's refills run.
func BenchmarkForgetLarge(b *testing.B) {
	s, _ := benchStore(b, 10000, false)
	ctx := context.Background()
	big := strings.Join(benchText(400), " ")[:60<<10]
	var ids []string
	for i := range 64 {
		m, _, err := s.Put(ctx, memgate.Write{Text: fmt.Sprint(i, " ", big)})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	for i := range 5000 { // merge them to disk
		if _, _, err := s.Put(ctx, memgate.Write{Text: fmt.Sprint("filler ", i)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	start := cpuTime()
	for b.Loop() {
		if i == len(ids) {
			b.StopTimer()
			for j := range ids {
				m, _, err := s.Put(ctx, memgate.Write{Text: fmt.Sprint(j, " ", big)})
				if err != nil {
					b.Fatal(err)
				}
				ids[j] = m.ID
			}
			for j := range 5000 {
				if _, _, err := s.Put(ctx, memgate.Write{Text: fmt.Sprint("refill ", i, j)}); err != nil {
					b.Fatal(err)
				}
			}
			i = 0
			b.StartTimer()
		}
		if err := s.Delete(ctx, ids[i], nil); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}
