package search

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/kljensen/snowball/english"
)

// cacheSets bounds the stem cache. Snowball's stemmer allocates a rune
// slice and strings for every word and takes about half a microsecond; prose
// repeats a few thousand words, so a cache of recent ones makes most lookups
// allocation-free; a store's whole vocabulary is tens of thousands of words,
// and a cache that holds most of it keeps the write path off the stemmer.
// Each set holds two words, so two frequent words that hash alike do not
// keep evicting each other. At most 2 × cacheSets entries of under 200 bytes
// each: about 6 MiB, filled only as words are seen.
const cacheSets = 16384

// cached is immutable once published, so readers need no lock.
type cached struct {
	word string // folded
	term string
	keep bool
}

var (
	cache     [cacheSets][2]atomic.Pointer[cached]
	cacheSeed = maphash.MakeSeed()
)

// termOf returns the term for a folded word, and false when it has none
// (a stop word).
//
// A new word goes first in its set and the first moves second, so a set
// keeps its two most recently added words. The two stores are not atomic
// together: a racing writer can lose an entry or hold one twice, which only
// costs a later miss.
func termOf(word []byte) (string, bool) {
	set := &cache[maphash.Bytes(cacheSeed, word)&(cacheSets-1)]
	a := set[0].Load()
	if a != nil && a.word == string(word) {
		return a.term, a.keep
	}
	if b := set[1].Load(); b != nil && b.word == string(word) {
		return b.term, b.keep
	}
	w := string(word)
	term, keep := stem(w)
	if a != nil {
		set[1].Store(a)
	}
	set[0].Store(&cached{word: w, term: term, keep: keep})
	return term, keep
}

// stem maps a folded word to its term: stop words have none, words made of
// letters become their Snowball English stem, others stay as they are.
//
// A word whose stem is a stop word ("ares" → "are") keeps its own form, so
// that analysing any term again always yields a term: a stored term can
// always be searched for.
func stem(w string) (string, bool) {
	if english.IsStopWord(w) {
		return "", false
	}
	if !stemmable(w) {
		return w, true
	}
	s := english.Stem(w, false)
	if s == "" || len(s) > MaxTermBytes || english.IsStopWord(s) {
		return w, true
	}
	return s, true
}

// stemmable reports whether w is made of letters (and their marks) and ends
// in an ASCII letter. Every Porter2 rule rewrites an ASCII suffix, so the
// stemmer leaves other words unchanged, and skipping it saves its
// allocations on CJK, Cyrillic and the like.
func stemmable(w string) bool {
	if last := w[len(w)-1]; last < 'a' || last > 'z' {
		return false
	}
	for i := 0; i < len(w); {
		c, size := classAt(w, i)
		if c > caseless && c != mark {
			return false
		}
		i += size
	}
	return true
}
