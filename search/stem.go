package search

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/kljensen/snowball/english"
)

// cacheSlots bounds the stem cache. Snowball's stemmer allocates a rune
// slice and a string for every word; prose repeats a few thousand words, so
// a direct-mapped cache of recent ones makes most lookups allocation-free.
// It is at most cacheSlots × (2 × MaxTermBytes + overhead): under 1 MiB.
const cacheSlots = 4096

// cached is immutable once published, so readers need no lock.
type cached struct {
	word string // folded
	term string
	keep bool
}

var (
	cache     [cacheSlots]atomic.Pointer[cached]
	cacheSeed = maphash.MakeSeed()
)

// termOf returns the term for a folded word, and false when it has none
// (a stop word). A collision just replaces the slot's entry.
func termOf(word []byte) (string, bool) {
	slot := &cache[maphash.Bytes(cacheSeed, word)&(cacheSlots-1)]
	if c := slot.Load(); c != nil && c.word == string(word) {
		return c.term, c.keep
	}
	w := string(word)
	term, keep := stem(w)
	slot.Store(&cached{word: w, term: term, keep: keep})
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
