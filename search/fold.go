package search

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// foldScripts are the scripts whose accents analysis drops: in them an
// accent marks the same word (café, cafe), and people type it or not.
var foldScripts = []*unicode.RangeTable{unicode.Latin, unicode.Greek, unicode.Cyrillic}

// unaccent returns r without its accents when r is a letter of foldScripts
// (é: e, ё: е, ά: α), and whether r is such a letter, so that a combining
// mark that follows it is dropped too. Letters that do not decompose (ø,
// ß, æ) stay as they are.
func unaccent(r rune) (rune, bool) {
	if !unicode.In(r, foldScripts...) {
		return r, false
	}
	var b [utf8.UTFMax]byte
	n := utf8.EncodeRune(b[:], r)
	d := norm.NFD.Properties(b[:n]).Decomposition()
	if len(d) == 0 {
		return r, true
	}
	base, size := utf8.DecodeRune(d)
	for rest := d[size:]; len(rest) > 0; {
		m, sz := utf8.DecodeRune(rest)
		if !unicode.Is(unicode.Mn, m) {
			return r, true // not a letter and its accents: a compatibility form
		}
		rest = rest[sz:]
	}
	return base, true
}
