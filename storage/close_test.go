package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memgate/memgate"
)

// A tail of few terms is merged at close; one of many distinct terms is
// left for the next open to rebuild, so that closing costs no more than
// two merge slices, and nothing is lost either way.
func TestCloseMergesOnlyASmallTail(t *testing.T) {
	for _, tc := range []struct {
		name       string
		wordsEach  int
		wantMerged bool
	}{
		{"few terms", 4, true},
		{"many distinct terms", 300, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "stores", "default", FileName)
			s, err := Open(path, Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			const docs = closeMerge + 4
			for i := range docs {
				words := make([]string, tc.wordsEach)
				for j := range words {
					words[j] = fmt.Sprintf("w%dx%d", i, j)
				}
				put(t, s, memgate.Write{ID: fmt.Sprint("m", i), Text: strings.Join(words, " ")})
			}
			if n := s.index.current().termCount(); tc.wantMerged == (n > closeMergeTerms) {
				t.Fatalf("the tail holds %d terms: the case does not test what it says", n)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = Open(path, Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if merged := s.index.current().len() == 0; merged != tc.wantMerged {
				t.Fatalf("merged at close: %v, want %v", merged, tc.wantMerged)
			}
			res, err := s.Search(context.Background(), memgate.Query{Text: fmt.Sprintf("w%dx%d", docs-1, 1)})
			if err != nil || len(res.Hits) == 0 || res.Hits[0].ID != fmt.Sprint("m", docs-1) {
				t.Fatalf("search after reopening: %v, %d hits", err, len(res.Hits))
			}
		})
	}
}
