package search

import (
	"testing"

	"github.com/kljensen/snowball/english"
)

// stem skips the Snowball stemmer for words that do not end in an ASCII
// letter, on the grounds that it would leave them unchanged. Check that
// claim on words built to tempt each rule with a non-ASCII tail.
func TestStemSkipsOnlyWordsTheStemmerKeeps(t *testing.T) {
	for _, w := range []string{
		"école", "naïve", "straße", "generationé", "runningü", "happiness\u0301",
		"москва", "αθηνα", "テキスト", "日", "yyyé", "ational\u00e9", "cafe\u0301",
	} {
		if stemmable(w) {
			continue
		}
		if got := english.Stem(w, false); got != w {
			t.Errorf("english.Stem(%q) = %q, but stem skips it as unchanged", w, got)
		}
	}
}

func TestStem(t *testing.T) {
	tests := []struct {
		name     string
		word     string
		wantTerm string
		wantKeep bool
	}{
		{"a stop word has no term", "because", "", false},
		{"an English word is stemmed", "generations", "generat", true},
		{"a number is kept as it is", "2024", "2024", true},
		{"an identifier's whole form is kept as it is", "snake_case", "snake_case", true},
		{"a word whose stem is a stop word keeps its own form", "ares", "ares", true},
		{"a short word is kept", "go", "go", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 { // the second time from the cache
				term, keep := termOf([]byte(tt.word))
				if term != tt.wantTerm || keep != tt.wantKeep {
					t.Fatalf("termOf(%q) = %q, %v; want %q, %v", tt.word, term, keep, tt.wantTerm, tt.wantKeep)
				}
			}
		})
	}
}
