package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/quick"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/memgate/memgate"
)

// Metadata at the 8 KiB limit (measured without HTML escaping) full of
// characters that JSON escapes for HTML made an index term over bbolt's key
// limit: the merge failed, writes were refused and, once closed, the store
// no longer opened. Every such memory must merge, and the store reopen.
func TestLargestMetadataTermMerges(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	opts := Options{NoSync: true, MergeEvery: 8}
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	values := []string{strings.Repeat("<", 8183), strings.Repeat(">", 8183), strings.Repeat("&", 8183),
		strings.Repeat("<&>", 8183/3) + "<<"}
	for i := range 20 {
		v := values[i%len(values)]
		md := map[string]any{"zz": v}
		if _, err := memgate.NormalizeMetadata("metadata", md); err != nil {
			t.Fatalf("the metadata is not legal: %v", err)
		}
		put(t, s, memgate.Write{ID: "m" + string(rune('a'+i)), Text: "escaped metadata", Metadata: md})
	}
	if s.index.current().len() >= opts.MergeEvery {
		t.Fatalf("tail holds %d documents after merges every %d", s.index.current().len(), opts.MergeEvery)
	}
	if _, _, err := s.Put(ctx, memgate.Write{ID: "after", Text: "a write after the merges"}); err != nil {
		t.Fatalf("write after merges: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path, opts); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	for i, v := range values {
		res, err := s.Search(ctx, memgate.Query{Filter: map[string]any{"zz": v}, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if want := 5; len(res.Hits) != want {
			t.Errorf("filter on value %d: %d hits, want %d", i, len(res.Hits), want)
		}
	}
	if _, err := s.Get(ctx, "ma"); err != nil {
		t.Fatal(err)
	}
	checkKeys(t, s)
}

// checkKeys fails the test if any key of the store's file is over bbolt's
// limit or if one posting term key is a prefix of another.
func checkKeys(t *testing.T, s *Store) {
	t.Helper()
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, _ []byte) error {
				if len(k) > bolt.MaxKeySize {
					t.Errorf("bucket %s: a key of %d bytes", name, len(k))
				}
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Every key of the plain sealer, whatever its content, fits bbolt with a
// chunk key's document number after it, and no key is a prefix of another.
func TestPlainKeysBoundedAndPrefixFree(t *testing.T) {
	var ps plainSealer
	kinds := []byte{kindID, kindWord, kindTag, kindMeta}
	contents := []string{"", "a", "ab", "\x00", "a\x00b", "\xff", "a\xffb",
		strings.Repeat("x", maxPlainContent), strings.Repeat("x", maxPlainContent+1),
		strings.Repeat("x", maxPlainContent-1) + "\xff", strings.Repeat("é", 40000),
		strings.Repeat("x", keyPrefixBytes), strings.Repeat("x", keyPrefixBytes+1) + "\x00",
		strings.Repeat("x", 1<<17)}
	rng := rand.New(rand.NewSource(1))
	alphabet := []string{"a", "b", "\x00", "\xff", "é", "<", "\"", "\\"}
	for range 300 {
		var b strings.Builder
		n := rng.Intn(200)
		if rng.Intn(4) == 0 {
			n = maxPlainContent - 100 + rng.Intn(200)
		}
		for b.Len() < n {
			b.WriteString(alphabet[rng.Intn(len(alphabet))])
		}
		contents = append(contents, b.String())
	}
	seen := map[string]string{}
	var keys [][]byte
	for _, kind := range kinds {
		for _, c := range contents {
			k := ps.key(kind, c)
			if len(k)+8 > bolt.MaxKeySize {
				t.Fatalf("content of %d bytes: a chunk key of %d bytes", len(c), len(k)+8)
			}
			if prev, ok := seen[string(k)]; ok && prev != string(kind)+c {
				t.Fatalf("two contents of %d and %d bytes share a key", len(prev), len(c))
			}
			if _, ok := seen[string(k)]; !ok {
				keys = append(keys, k)
			}
			seen[string(k)] = string(kind) + c
		}
	}
	for i, a := range keys {
		for j, b := range keys {
			if i != j && bytes.HasPrefix(b, a) {
				t.Fatalf("key of %d bytes is a prefix of one of %d", len(a), len(b))
			}
		}
	}
	f := func(kind byte, a, b string) bool {
		ka, kb := ps.key(kind, a), ps.key(kind, b)
		return len(ka)+8 <= bolt.MaxKeySize && (a == b) == bytes.Equal(ka, kb) &&
			(a == b || !bytes.HasPrefix(ka, kb) && !bytes.HasPrefix(kb, ka))
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 2000, Rand: rng}); err != nil {
		t.Fatal(err)
	}
}

// Terms that were legal keep the key they always had, so stores written
// before long terms were hashed read as before.
func TestPlainKeysKeepTheirFormUpToTheBound(t *testing.T) {
	var ps plainSealer
	for _, n := range []int{0, 1, 64, 256, 8192, maxPlainContent} {
		c := strings.Repeat("<", n)
		want := append(append([]byte{kindMeta}, c...), 0)
		if got := ps.key(kindMeta, c); !bytes.Equal(got, want) {
			t.Errorf("content of %d bytes: key changed form", n)
		}
	}
	c := strings.Repeat("<", maxPlainContent+1)
	if got := ps.key(kindMeta, c); len(got) >= len(c) {
		t.Errorf("content of %d bytes: key of %d bytes, want it hashed", len(c), len(got))
	}
	// The largest chunk key of an unhashed term is exactly bbolt's limit.
	if got := len(chunkKey(ps.key(kindMeta, strings.Repeat("a", maxPlainContent)), 1)); got != bolt.MaxKeySize {
		t.Errorf("largest chunk key = %d bytes, want %d", got, bolt.MaxKeySize)
	}
}

// StoreError names a full disk and a read-only filesystem, wherever they
// are in the chain, and leaves every other error as memgate.Wrap makes it.
func TestStoreErrorNamesTheCondition(t *testing.T) {
	path := &fs.PathError{Op: "write", Path: "/somewhere/memgate.db", Err: syscall.ENOSPC}
	for _, c := range []struct {
		err       error
		code      memgate.Code
		condition string
	}{
		{path, memgate.CodeUnavailable, "the disk is full"},
		{memgate.Internal("storage.merge", path), memgate.CodeUnavailable, "the disk is full"},
		{fmt.Errorf("commit: %w", syscall.EDQUOT), memgate.CodeUnavailable, "the disk quota is exhausted"},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.EROFS}, memgate.CodeUnavailable, "the filesystem is read-only"},
		{berrors.ErrDatabaseReadOnly, memgate.CodeUnavailable, "the filesystem is read-only"},
		{errors.New("something else"), memgate.CodeInternal, ""},
		{errNotFound, memgate.CodeNotFound, ""},
	} {
		err := StoreError("storage.test", c.err)
		if got := memgate.ErrorCode(err); got != c.code {
			t.Fatalf("StoreError(%v) has code %s, want %s", c.err, got, c.code)
		}
		var e *memgate.Error
		errors.As(err, &e)
		if !strings.Contains(e.Message, c.condition) || strings.Contains(e.Message, "somewhere") {
			t.Fatalf("StoreError(%v) says %q", c.err, e.Message)
		}
		if c.code == memgate.CodeUnavailable && !errors.Is(err, c.err) {
			t.Fatalf("StoreError(%v) lost its cause", c.err)
		}
	}
	if StoreError("storage.test", nil) != nil {
		t.Fatal("StoreError(nil) is not nil")
	}
}
