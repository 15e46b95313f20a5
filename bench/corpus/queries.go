package corpus

import (
	"maps"
	"slices"
	"strings"

	"github.com/memgate/memgate"
)

// Query is one search the benchmark sends, and the memory it should find.
type Query struct {
	Text   string         // words separated by spaces
	Target int            // index of the memory to find; -1 when none should match
	Tags   []string       // the target's tags, for the tag-filtered variant
	Filter map[string]any // the target's metadata, for the metadata-filtered variant
}

// KnownItem makes n known-item queries: each picks a random memory of mems
// and `words` distinct content words of its text (ASCII letters only, longer
// than 3 letters, not a stop word), lowercased, in random order. Memories
// with too few such words are passed over. It returns fewer than n queries
// only when almost no memory has enough words.
func KnownItem(mems []memgate.Write, words, n int, seed int64) []Query {
	if len(mems) == 0 || words <= 0 || n <= 0 {
		return nil
	}
	r := newRand(seed)
	out := make([]Query, 0, n)
	for tries := 0; len(out) < n && tries < 100*n; tries++ {
		t := r.IntN(len(mems))
		cands := ContentWords(mems[t].Text)
		if len(cands) < words {
			continue
		}
		r.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
		out = append(out, Query{
			Text:   strings.Join(cands[:words], " "),
			Target: t,
			Tags:   slices.Clone(mems[t].Tags),
			Filter: maps.Clone(mems[t].Metadata),
		})
	}
	return out
}

// ContentWords returns the distinct words of text a known-item query may
// use, lowercased, in order of first appearance. A word is a run between
// white space with its leading and trailing punctuation removed, and it
// qualifies only if what remains is more than 3 ASCII letters and not a stop
// word. Words glued to digits, dots or hyphens ("www.linux.ie", "know-how")
// are left out, so a query never depends on how a tokenizer splits them.
func ContentWords(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range strings.Fields(text) {
		w := strings.TrimFunc(f, isPunct)
		if len(w) <= 3 || !asciiLetters(w) {
			continue
		}
		w = strings.ToLower(w)
		if stopWords[w] || seen[w] {
			continue
		}
		seen[w] = true
		out = append(out, w)
	}
	return out
}

func isPunct(r rune) bool {
	return strings.ContainsRune("\"'`()[]{}<>.,;:!?*_/\\|-~=+#&%$@^", r)
}

func asciiLetters(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// NoHit makes n queries of three invented words each (eight random
// consonants, such as "zqxvbtkd") that appear in no English text, so every
// one of them should come back empty. Target is -1.
func NoHit(n int, seed int64) []Query {
	const consonants = "bcdfghjklmnpqrstvwxz"
	if n <= 0 {
		return nil
	}
	r := newRand(seed)
	out := make([]Query, n)
	var b strings.Builder
	for i := range out {
		b.Reset()
		for w := range 3 {
			if w > 0 {
				b.WriteByte(' ')
			}
			for range 8 {
				b.WriteByte(consonants[r.IntN(len(consonants))])
			}
		}
		out[i] = Query{Text: b.String(), Target: -1}
	}
	return out
}

// stopWords are the English function words longer than 3 letters (shorter
// ones never qualify), after the usual Snowball and NLTK lists, plus a few
// that carry no topic in glosses and mails.
var stopWords = setOf(`
about above after again against also although among another anyone anything
around because been before being below besides between both cannot could
didn does doesn doing done down during each either else enough etc even ever
every from further have having hence here hers herself himself however into
itself just less like many more most much must myself neither never none
nothing once only onto other others otherwise ought ours ourselves over
perhaps quite rather really same shall should since some someone something
still such than that their theirs them themselves then there therefore these
they thing things this those though through thus together toward towards
under unless until upon used using usually very want well were what whatever
when whenever where whereas whether which while whom whose will with within
without would your yours yourself yourselves
`)

func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}
