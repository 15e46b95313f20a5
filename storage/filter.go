package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"slices"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
)

// Narrowing (tags, the metadata filter) and ranking walk posting lists as
// sorted iterators: each list can seek to the first document at or past a
// given one, skipping whole chunks by their keys (a chunk's key names its
// first document) and headers (its count and span) without decoding them.
// A conjunction leapfrogs its lists, most selective first: the lead names a
// candidate, each other list seeks to it, and the first that lands past it
// names the next candidate. What a narrowed walk costs then follows the
// answer and the smallest list, not the store: an empty intersection of two
// lists costs the chunks of the smaller, whatever the others hold.

// checkEvery is how many steps a long walk takes between looks at its
// request's context.
const checkEvery = 256

// walk carries a request's context into the loops that can be long, so a
// deadline or a cancel stops the work and not only the answer.
type walk struct {
	ctx context.Context
	n   int
}

func newWalk(ctx context.Context) *walk { return &walk{ctx: ctx} }

// step counts one unit of work and, every checkEvery of them, reports
// whether the request ended.
func (w *walk) step() error {
	w.n++
	if w.n%checkEvery != 0 {
		return nil
	}
	return stopped(w.ctx)
}

// stopped returns unavailable once ctx is done: the caller gave up, so the
// work stops too.
func stopped(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return &memgate.Error{Code: memgate.CodeUnavailable, Message: "the request timed out or was cancelled", Cause: err}
	}
	return nil
}

// direction is the order of a walk: ascending document numbers (ranking,
// oldest first) or descending (newest first).
type direction bool

const (
	ascending  direction = false
	descending direction = true
)

// end is the document a walk reports once it is exhausted: past every real
// one in its direction (document numbers start at 1).
func (d direction) end() uint64 {
	if d == descending {
		return 0
	}
	return math.MaxUint64
}

// reached reports whether doc is at or past target in the walk's order.
func (d direction) reached(doc, target uint64) bool {
	if d == descending {
		return doc <= target
	}
	return doc >= target
}

// before reports whether a comes before b in the walk's order.
func (d direction) before(a, b uint64) bool {
	if d == descending {
		return a > b
	}
	return a < b
}

// postingIter walks one term's list in a snapshot: the merged chunks on
// disk, then the tail's postings (all above the last merged one).
type postingIter struct {
	v      *view
	w      *walk
	term   []byte
	dir    direction
	c      *bolt.Cursor
	chunk  []posting // the decoded chunk the walk is in
	tail   []posting
	onDisk bool // in chunk, else in tail
	i      int  // the position in chunk or tail
	cur    uint64
	run    [2]uint64 // has: the span of the last chunk found whole, undecoded
}

func (it *postingIter) match(k []byte) bool {
	return k != nil && len(k) == len(it.term)+8 && bytes.HasPrefix(k, it.term)
}

func (it *postingIter) first(k []byte) uint64 { return binary.BigEndian.Uint64(k[len(it.term):]) }

// header opens a chunk and reads its first and last documents.
func (it *postingIter) header(k, val []byte) (plain []byte, first, last uint64, err error) {
	plain, err = it.v.seal.open(bucketPostings, k, val)
	if err != nil {
		return nil, 0, 0, err
	}
	first = it.first(k)
	_, last, _, ok := chunkHeader(first, plain)
	if !ok {
		return nil, 0, 0, errBadRecord
	}
	return plain, first, last, nil
}

// load decodes the opened chunk named by k as the current one.
func (it *postingIter) load(k, plain []byte) error {
	if it.chunk == nil {
		it.chunk = it.v.chunkBuf()
	}
	ps, ok := appendChunk(it.chunk[:0], it.first(k), plain)
	if !ok || len(ps) == 0 {
		return errBadRecord
	}
	it.chunk, it.onDisk, it.i = ps, true, 0
	return nil
}

// iter starts a walk of term's list in direction dir, on its first posting.
func (v *view) iter(w *walk, term []byte, dir direction) (*postingIter, error) {
	it := &postingIter{v: v, w: w, term: term, dir: dir, c: v.postings.Cursor(), cur: dir.end()}
	// The last chunk on disk: where the tail's postings begin, and where a
	// descending walk starts if the tail has none.
	k, val := it.c.Seek(chunkKey(term, math.MaxUint64))
	if k == nil {
		k, val = it.c.Last()
	} else {
		k, val = it.c.Prev()
	}
	after := v.tail.base
	var lastPlain []byte
	hasDisk := it.match(k)
	if hasDisk {
		plain, _, last, err := it.header(k, val)
		if err != nil {
			return nil, err
		}
		lastPlain, after = plain, max(after, last)
	}
	// While a merge runs, a term may be on disk and in the tail at once.
	it.tail = v.tail.postings(term, v.seq, after, nil)
	switch {
	case dir == descending && len(it.tail) > 0:
		it.i = len(it.tail) - 1
		it.cur = it.tail[it.i].doc
	case dir == descending && hasDisk:
		if err := it.load(k, lastPlain); err != nil {
			return nil, err
		}
		it.i = len(it.chunk) - 1
		it.cur = it.chunk[it.i].doc
	case dir == ascending && hasDisk:
		k, val = it.c.Seek(chunkKey(term, 0))
		plain, err := v.seal.open(bucketPostings, k, val)
		if err != nil {
			return nil, err
		}
		if err := it.load(k, plain); err != nil {
			return nil, err
		}
		it.cur = it.chunk[0].doc
	case dir == ascending && len(it.tail) > 0:
		it.cur = it.tail[0].doc
	}
	return it, nil
}

// posting is the current posting; only valid before the end.
func (it *postingIter) posting() posting {
	if it.onDisk {
		return it.chunk[it.i]
	}
	return it.tail[it.i]
}

// seek moves to the first posting at or past target in the walk's order.
func (it *postingIter) seek(target uint64) error {
	if it.dir.reached(it.cur, target) {
		return nil
	}
	if err := it.w.step(); err != nil {
		return err
	}
	if it.dir == descending {
		return it.seekDown(target)
	}
	return it.seekUp(target)
}

func (it *postingIter) seekUp(target uint64) error {
	if it.onDisk {
		if done, err := it.upOnDisk(target); err != nil || done {
			return err
		}
		it.onDisk, it.i = false, 0
	}
	j := it.i + sort.Search(len(it.tail)-it.i, func(x int) bool { return it.tail[it.i+x].doc >= target })
	it.i, it.cur = j, it.dir.end()
	if j < len(it.tail) {
		it.cur = it.tail[j].doc
	}
	return nil
}

// upOnDisk seeks up among the chunks; false when the disk part is done.
func (it *postingIter) upOnDisk(target uint64) (bool, error) {
	if target <= it.chunk[len(it.chunk)-1].doc {
		it.positionUp(target)
		return true, nil
	}
	// The next chunk is the usual case of a dense walk; a header says
	// whether the target is in it.
	k, val := it.c.Next()
	if !it.match(k) {
		return false, nil
	}
	plain, _, last, err := it.header(k, val)
	if err != nil {
		return false, err
	}
	if last < target {
		// Further: the chunk that starts at target, or the one before it,
		// or the first after it.
		k, val = it.c.Seek(chunkKey(it.term, target))
		if !it.match(k) || it.first(k) != target {
			var pk, pv []byte
			if k == nil {
				pk, pv = it.c.Last()
			} else {
				pk, pv = it.c.Prev()
			}
			if it.match(pk) {
				pplain, _, plast, err := it.header(pk, pv)
				if err != nil {
					return false, err
				}
				if plast >= target {
					if err := it.load(pk, pplain); err != nil {
						return false, err
					}
					it.positionUp(target)
					return true, nil
				}
			}
			if k == nil {
				return false, nil
			}
			k, val = it.c.Next()
			if !it.match(k) {
				return false, nil
			}
		}
		if plain, err = it.v.seal.open(bucketPostings, k, val); err != nil {
			return false, err
		}
	}
	if err := it.load(k, plain); err != nil {
		return false, err
	}
	it.positionUp(target)
	return true, nil
}

// positionUp moves to the first posting of the current chunk at or above
// target, which is there.
func (it *postingIter) positionUp(target uint64) {
	ps := it.chunk
	if it.i+1 < len(ps) && ps[it.i+1].doc >= target && ps[it.i].doc < target {
		it.i++
		it.cur = ps[it.i].doc
		return
	}
	j := it.i + sort.Search(len(ps)-it.i, func(x int) bool { return ps[it.i+x].doc >= target })
	it.i, it.cur = j, ps[j].doc
}

func (it *postingIter) seekDown(target uint64) error {
	if !it.onDisk {
		j := sort.Search(it.i+1, func(x int) bool { return it.tail[x].doc > target }) - 1
		if j >= 0 {
			it.i, it.cur = j, it.tail[j].doc
			return nil
		}
		return it.downSeek(target)
	}
	if target >= it.chunk[0].doc {
		it.positionDown(target)
		return nil
	}
	k, val := it.c.Prev()
	if !it.match(k) {
		it.cur = 0
		return nil
	}
	if it.first(k) > target {
		return it.downSeek(target)
	}
	plain, err := it.v.seal.open(bucketPostings, k, val)
	if err != nil {
		return err
	}
	if err := it.load(k, plain); err != nil {
		return err
	}
	it.i = len(it.chunk) - 1
	it.positionDown(target)
	return nil
}

// downSeek finds the chunk that holds the last posting at or below target:
// the one that starts at target, or the one before.
func (it *postingIter) downSeek(target uint64) error {
	k, val := it.c.Seek(chunkKey(it.term, target))
	if !it.match(k) || it.first(k) != target {
		if k == nil {
			k, val = it.c.Last()
		} else {
			k, val = it.c.Prev()
		}
	}
	if !it.match(k) {
		it.cur = 0
		return nil
	}
	plain, err := it.v.seal.open(bucketPostings, k, val)
	if err != nil {
		return err
	}
	if err := it.load(k, plain); err != nil {
		return err
	}
	it.i = len(it.chunk) - 1
	it.positionDown(target)
	return nil
}

// positionDown moves to the last posting of the current chunk at or below
// target, which is there.
func (it *postingIter) positionDown(target uint64) {
	ps := it.chunk
	j := sort.Search(it.i+1, func(x int) bool { return ps[x].doc > target }) - 1
	it.i, it.cur = j, ps[j].doc
}

// count returns how many postings the list holds, from the chunk headers
// alone, reading at most maxChunks of them (no bound when negative); whole
// reports whether it read them all.
func (it *postingIter) count(maxChunks int) (n, chunks int, whole bool, err error) {
	c := it.v.postings.Cursor()
	for k, val := c.Seek(chunkKey(it.term, 0)); it.match(k); k, val = c.Next() {
		if chunks == maxChunks {
			return n + len(it.tail), chunks, false, nil
		}
		if err := it.w.step(); err != nil {
			return 0, 0, false, err
		}
		plain, err := it.v.seal.open(bucketPostings, k, val)
		if err != nil {
			return 0, 0, false, err
		}
		cnt, _, _, ok := chunkHeader(it.first(k), plain)
		if !ok {
			return 0, 0, false, errBadRecord
		}
		n += cnt
		chunks++
	}
	return n + len(it.tail), chunks, true, nil
}

// ordering says when newFilter counts and orders a filter's groups.
type ordering int

const (
	orderSeveral ordering = iota // when there are several: walks
	orderAlways                  // a ranking's, whose size decides its path
)

// fresh returns a filter over the same lists as f, in f's order, every list
// at its start: to probe (has) after f has walked.
func (f *filter) fresh(v *view, w *walk) (*filter, error) {
	out := &filter{v: v, dir: f.dir}
	for _, g := range f.groups {
		lists := make([]*postingIter, 0, len(g.lists))
		for _, l := range g.lists {
			it, err := v.iter(w, l.term, f.dir)
			if err != nil {
				return nil, err
			}
			lists = append(lists, it)
		}
		ng := newGroup(f.dir, lists)
		ng.cost, ng.whole = g.cost, g.whole
		out.groups = append(out.groups, ng)
	}
	return out, nil
}

// group is a union of lists (tags in "any" mode; one list otherwise): a
// document is in it when it is in any of them.
type group struct {
	lists []*postingIter
	cost  int // postings, or a lower bound of them
	whole bool
	cur   uint64
	dir   direction
}

func newGroup(dir direction, lists []*postingIter) *group {
	g := &group{lists: lists, dir: dir}
	g.update()
	return g
}

func (g *group) update() {
	g.cur = g.dir.end()
	for _, l := range g.lists {
		if g.dir.before(l.cur, g.cur) {
			g.cur = l.cur
		}
	}
}

// seek moves the group to its first document at or past target. It stops
// at the first list that holds target, leaving the others behind (a later
// seek moves them): a document in every list of a union costs one seek.
func (g *group) seek(target uint64) error {
	if g.dir.reached(g.cur, target) {
		return nil
	}
	for _, l := range g.lists {
		if err := l.seek(target); err != nil {
			return err
		}
		if l.cur == target {
			g.cur = target
			return nil
		}
	}
	g.update()
	return nil
}

// seekAll is seek that moves every list, so that each list holding the
// group's document is on it.
func (g *group) seekAll(target uint64) error {
	for _, l := range g.lists {
		if err := l.seek(target); err != nil {
			return err
		}
	}
	g.update()
	return nil
}

// filter is the narrowing a search's or listing's tags and metadata filter
// ask for: a document passes when it is in every group, most selective
// first.
type filter struct {
	v      *view
	groups []*group
	dir    direction
}

// newFilter starts the walk of the documents that carry the tags (all or
// any, by mode), match every metadata pair and have a source of kind
// source (when not empty); nil when there are neither.
// Its groups are counted and ordered as order says.
func (s *Store) newFilter(v *view, w *walk, tags []string, mode string, md map[string]any, source string, dir direction, order ordering) (*filter, error) {
	if len(tags) == 0 && len(md) == 0 && source == "" {
		return nil, nil
	}
	tagTerms, metaTerms := s.filterTerms(tags, md)
	if source != "" {
		metaTerms = append(metaTerms, s.seal.key(kindSource, source))
	}
	var sets [][][]byte
	if mode == memgate.TagsAny && len(tagTerms) > 0 {
		sets = append(sets, tagTerms)
	} else {
		for _, t := range tagTerms {
			sets = append(sets, [][]byte{t})
		}
	}
	for _, t := range metaTerms {
		sets = append(sets, [][]byte{t})
	}
	f := &filter{v: v, dir: dir}
	for _, terms := range sets {
		lists := make([]*postingIter, 0, len(terms))
		for _, term := range terms {
			it, err := v.iter(w, term, dir)
			if err != nil {
				return nil, err
			}
			lists = append(lists, it)
		}
		f.groups = append(f.groups, newGroup(dir, lists))
	}
	if order == orderAlways || order == orderSeveral && len(f.groups) > 1 {
		if err := f.order(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// orderChunks is how many chunk headers of each list order reads: a list
// that ends within them is counted exactly, a longer one is estimated.
const orderChunks = 16

// order sorts the groups by size, smallest first. A group's size is the sum
// of its lists' sizes (see estimate), so ordering reads at most orderChunks
// chunk headers per list, however long the lists: 30 tags that every memory
// carries cost 480 headers at any store size. The order only decides how
// fast the walk goes, never what it finds.
func (f *filter) order() error {
	for _, g := range f.groups {
		g.cost, g.whole = 0, true
		for _, l := range g.lists {
			n, whole, err := l.estimate(orderChunks)
			if err != nil {
				return err
			}
			g.cost += n
			g.whole = g.whole && whole
		}
	}
	slices.SortStableFunc(f.groups, func(a, b *group) int { return a.cost - b.cost })
	return nil
}

// estimate returns the size of the list: exact (whole) when it ends within
// maxChunks chunks, else its postings so far scaled by the share of the
// snapshot's documents they cover, as if the rest of the list were as
// dense as its start.
func (it *postingIter) estimate(maxChunks int) (n int, whole bool, err error) {
	c := it.v.postings.Cursor()
	var first, last uint64
	chunks := 0
	for k, val := c.Seek(chunkKey(it.term, 0)); it.match(k); k, val = c.Next() {
		if chunks == maxChunks {
			span := float64(last-first) + 1
			rest := float64(it.v.seq-first) + 1
			return n + int(float64(n)*(rest/span-1)) + len(it.tail), false, nil
		}
		if err := it.w.step(); err != nil {
			return 0, false, err
		}
		plain, err := it.v.seal.open(bucketPostings, k, val)
		if err != nil {
			return 0, false, err
		}
		base := it.first(k)
		cnt, end, _, ok := chunkHeader(base, plain)
		if !ok || end < last {
			return 0, false, errBadRecord
		}
		if chunks == 0 {
			first = base
		}
		n, last = n+cnt, end
		chunks++
	}
	return n + len(it.tail), true, nil
}

// next returns the first document at or past target, in the walk's order,
// that is in every group; the direction's end when none is left.
func (f *filter) next(target uint64) (uint64, error) {
	cand := target
	for {
		agreed := true
		for _, g := range f.groups {
			if err := g.seek(cand); err != nil {
				return 0, err
			}
			if g.cur == f.dir.end() {
				return g.cur, nil
			}
			if g.cur != cand {
				cand, agreed = g.cur, false
				break
			}
		}
		switch {
		case !agreed:
		case !f.v.dead(cand):
			return cand, nil
		case f.dir == ascending:
			cand++
		default:
			cand--
		}
	}
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

// has reports whether doc is in the list, in any order of calls: the chunk
// that holds it is found by its key and kept for the next call. A list used
// this way is not walked.
func (it *postingIter) has(doc uint64) (bool, error) {
	if len(it.tail) > 0 && doc >= it.tail[0].doc {
		_, ok := slices.BinarySearchFunc(it.tail, doc, func(p posting, d uint64) int { return cmpDoc(p.doc, d) })
		return ok, nil
	}
	if it.run[1] != 0 && it.run[0] <= doc && doc <= it.run[1] {
		return true, nil
	}
	if !it.onDisk || doc < it.chunk[0].doc || doc > it.chunk[len(it.chunk)-1].doc {
		if err := it.w.step(); err != nil {
			return false, err
		}
		k, val := it.c.Seek(chunkKey(it.term, doc))
		if !it.match(k) || it.first(k) != doc {
			if k == nil {
				k, val = it.c.Last()
			} else {
				k, val = it.c.Prev()
			}
		}
		if !it.match(k) {
			return false, nil
		}
		plain, first, last, err := it.header(k, val)
		if err != nil {
			return false, err
		}
		if doc > last {
			return false, nil
		}
		// A chunk that holds every document of its span (a tag every
		// memory carries) answers from its header, undecoded.
		if n, _, _, _ := chunkHeader(first, plain); uint64(n) == last-first+1 {
			it.run = [2]uint64{first, last}
			return true, nil
		}
		if err := it.load(k, plain); err != nil {
			return false, err
		}
	}
	_, ok := slices.BinarySearchFunc(it.chunk, doc, func(p posting, d uint64) int { return cmpDoc(p.doc, d) })
	return ok, nil
}

// has reports whether doc passes every group, probing their lists (see
// postingIter.has).
func (f *filter) has(doc uint64) (bool, error) {
	if f.v.dead(doc) {
		return false, nil
	}
	for _, g := range f.groups {
		in := false
		for _, l := range g.lists {
			ok, err := l.has(doc)
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
