package search

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestAppendTerms(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"an empty text has no terms", "", nil},
		{"a verb in -ing is stemmed to its root", "running", []string{"run"}},
		{"a plural is stemmed the Snowball way", "Memories", []string{"memori"}},
		{"words that differ only by suffix share a term", "connected connection connecting", []string{"connect", "connect", "connect"}},
		{"stop words are dropped", "the cat and the hat", []string{"cat", "hat"}},
		{"a capitalised stop word is still a stop word", "The THE tHe", nil},
		{"repeats are kept in text order", "beta alpha beta", []string{"beta", "alpha", "beta"}},
		{"accented capitals fold to lower case, without their accents", "ÉCOLE", []string{"ecol"}},
		{"Greek and Cyrillic capitals fold to lower case", "ΑΘΗΝΑ МОСКВА", []string{"αθηνα", "москва"}},
		{"snake_case yields the whole and its parts", "snake_case", []string{"snake_case", "snake", "case"}},
		{"camelCase splits at the capital and stems the whole", "parseHTTPRequest", []string{"parsehttprequest", "pars", "http", "request"}},
		{"an acronym ends at the capital that starts the next word", "HTTPServer2", []string{"httpserver2", "http", "server", "2"}},
		{"a dotted name yields the whole and its parts", "pkg.sub.Name", []string{"pkg.sub.name", "pkg", "sub", "name"}},
		{"a path yields the whole and every part", "src/server/http.go", []string{"src/server/http.go", "src", "server", "http", "go"}},
		{"a path keeps its parts that are not stop words", "a/b/c", []string{"a/b/c", "b", "c"}},
		{"a hyphenated word yields the whole and its parts", "foo-bar", []string{"foo-bar", "foo", "bar"}},
		{"a date stays whole and splits into numbers", "2024-01-15", []string{"2024-01-15", "2024", "01", "15"}},
		{"a number is kept as written", "3.14 and 1000", []string{"3.14", "3", "14", "1000"}},
		{"leading and trailing underscores are not part of the term", "__init__", []string{"init"}},
		{"contractions and possessives leave no apostrophe terms", "don't user’s it's", []string{"user"}},
		{"ideographs are indexed one by one", "日本語", []string{"日", "本", "語"}},
		{"katakana stays one word", "テキスト", []string{"テキスト"}},
		{"emoji carry no terms", "👍 🐶 🇫🇷 👩\u200d💻", nil},
		{"emoji next to words leave the words", "ship🚀today", []string{"ship", "today"}},
		{"a soft hyphen inside a word is ignored", "soft\u00adhyphen", []string{"softhyphen"}},
		{"a combining accent on a Latin letter folds away", "cafe\u0301", []string{"cafe"}},
		{"invalid UTF-8 separates words and never reaches a term", "\xff\xfeabc\x00def\xc3", []string{"abc", "def"}},
		{"a word of exactly 64 bytes is kept", strings.Repeat("x", 64), []string{strings.Repeat("x", 64)}},
		{"a word of 65 bytes is dropped, not truncated", strings.Repeat("x", 65), nil},
		{"a long identifier loses its whole form but keeps its parts",
			"this_identifier_name_is_much_longer_than_sixty_four_bytes_in_total",
			[]string{"identifi", "name", "much", "longer", "sixti", "four", "byte", "total"}},
		{"a word whose stem is a stop word keeps its own form", "ares", []string{"ares"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Terms(tt.text)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Terms(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

func TestAppendTermsAppendsToDst(t *testing.T) {
	dst := []string{"kept"}
	got := AppendTerms(dst, "Running dogs")
	want := []string{"kept", "run", "dog"}
	if !slices.Equal(got, want) {
		t.Errorf("AppendTerms = %q, want %q", got, want)
	}
}

func TestTermCounts(t *testing.T) {
	counts, length := TermCounts("The cat saw the other cats; cats SAW it.")
	want := map[string]int{"cat": 3, "saw": 2}
	if length != 5 {
		t.Errorf("length = %d, want 5", length)
	}
	if len(counts) != len(want) {
		t.Errorf("counts = %v, want %v", counts, want)
	}
	for term, n := range want {
		if counts[term] != n {
			t.Errorf("counts[%q] = %d, want %d", term, counts[term], n)
		}
	}
}

// The stem cache is shared by every goroutine: analysing concurrently must
// give what analysing alone gives (and, under -race, race nothing).
func TestAppendTermsIsSafeConcurrently(t *testing.T) {
	texts := []string{
		"The Memories are running through parseHTTPRequest in src/server/http.go",
		"ÉCOLE 日本語 connected connection connecting snake_case",
		"generously generous generation generations generator",
	}
	want := make([][]string, len(texts))
	for i, text := range texts {
		want[i] = Terms(text)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for n := range 200 {
				i := (g + n) % len(texts)
				if got := Terms(texts[i]); !slices.Equal(got, want[i]) {
					t.Errorf("Terms(%q) = %q, want %q", texts[i], got, want[i])
					return
				}
			}
		})
	}
	wg.Wait()
}

func FuzzAppendTerms(f *testing.F) {
	for _, seed := range []string{
		"",
		"The Memories are running!",
		"snake_case parseHTTPRequest pkg.sub.Name src/server/http.go HTTPServer2",
		"ÉCOLE straße İstanbul ΣΊΣΥΦΟΣ",
		"日本語テキスト 한국어 ภาษาไทย العربية",
		"👍🏽 👩‍💻 🇫🇷 a\u200d👍",
		"cafe\u0301 soft\u00adhyphen \u200bzero\u200dwidth",
		"\xff\xfe\x00abc\xc3(def\xed\xa0\x80",
		"don't user’s o'clock rock'n'roll",
		"2024-01-15 v1-beta 3.14 1,000 x² H₂O Ⅻ",
		strings.Repeat("x", 65) + " " + strings.Repeat("ab_", 40),
		"ares ared aredes U.S. e.g. foo::bar --flag /path/",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, term := range Terms(text) {
			switch {
			case term == "":
				t.Fatalf("Terms(%q) holds an empty term", text)
			case len(term) > MaxTermBytes:
				t.Fatalf("Terms(%q) holds %q, longer than %d bytes", text, term, MaxTermBytes)
			case !utf8.ValidString(term):
				t.Fatalf("Terms(%q) holds invalid UTF-8 %q", text, term)
			case strings.ToLower(term) != term:
				t.Fatalf("Terms(%q) holds %q, which is not lower case", text, term)
			case len(Terms(term)) == 0:
				t.Fatalf("Terms(%q) holds %q, which has no terms of its own: it could never be searched for", text, term)
			}
		}
	})
}

func TestAccentsFold(t *testing.T) {
	for _, tt := range []struct{ text, query string }{
		{"Café", "cafe"},
		{"résumé", "resume"},
		{"Cafe\u0301 au lait", "café"}, // a combining acute accent
		{"naïve Ångström", "naive angstrom"},
		{"Ёлка", "елка"},
		{"Ελλάδα", "ελλαδα"},
	} {
		got, want := Terms(tt.text), Terms(tt.query)
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("Terms(%q) = %q: %q does not find it (%q)", tt.text, got, tt.query, want)
			}
		}
	}
	// Marks that make other words stay.
	if got := Terms("किताब"); len(got) != 1 || got[0] != "किताब" {
		t.Errorf("Terms(Devanagari) = %q, want the word as it is", got)
	}
	if got := Terms("straße øre"); !slices.Equal(got, []string{"straße", "øre"}) {
		t.Errorf("Terms = %q: letters that do not decompose stay", got)
	}
}

// CountTerms counts a query's terms as TermCounts counts every term.
func TestCountTermsAgreesWithTermCounts(t *testing.T) {
	text := "Café résumé: the budget-meeting notes, INV-4521 and the budget again"
	counts, length := TermCounts(text)
	terms := []string{"budget", "cafe", "absent", "notes"}
	tf := []int{9, 9, 9, 9}
	if n := CountTerms(text, terms, tf); n != length {
		t.Fatalf("length %d, TermCounts says %d", n, length)
	}
	for i, term := range terms {
		if tf[i] != counts[term] {
			t.Errorf("%q: %d, TermCounts says %d", term, tf[i], counts[term])
		}
	}
}
