package embed

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memgate/memgate/search"
)

func cos(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func TestLoadFileReadsBothFormatsAlike(t *testing.T) {
	wink, sum, err := LoadFile("testdata/wink-4d.json", "")
	if err != nil {
		t.Fatal(err)
	}
	glove, _, err := LoadFile("testdata/glove-4d.txt", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(sum) != 64 {
		t.Errorf("hash %q, want 64 hex digits", sum)
	}
	if wink.Len() != 30 || glove.Len() != 30 || wink.Dim() != 4 || glove.Dim() != 4 {
		t.Fatalf("wink %d×%d, glove %d×%d; want 30×4 each", wink.Len(), wink.Dim(), glove.Len(), glove.Dim())
	}
	for i := range wink.Len() {
		w, vec, rank := wink.Word(i)
		if rank != i {
			t.Errorf("%q has rank %d, want %d (the file's)", w, rank, i)
		}
		if c := cos(vec, glove.Lookup(w)); math.Abs(c-1) > 1e-5 {
			t.Errorf("%q differs between the formats: cos %.6f", w, c)
		}
		if n := cos(vec, vec); math.Abs(n-1) > 1e-5 {
			t.Errorf("%q is not of unit length: %.6f", w, n)
		}
	}
	if wink.Lookup("café") == nil {
		t.Error("a word with an accent was lost")
	}
}

func TestLoadFileRefusesBrokenFiles(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"empty.json":       "",
		"no-vectors.json":  `{"dimensions":4,"words":[]}`,
		"wrong-size.json":  `{"dimensions":4,"vectors":{"a":[1,2,3]}}`,
		"truncated.json":   `{"dimensions":4,"vectors":{"a":[1,2,3,4,`,
		"late-dims.json":   `{"vectors":{"a":[1,2,3,4]},"dimensions":4}`,
		"ragged.txt":       "a 1 2 3\nb 1 2\n",
		"not-a-number.txt": "a 1 x 3\n",
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := LoadFile(path, ""); err == nil {
			t.Errorf("%s loaded", name)
		}
	}
	if _, _, err := LoadFile(filepath.Join(dir, "missing.json"), ""); err == nil {
		t.Error("a missing file loaded")
	}
}

func TestCacheReloadsTheSameVectors(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "wink.json")
	raw, err := os.ReadFile("testdata/wink-4d.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache")
	first, sum, err := LoadFile(src, cache)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cache, sum+".vec")); err != nil {
		t.Fatalf("no cache beside the data: %v", err)
	}
	second, err := readCache(filepath.Join(cache, sum+".vec"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range first.Len() {
		w, a, ra := first.Word(i)
		w2, b, rb := second.Word(i)
		if w != w2 || ra != rb || cos(a, b) < 1-1e-6 {
			t.Fatalf("word %d: %q/%d vs %q/%d from the cache", i, w, ra, w2, rb)
		}
	}
	// A damaged cache is not used: the file is parsed again.
	if err := os.WriteFile(filepath.Join(cache, sum+".vec"), []byte(cacheMagic+"xx"), 0o600); err != nil {
		t.Fatal(err)
	}
	third, _, err := LoadFile(src, cache)
	if err != nil || third.Len() != first.Len() {
		t.Fatalf("after a damaged cache: %v, %d words", err, third.Len())
	}
	// A changed file gets its own cache.
	if err := os.WriteFile(src, append(raw, ' '), 0o600); err != nil {
		t.Fatal(err)
	}
	_, sum2, err := LoadFile(src, cache)
	if err != nil || sum2 == sum {
		t.Fatalf("a changed file kept its hash (%v)", err)
	}
}

func TestStaticIsNotReadyThenEmbeds(t *testing.T) {
	s := NewStatic("testdata/wink-4d.json", "")
	<-s.Ready()
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	name, version := s.Model()
	if name != "wink-4d" || !strings.HasPrefix(version, "sha256:") || len(version) != 19 {
		t.Errorf("Model() = %q, %q", name, version)
	}
	vecs, err := s.Embed(context.Background(), []string{"what car do I drive", "Bought a new automobile last spring", "The physician said", "zzz qqq"})
	if err != nil {
		t.Fatal(err)
	}
	if vecs[3] != nil {
		t.Error("a text without known words got a vector")
	}
	if c, d := cos(vecs[0], vecs[1]), cos(vecs[0], vecs[2]); c <= d || c < 0.6 {
		t.Errorf("cos(car query, automobile memory) = %.3f, cos(car query, physician memory) = %.3f", c, d)
	}

	broken := NewStatic(filepath.Join(t.TempDir(), "missing.json"), "")
	<-broken.Ready()
	if _, err := broken.Embed(context.Background(), []string{"car"}); !errors.Is(err, search.ErrUnavailable) {
		t.Errorf("a file that failed to load: %v, want ErrUnavailable", err)
	}
	if broken.Err() == nil {
		t.Error("Err() is nil after a failed load")
	}
}
