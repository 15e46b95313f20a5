package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
)

// distinctWords is a text of n words no other memory holds.
func distinctWords(doc, n int) string {
	var b strings.Builder
	for j := range n {
		b.WriteString(word(doc, j))
		b.WriteByte(' ')
	}
	return b.String()
}

// word is the j-th word of distinctWords(doc, ...), letters only so that it
// is one term.
func word(doc, j int) string {
	letters := func(n int) string {
		s := []byte(strconv.Itoa(n))
		for i, c := range s {
			s[i] = "bcdfghjklm"[c-'0']
		}
		return string(s)
	}
	return "q" + letters(doc) + "v" + letters(j) + "x"
}

// bigWords is a text of about size bytes of words no other memory holds.
func bigWords(doc, size int) string {
	var b strings.Builder
	for j := 0; b.Len() < size; j++ {
		b.WriteString(word(doc, j))
		b.WriteByte(' ')
	}
	return b.String()
}

// mergedMark is the store's merged mark on disk.
func mergedMark(t *testing.T, s *Store) uint64 {
	t.Helper()
	var m uint64
	if err := s.db.View(func(tx *bolt.Tx) error {
		m = getU64(tx.Bucket(bucketMeta), metaMerged)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return m
}

// The tail's estimate counts at least its term keys and its postings.
func TestTailBytesCountTermsAndPostings(t *testing.T) {
	s := openTest(t, func(o *Options) { o.MergeEvery = 1 << 20 })
	for i := range 50 {
		put(t, s, memgate.Write{ID: fmt.Sprintf("m%04d", i), Text: bigWords(i, 2000) + " shared words here"})
	}
	tl := s.index.current()
	var keys, postings int64
	tl.mu.RLock()
	for k, ps := range tl.terms {
		keys += int64(len(k))
		postings += int64(len(ps))
	}
	tl.mu.RUnlock()
	floor := keys + postings*tailPostingBytes
	if got := tl.bytes.Load(); got < floor || got > 4*floor {
		t.Fatalf("tail bytes = %d; its keys and postings alone are %d", got, floor)
	}
	// A delete in the tail is counted, and taken back with a failed commit
	// like any change (undo).
	before := tl.bytes.Load()
	if err := s.Delete(context.Background(), "m0001", nil); err != nil {
		t.Fatal(err)
	}
	if got := tl.bytes.Load(); got != before+tailDeadBytes {
		t.Fatalf("tail bytes after a delete = %d, want %d", got, before+tailDeadBytes)
	}
}

// Writes of many distinct words merge the tail by bytes, long before its
// number of documents would, and the tail stays under its bound.
func TestTailBoundedByBytes(t *testing.T) {
	const bound = 256 << 10
	s := openTest(t, func(o *Options) { o.MergeEvery = 1 << 20; o.MergeBytes = bound })
	var peak int64
	for i := range 60 {
		put(t, s, memgate.Write{ID: fmt.Sprintf("m%04d", i), Text: bigWords(i, 6000)})
		peak = max(peak, s.index.current().bytes.Load())
		if peak >= bound {
			t.Fatalf("after write %d the tail holds %d bytes, bound %d", i, peak, bound)
		}
	}
	merged := mergedMark(t, s)
	if merged == 0 {
		t.Fatal("no merge happened")
	}
	if n := s.index.current().len(); n >= 60 {
		t.Fatalf("tail holds %d documents", n)
	}
	// A merge by bytes loses nothing.
	res, err := s.Search(context.Background(), memgate.Query{Text: word(7, 5)})
	if err != nil || len(res.Hits) != 1 || res.Hits[0].ID != "m0007" {
		t.Fatalf("search after merges: %v, %v", res.Hits, err)
	}
	t.Logf("merged up to document %d; peak tail %d bytes", merged, peak)
}

// Just under the bound the tail is not merged; at the bound it is.
func TestTailBytesBoundIsExact(t *testing.T) {
	s := openTest(t, func(o *Options) { o.MergeEvery = 1 << 20; o.MergeBytes = 1 << 30 })
	put(t, s, memgate.Write{ID: "a", Text: bigWords(1, 5000)})
	n := s.index.current().bytes.Load()
	s.opts.MergeBytes = n + 1
	if s.index.due() {
		t.Fatalf("merge due at %d bytes under a bound of %d", n, n+1)
	}
	s.opts.MergeBytes = n
	if !s.index.due() {
		t.Fatalf("no merge due at %d bytes under a bound of %d", n, n)
	}
}

// Stores that share a budget keep their tails together under it: a store
// over its share merges, and an idle store holding most of the budget is
// asked to merge by the store that writes.
func TestTailBudgetShared(t *testing.T) {
	const limit = 512 << 10
	budget := NewTailBudget(limit)
	dir := t.TempDir()
	open := func(name string) *Store {
		s, err := Open(filepath.Join(dir, name, FileName), Options{NoSync: true, MergeEvery: 1 << 20, TailBudget: budget})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	idle, busy := open("idle"), open("busy")
	// The idle store takes 3/4 of the budget, more than its half.
	for i := 0; idle.index.current().bytes.Load() < limit*3/4; i++ {
		put(t, idle, memgate.Write{ID: fmt.Sprintf("m%04d", i), Text: bigWords(i, 3000)})
	}
	if budget.Used() != idle.index.current().bytes.Load() {
		t.Fatalf("budget used %d, the only tail holds %d", budget.Used(), idle.index.current().bytes.Load())
	}
	if mergedMark(t, idle) != 0 {
		t.Fatal("the idle store merged within the budget")
	}
	// The busy store writes until the budget is passed: it is within its
	// share, so it asks the idle store to merge.
	for i := 0; mergedMark(t, idle) == 0 && i < 200; i++ {
		put(t, busy, memgate.Write{ID: fmt.Sprintf("b%04d", i), Text: bigWords(10000+i, 3000)})
	}
	deadline := time.Now().Add(10 * time.Second)
	for mergedMark(t, idle) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if mergedMark(t, idle) == 0 {
		t.Fatal("the idle store over its share never merged")
	}
	// The busy store goes on; it merges once it holds more than its share.
	for i := 200; i < 300; i++ {
		put(t, busy, memgate.Write{ID: fmt.Sprintf("b%04d", i), Text: bigWords(10000+i, 3000)})
		if n := busy.index.current().bytes.Load(); n > limit {
			t.Fatalf("the busy store's tail holds %d bytes, the whole budget is %d", n, limit)
		}
	}
	if mergedMark(t, busy) == 0 {
		t.Fatal("the busy store over its share never merged")
	}
	if err := idle.Close(); err != nil {
		t.Fatal(err)
	}
	if err := busy.Close(); err != nil {
		t.Fatal(err)
	}
	if budget.Used() != 0 {
		t.Fatalf("budget used %d after every store closed", budget.Used())
	}
}
