package storage

import (
	"encoding/json"
	"sort"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/search"
)

// indexEntry is one posting a record contributes: a term key and its
// frequency in the record.
type indexEntry struct {
	term []byte
	tf   uint32
}

// entries returns the postings a record contributes to the index, and its
// length in terms (for BM25). Tags and metadata values index as their own
// kinds of terms, with no weight in the ranking, so that filters read a
// posting list instead of scanning memories.
func (s *Store) entries(r *record) ([]indexEntry, int) {
	out := make([]indexEntry, 0, 32)
	length := recordTerms(r, func(kind byte, content string, tf int) {
		out = append(out, indexEntry{term: s.seal.key(kind, content), tf: uint32(tf)})
	})
	return out, length
}

// recordTerms calls fn with every term a record puts in the index, before
// it becomes a key, and returns the record's length in terms.
func recordTerms(r *record, fn func(kind byte, content string, tf int)) int {
	counts, length := search.TermCounts(r.indexText())
	for term, tf := range counts {
		fn(kindWord, term, tf)
	}
	for _, t := range r.tags {
		fn(kindTag, t, 1)
	}
	if r.source != nil {
		fn(kindSource, r.source.Kind, 1)
	}
	if len(r.meta) > 0 {
		var md map[string]any
		if err := json.Unmarshal([]byte(r.meta), &md); err == nil {
			for k, v := range md {
				fn(kindMeta, metaTerm(k, v), 1)
			}
		}
	}
	return length
}

// metaTerm is the indexed form of one metadata pair. Values are compared as
// JSON, so 1 and 1.0 match and "1" does not. The JSON is json.Marshal's,
// HTML escaping included ("<" as \u003c): that is the form the keys of
// existing stores hold. A value full of such characters makes a term up to
// six times the metadata limit; the sealer hashes a term too long for a
// key (see keys.go), so that costs no room on disk.
func metaTerm(key string, value any) string {
	v, ok := memgate.FlatValue(value)
	if !ok {
		v = nil
	}
	b, _ := json.Marshal(v)
	return key + "=" + string(b)
}

// filterTerms returns the term keys a query's tags and filter select by.
func (s *Store) filterTerms(tags []string, filter map[string]any) (tagTerms, metaTerms [][]byte) {
	for _, t := range tags {
		tagTerms = append(tagTerms, s.seal.key(kindTag, t))
	}
	keys := make([]string, 0, len(filter))
	for k := range filter {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		metaTerms = append(metaTerms, s.seal.key(kindMeta, metaTerm(k, filter[k])))
	}
	return tagTerms, metaTerms
}
