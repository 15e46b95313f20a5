package search

import (
	"sync"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// EachWord calls fn with each word of text that a word vector can stand
// for: the same segments and parts as AppendTerms (an identifier yields its
// whole form and then its parts), lower-cased but not stemmed, without stop
// words. word is valid only during the call: fn copies what it keeps. A
// lookup of string(word) in a map does not allocate.
func EachWord(text string, fn func(word []byte)) {
	it := segmenter
	it.SetText(text)
	buf := wordBufs.Get().(*[MaxTermBytes]byte)
	defer wordBufs.Put(buf)
	emit := func(s string) {
		n, ok := fold(buf, s)
		if !ok || english.IsStopWord(string(buf[:n])) {
			return
		}
		fn(buf[:n])
	}
	for it.Next() {
		seg := it.Value()
		if len(seg) == 1 && seg[0] < utf8.RuneSelf && asciiClass[seg[0]] >= sep {
			continue
		}
		if plainWord(seg) {
			emit(seg)
			continue
		}
		eachPart(seg, emit)
	}
}

// eachPart is appendSegment for words: the whole identifier first (when it
// has several parts), then each part (the first 32).
func eachPart(seg string, emit func(string)) {
	var starts, ends [32]int
	n := 0
	first, last, parts, whole := eachPartOf(seg, func(start, end int) {
		if n < len(starts) {
			starts[n], ends[n] = start, end
			n++
		}
	})
	if parts > 1 && whole {
		emit(seg[first:last])
	}
	for p := range n {
		emit(seg[starts[p]:ends[p]])
	}
}

// wordBufs holds EachWord's buffers: the word passed to fn escapes, so the
// buffer would otherwise be allocated per call.
var wordBufs = sync.Pool{New: func() any { return new([MaxTermBytes]byte) }}
