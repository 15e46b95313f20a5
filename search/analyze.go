package search

import (
	"slices"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/clipperhouse/uax29/v2/words"
)

// MaxTermBytes is the longest term kept, in bytes. Longer words are dropped,
// not truncated: a truncated prefix would match words that are not there.
const MaxTermBytes = 64

// segmenter is copied for every text. Its split function keeps paths
// (src/server/http.go), dates (2024-01-15) and hyphenated names in one
// segment, so they can be indexed whole as well as by their parts; UAX #29
// already joins '.', '_', ':' and apostrophes. Setting joiners per call would
// allocate a method value each time, a copy does not.
var segmenter = func() words.Iterator[string] {
	it := words.FromString("")
	it.Joiners(&words.Joiners[string]{Middle: []rune{'-', '/'}})
	return *it
}()

// AppendTerms appends the index terms of text to dst and returns it. Terms
// appear in text order, with repeats; an identifier's whole form comes just
// before its parts. Every term is valid, lower-case UTF-8 of 1 to
// MaxTermBytes bytes, whatever text holds (invalid UTF-8 included).
//
// Terms never share memory with text, so keeping them does not keep text.
// AppendTerms is safe for concurrent use.
func AppendTerms(dst []string, text string) []string {
	it := segmenter
	it.SetText(text)
	for it.Next() {
		seg := it.Value()
		if len(seg) == 1 && seg[0] < utf8.RuneSelf && asciiClass[seg[0]] >= sep {
			continue // a space or punctuation: most segments of prose
		}
		if plainWord(seg) {
			dst = appendWord(dst, seg)
			continue
		}
		dst = appendSegment(dst, seg)
	}
	return dst
}

// plainWord reports whether seg is one part without looking at its runes one
// by one: ASCII lower-case letters, perhaps capitalised, or ASCII digits.
// Most words of prose are.
func plainWord(seg string) bool {
	lo, hi := byte('a'), byte('z')
	i := 0
	switch c := seg[0]; {
	case '0' <= c && c <= '9':
		lo, hi = '0', '9'
	case 'A' <= c && c <= 'Z':
		i = 1
	}
	for ; i < len(seg); i++ {
		if c := seg[i]; c < lo || c > hi {
			return false
		}
	}
	return true
}

// Terms returns the index terms of text; see AppendTerms.
func Terms(text string) []string {
	return AppendTerms(nil, text)
}

// termsPool recycles TermCounts' scratch list: the map is what the caller
// keeps, the list in text order is thrown away.
var termsPool = sync.Pool{New: func() any { s := make([]string, 0, 256); return &s }}

// TermCounts returns each distinct term of text with its frequency, and the
// number of terms with repeats, which is the document's length for BM25.
func TermCounts(text string) (counts map[string]int, length int) {
	p := termsPool.Get().(*[]string)
	terms := AppendTerms((*p)[:0], text)
	counts = make(map[string]int, len(terms))
	for _, t := range terms {
		counts[t]++
	}
	length = len(terms)
	if cap(terms) <= 1<<16 {
		clear(terms) // so the pool does not keep cached strings alive
		*p = terms[:0]
		termsPool.Put(p)
	}
	return counts, length
}

// CountTerms sets tf[i] to how often terms[i] occurs in text's terms and
// returns the number of its terms with repeats, as TermCounts does, for a
// query's few terms without a map of all of them.
func CountTerms(text string, terms []string, tf []int) (length int) {
	p := termsPool.Get().(*[]string)
	all := AppendTerms((*p)[:0], text)
	clear(tf)
	for _, t := range all {
		if i := slices.Index(terms, t); i >= 0 {
			tf[i]++
		}
	}
	length = len(all)
	if cap(all) <= 1<<16 {
		clear(all)
		*p = all[:0]
		termsPool.Put(p)
	}
	return length
}

// class is what a character does inside a segment.
type class uint8

const (
	lower    class = iota
	upper          // upper and title case
	caseless       // letters without case: CJK, Arabic, Hebrew, ...
	digit          // any number, so "²" and "Ⅻ" are indexed, not lost
	mark           // combining marks belong to the letter they follow
	ignore         // format characters (ZWJ, soft hyphen) are invisible: dropped
	// Every class from sep on ends a part.
	sep
	apostrophe // makes the segment prose ("don't"), not an identifier
	invalid    // a byte of invalid UTF-8, which no term may hold
)

var asciiClass = func() (t [utf8.RuneSelf]class) {
	for b := range t {
		switch {
		case 'a' <= b && b <= 'z':
			t[b] = lower
		case 'A' <= b && b <= 'Z':
			t[b] = upper
		case '0' <= b && b <= '9':
			t[b] = digit
		case b == '\'':
			t[b] = apostrophe
		default:
			t[b] = sep
		}
	}
	return t
}()

func classAt(s string, i int) (class, int) {
	if b := s[i]; b < utf8.RuneSelf {
		return asciiClass[b], 1
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	switch {
	case r == utf8.RuneError && size == 1:
		return invalid, 1
	case unicode.IsLower(r):
		return lower, size
	case unicode.IsUpper(r) || unicode.IsTitle(r):
		return upper, size
	case unicode.IsLetter(r):
		return caseless, size
	case unicode.IsNumber(r):
		return digit, size
	case unicode.IsMark(r):
		return mark, size
	case unicode.Is(unicode.Cf, r):
		return ignore, size
	case r == '\u2019' || r == '\u2018':
		return apostrophe, size
	}
	return sep, size
}

// appendSegment appends the terms of one UAX #29 word. A plain word is one
// part. An identifier is several (see eachPartOf); it then also yields its
// whole form, from the first part to the last, before its parts.
func appendSegment(dst []string, seg string) []string {
	at := len(dst)
	first, last, parts, whole := eachPartOf(seg, func(start, end int) { dst = appendWord(dst, seg[start:end]) })
	if parts > 1 && whole {
		var buf [MaxTermBytes]byte
		if n, ok := fold(&buf, seg[first:last]); ok {
			if term, keep := termOf(buf[:n]); keep {
				dst = slices.Insert(dst, at, term)
			}
		}
	}
	return dst
}

// eachPartOf calls part with the bounds of each part of seg, one UAX #29
// word, in order: split at separators ('_', '.', '/', ...), at
// lower→Upper, before the last capital of a run that starts a word
// (HTTPServer: http|server), and between letters and digits. It returns
// where the first part starts and the last ends, how many there are, and
// whether seg is whole (no apostrophe or invalid byte), so that the parts
// also stand for it as one.
func eachPartOf(seg string, part func(start, end int)) (first, last, parts int, whole bool) {
	whole = true
	start := -1 // where the open part starts, or -1
	var prev class
	for i := 0; i <= len(seg); {
		c, size := sep, 1
		if i < len(seg) {
			c, size = classAt(seg, i)
		}
		boundary := c >= sep
		switch {
		case c == apostrophe || c == invalid:
			whole = false
		case c <= digit && start >= 0:
			boundary = splits(prev, c, seg[i+size:])
		}
		if boundary && start >= 0 {
			part(start, i)
			if parts == 0 {
				first = start
			}
			parts++
			last, start = i, -1
		}
		if c <= digit {
			if start < 0 {
				start = i
			}
			prev = c
		}
		i += size
	}
	return first, last, parts, whole
}

// splits reports whether a letter or digit of class c starts a new part
// after one of class prev; rest is the text after it.
func splits(prev, c class, rest string) bool {
	switch {
	case (prev == digit) != (c == digit):
		return true
	case prev == lower && c == upper:
		return true
	case prev == upper && c == upper:
		// The capital that begins a word ends an acronym: HTTP|Server.
		for i := 0; i < len(rest); {
			next, size := classAt(rest, i)
			if next != mark && next != ignore {
				return next == lower
			}
			i += size
		}
	}
	return false
}

// appendWord appends the term of one part, if it has one.
func appendWord(dst []string, word string) []string {
	var buf [MaxTermBytes]byte
	n, ok := fold(&buf, word)
	if !ok {
		return dst
	}
	if term, keep := termOf(buf[:n]); keep {
		dst = append(dst, term)
	}
	return dst
}

// fold writes the lower-case form of s, without format characters and
// without the accents of Latin, Greek and Cyrillic letters (café: cafe,
// résumé: resume, whether the accent is precomposed or a combining mark),
// to buf. It reports false when that is empty, does not fit, or s is not
// valid UTF-8. Marks of other scripts stay: in Devanagari or Hebrew they
// make different words.
func fold(buf *[MaxTermBytes]byte, s string) (int, bool) {
	n := 0
	accented := false // the last letter was of a script whose accents fold
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if n == len(buf) {
				return 0, false
			}
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			buf[n] = b
			n++
			i++
			accented = true
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r == utf8.RuneError && size == 1 {
			return 0, false
		}
		if unicode.Is(unicode.Cf, r) {
			continue
		}
		if accented && unicode.Is(unicode.Mn, r) {
			continue // a combining accent on a letter that folds
		}
		r, accented = unaccent(unicode.ToLower(r))
		if n+utf8.RuneLen(r) > len(buf) {
			return 0, false
		}
		n += utf8.EncodeRune(buf[n:], r)
	}
	return n, n > 0
}
