package storage

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/bench/corpus"
)

// benchText makes n memories of about 176 bytes of synthetic text.
func benchText(n int) []string { return corpus.Synthetic(n) }

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
