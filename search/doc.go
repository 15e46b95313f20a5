// Package search owns how memgate turns text into terms and terms into a
// ranking. Everything here is a pure function or a small value type: no I/O,
// no clocks, no logging, nothing that knows where memories are kept.
//
// # Analysis
//
// AppendTerms is the one analyser, used alike for every memory that is
// written and every query that is read, so both sides always agree on what a
// term is. Text is split into words by Unicode word segmentation (UAX #29),
// with '-' and '/' joined inside words so that paths and hyphenated names
// stay together. Each word is lower-cased and loses the accents of its
// Latin, Greek and Cyrillic letters (cafe finds Café), English stop words
// are dropped,
// and words made only of letters are reduced to their Snowball English stem.
// A word that is an identifier (snake_case, camelCase, pkg.sub.Name,
// src/server/http.go, HTTPServer2) yields its whole lower-cased form and then
// each of its parts, so a search for "request" finds parseHTTPRequest and a
// search for the whole identifier still prefers the memory that spells it.
//
// Changing anything in analysis changes the terms an existing index was built
// with: stores index terms, not text, so such a change needs a reindex.
//
// Stemming keeps a small, fixed-size cache of recent words shared by every
// goroutine. It holds words of the text it has seen (at most 8192,
// each at most MaxTermBytes), so plaintext words of memories stay in process
// memory after a write, as they do in any buffer that analysed them.
//
// # Ranking
//
// BM25 scores a term in a document; Normalize scales a ranking so its best
// hit scores 1. TopK keeps the best k scored documents while storage walks
// its posting lists, and RRF fuses rankings from different retrievers by
// rank alone, since their scores are not comparable; Fuse and FuseWeighted
// fuse the lexical ranking with the semantic one, the latter weighed.
//
// # Vectors
//
// Vectors is a table of word vectors; Embed makes a text's vector, the mean
// of its words' vectors weighed by smooth inverse frequency, less the
// table's common direction, of unit length. Quantize keeps a vector as int8
// numbers and a scale, and Dot8 scores a query against one. A SignQuery and
// a Shortlist find, by the signs of the stored numbers alone, the few
// hundred vectors worth scoring exactly, the same ones whatever the order of
// the scan.
//
// # Budgets
//
// Tokens estimates the model tokens of a text from its length in bytes, and
// Cut decides how many ranked hits fit in a caller's token budget.
//
// This package may import only the standard library, its text libraries
// (uax29, snowball, and golang.org/x/text for decompositions) and the root
// memgate package. It must never import
// storage, tenants, server, auth or cmd: they depend on it, not the reverse.
package search
