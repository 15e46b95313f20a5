package storage

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/search"
)

// shortList is how many posting chunks of a tag or filter list a search
// reads whole. A longer list (a tag most memories carry, say) is not read:
// the search checks its best candidates against it one by one instead.
var shortList = 64

// filter is the narrowing a search's tags and metadata filter ask for. A
// document passes when, in every group, it is in at least one of the
// group's lists: tags in "all" mode and metadata pairs are groups of one
// list, tags in "any" mode one group of several.
type filter struct {
	groups [][]*filterList
	exact  bool // every list was read whole
}

// filterList is one tag's or metadata pair's posting list: read whole
// (set), or, when long, probed document by document.
type filterList struct {
	term  []byte
	set   docSet // the whole list, when short
	long  bool
	tail  docSet // a long list's tail documents
	cache []posting
	base  uint64 // the first document of cache's chunk
}

// newFilter reads the short lists of the search's tags and filter; nil when
// there are neither.
func (s *Store) newFilter(v *view, tags []string, mode string, md map[string]any) (*filter, error) {
	if len(tags) == 0 && len(md) == 0 {
		return nil, nil
	}
	tagTerms, metaTerms := s.filterTerms(tags, md)
	f := &filter{exact: true}
	add := func(terms ...[]byte) error {
		group := make([]*filterList, 0, len(terms))
		for _, term := range terms {
			l, err := v.filterList(term)
			if err != nil {
				return err
			}
			f.exact = f.exact && !l.long
			group = append(group, l)
		}
		f.groups = append(f.groups, group)
		return nil
	}
	if mode == memgate.TagsAny && len(tagTerms) > 0 {
		if err := add(tagTerms...); err != nil {
			return nil, err
		}
	} else {
		for _, t := range tagTerms {
			if err := add(t); err != nil {
				return nil, err
			}
		}
	}
	for _, t := range metaTerms {
		if err := add(t); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// filterList reads term's list whole if it is short.
func (v *view) filterList(term []byte) (*filterList, error) {
	l := &filterList{term: term}
	var ps []posting
	c := v.postings.Cursor()
	chunks := 0
	for k, val := c.Seek(term); k != nil && len(k) == len(term)+8 && bytes.HasPrefix(k, term); k, val = c.Next() {
		if chunks == shortList {
			l.long = true
			break
		}
		plain, err := v.seal.open(bucketPostings, k, val)
		if err != nil {
			return nil, err
		}
		var ok bool
		if ps, ok = appendChunk(ps, binary.BigEndian.Uint64(k[len(term):]), plain); !ok {
			return nil, errBadRecord
		}
		chunks++
	}
	after := v.tail.base
	if !l.long && len(ps) > 0 {
		after = max(after, ps[len(ps)-1].doc)
	}
	tail := v.tail.postings(term, v.seq, after, nil)
	if l.long {
		l.tail = make(docSet, len(tail))
		for i, p := range tail {
			l.tail[i] = p.doc
		}
		return l, nil
	}
	l.set = make(docSet, 0, len(ps)+len(tail))
	for _, p := range append(ps, tail...) {
		l.set = append(l.set, p.doc)
	}
	return l, nil
}

// has reports whether doc is in the list.
func (l *filterList) has(v *view, doc uint64) (bool, error) {
	if !l.long {
		return l.set.has(doc), nil
	}
	if l.tail.has(doc) {
		return true, nil
	}
	if l.cache != nil && doc >= l.base && doc <= l.cache[len(l.cache)-1].doc {
		_, ok := slices.BinarySearchFunc(l.cache, doc, func(p posting, d uint64) int { return cmpDoc(p.doc, d) })
		return ok, nil
	}
	c := v.postings.Cursor()
	want := chunkKey(l.term, doc)
	k, val := c.Seek(want)
	if k == nil || !bytes.Equal(k, want) {
		if k == nil {
			k, val = c.Last()
		} else {
			k, val = c.Prev()
		}
	}
	if k == nil || len(k) != len(l.term)+8 || !bytes.HasPrefix(k, l.term) {
		return false, nil
	}
	plain, err := v.seal.open(bucketPostings, k, val)
	if err != nil {
		return false, err
	}
	base := binary.BigEndian.Uint64(k[len(l.term):])
	if _, last, _, ok := chunkHeader(base, plain); !ok || doc > last {
		return false, nil
	}
	ps, ok := appendChunk(l.cache[:0], base, plain)
	if !ok {
		return false, errBadRecord
	}
	l.cache, l.base = ps, base
	_, found := slices.BinarySearchFunc(ps, doc, func(p posting, d uint64) int { return cmpDoc(p.doc, d) })
	return found, nil
}

func cmpDoc(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// pass reports whether doc passes every group; with exactOnly, only the
// groups whose lists were all read whole are checked.
func (f *filter) pass(v *view, doc uint64, exactOnly bool) (bool, error) {
	for _, group := range f.groups {
		if exactOnly && !groupExact(group) {
			continue
		}
		in := false
		for _, l := range group {
			ok, err := l.has(v, doc)
			if err != nil {
				return false, err
			}
			if ok {
				in = true
				break
			}
		}
		if !in {
			return false, nil
		}
	}
	return true, nil
}

func groupExact(group []*filterList) bool {
	for _, l := range group {
		if l.long {
			return false
		}
	}
	return true
}

// newest returns up to limit documents that pass f, newest first. It walks
// the smallest whole group, or, when every group has a long list, the docs
// bucket backwards, and checks the rest.
func (s *Store) newest(v *view, f *filter, limit int) ([]search.Scored, error) {
	var out []search.Scored
	take := func(doc uint64) (bool, error) {
		ok, err := f.pass(v, doc, false)
		if err != nil || !ok {
			return false, err
		}
		out = append(out, search.Scored{Doc: doc, Score: 1})
		return len(out) == limit, nil
	}
	var driver docSet
	found := false
	for _, group := range f.groups {
		if !groupExact(group) {
			continue
		}
		var union docSet
		for _, l := range group {
			union = unionSorted(union, l.set)
		}
		if !found || len(union) < len(driver) {
			driver, found = union, true
		}
	}
	if found {
		for i := len(driver) - 1; i >= 0; i-- {
			if done, err := take(driver[i]); err != nil || done {
				return out, err
			}
		}
		return out, nil
	}
	c := v.tx.Bucket(bucketDocs).Cursor()
	for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
		if done, err := take(binary.BigEndian.Uint64(k)); err != nil || done {
			return out, err
		}
	}
	return out, nil
}

// best returns the limit best of scored (by score, then newest) that pass
// f's long lists; scored already passed its whole ones. It checks the best
// few times limit first, which is enough unless the long lists reject most
// candidates, and only then sorts them all.
func (f *filter) best(v *view, scored []search.Scored, limit int) ([]search.Scored, error) {
	if few := 4 * limit; len(scored) > few {
		top := search.NewTopK(few)
		for _, sc := range scored {
			top.Push(sc.Doc, sc.Score)
		}
		out, err := f.passing(v, top.Sorted(), limit)
		if err != nil || len(out) == limit {
			return out, err
		}
	}
	slices.SortFunc(scored, func(a, b search.Scored) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return cmpDoc(b.Doc, a.Doc)
	})
	return f.passing(v, scored, limit)
}

// passing returns the first limit of ranked that pass every list of f.
func (f *filter) passing(v *view, ranked []search.Scored, limit int) ([]search.Scored, error) {
	var out []search.Scored
	for _, sc := range ranked {
		ok, err := f.pass(v, sc.Doc, false)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, sc)
			if len(out) == limit {
				break
			}
		}
	}
	return out, nil
}
