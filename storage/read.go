package storage

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"os"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
)

// Get returns the memory with id, or not_found.
func (s *Store) Get(ctx context.Context, id string) (memgate.Memory, error) {
	const op = "storage.Get"
	if err := s.fresh(ctx, op); err != nil {
		return memgate.Memory{}, err
	}
	if err := memgate.ValidateID("id", id); err != nil {
		return memgate.Memory{}, err
	}
	if err := cancelled(ctx); err != nil {
		return memgate.Memory{}, err
	}
	var mem memgate.Memory
	err := s.readTx(op, func(tx *bolt.Tx) error {
		r, doc, err := s.txn(tx).lookup(id)
		if err != nil {
			return err
		}
		if doc == 0 || r.expiredBy(s.lazyNow()) {
			return errNotFound
		}
		mem, err = r.memory(doc)
		return err
	})
	if err != nil {
		return memgate.Memory{}, memgate.AsError(op, err)
	}
	return mem, nil
}

// Stats counts the store's memories and their bytes, and the file's size.
func (s *Store) Stats(ctx context.Context) (memgate.StoreStats, error) {
	const op = "storage.Stats"
	if err := s.fresh(ctx, op); err != nil {
		return memgate.StoreStats{}, err
	}
	if err := cancelled(ctx); err != nil {
		return memgate.StoreStats{}, err
	}
	var st memgate.StoreStats
	err := s.readTx(op, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		count, err := s.counter(meta, metaCount)
		if err != nil {
			return err
		}
		bytes, err := s.counter(meta, metaBytes)
		st.Count, st.Bytes = int64(count), int64(bytes)
		if err != nil {
			return err
		}
		// Expired memories the sweeper has not deleted yet are gone.
		t := s.txn(tx)
		for _, doc := range expiredDocs(tx, s.lazyNow()) {
			r, err := t.record(doc)
			if err != nil {
				return err
			}
			st.Count--
			st.Bytes -= int64(len(r.text))
		}
		return nil
	})
	if err != nil {
		return st, memgate.Wrap(op, err)
	}
	fi, err := os.Stat(s.path)
	if err != nil {
		return st, memgate.Internal(op, err)
	}
	st.StoreBytes = fi.Size()
	if s.opts.Embedder != nil {
		n := min(s.Embedded(), st.Count)
		st.Embedded = &n
	}
	return st, nil
}

// Cursors are opaque to clients: an order byte and a position, in base64.
// A position is a document number (updated_desc) or a by_created key.
func encodeCursor(order byte, pos []byte) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{order}, pos...))
}

// decodeCursor checks a cursor's order byte and position size (-1: any
// size but empty) and returns its position.
func decodeCursor(cursor string, order byte, size int) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) < 2 || size >= 0 && len(b) != 1+size || b[0] != order {
		return nil, memgate.Invalid("cursor", "cursor is not one this listing returned; start again without it")
	}
	return b[1:], nil
}

// Cursor order bytes.
const (
	cursorUpdated     = 'u'
	cursorCreated     = 'c'
	cursorCreatedDesc = 'd'
	cursorExport      = 'e'
	cursorCandidate   = 'k'
	cursorTrash       = 't'
)

// List returns one page of memories in the asked order, narrowed by tags
// (all must be present) and a metadata filter. A page's cursor stays valid
// while the store changes: a memory written after the listing began shows up
// at most once, in its new place.
func (s *Store) List(ctx context.Context, q memgate.ListQuery) (memgate.Page, error) {
	const op = "storage.List"
	if err := s.fresh(ctx, op); err != nil {
		return memgate.Page{}, err
	}
	limit, err := checkLimit("limit", q.Limit, memgate.DefaultListLimit, memgate.MaxListLimit)
	if err != nil {
		return memgate.Page{}, err
	}
	tags, err := memgate.NormalizeTags("tags", q.Tags)
	if err != nil {
		return memgate.Page{}, err
	}
	if _, err := memgate.NormalizeMetadata("filter", q.Filter); err != nil {
		return memgate.Page{}, err
	}
	var (
		desc    bool
		created bool
	)
	switch q.Order {
	case "", memgate.OrderUpdatedDesc:
		desc = true
	case memgate.OrderCreatedAsc:
		created = true
	case memgate.OrderCreatedDesc:
		created, desc = true, true
	default:
		return memgate.Page{}, memgate.Invalid("order", "order must be updated_desc, created_asc or created_desc")
	}
	var after []byte
	if q.Cursor != "" {
		order, size := byte(cursorUpdated), 8
		switch {
		case created && desc:
			order, size = cursorCreatedDesc, 16
		case created:
			order, size = cursorCreated, 16
		}
		if after, err = decodeCursor(q.Cursor, order, size); err != nil {
			return memgate.Page{}, err
		}
	}
	if err := cancelled(ctx); err != nil {
		return memgate.Page{}, err
	}
	page := memgate.Page{Memories: []memgate.Memory{}}
	clock := s.lazyNow()
	err = s.view(func(v *view) error {
		page.Memories, page.NextCursor = page.Memories[:0], ""
		t := s.txn(v.tx)
		w := newWalk(ctx)
		narrowed := len(tags) > 0 || len(q.Filter) > 0
		if narrowed && !created {
			return s.listNewest(v, w, t, tags, q.Filter, after, limit, q.Take, &page)
		}
		var allowed narrowing
		if narrowed {
			var err error
			if allowed, err = s.narrow(v, w, tags, q.Filter); err != nil {
				return err
			}
			if allowed.set != nil && len(allowed.set) <= byRecord {
				return s.listFew(t, allowed.set, desc, after, limit, q.Take, &page)
			}
		}
		b, order := t.docs, byte(cursorUpdated)
		switch {
		case created && desc:
			b, order = t.created, cursorCreatedDesc
		case created:
			b, order = t.created, cursorCreated
		}
		c := b.Cursor()
		var lastPos []byte
		k, val := first(c, after, desc)
		for ; k != nil; k, val = step(c, desc) {
			if err := w.step(); err != nil {
				return err
			}
			if len(k) < 8 {
				return errBadRecord
			}
			doc := binary.BigEndian.Uint64(k)
			if created {
				plain, err := s.seal.open(bucketCreated, k, val)
				if err != nil {
					return err
				}
				if doc, err = docRef(plain); err != nil {
					return err
				}
			}
			if narrowed {
				ok, err := allowed.has(doc)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
			}
			if len(page.Memories) == limit {
				page.NextCursor = encodeCursor(order, lastPos)
				return nil
			}
			r, err := t.record(doc)
			if err != nil {
				return err
			}
			if created && string(createdKey(&r)) != string(k) {
				return errMisplaced
			}
			if r.expiredBy(clock) {
				continue
			}
			m, err := r.memory(doc)
			if err != nil {
				return err
			}
			if !fits(q.Take, &page, m) {
				page.NextCursor = encodeCursor(order, lastPos)
				return nil
			}
			page.Memories = append(page.Memories, m)
			lastPos = append(lastPos[:0], k...)
		}
		return nil
	})
	if err != nil {
		return memgate.Page{}, memgate.AsError(op, err)
	}
	return page, nil
}

// fits asks ListQuery.Take whether m joins page; the first memory of a page
// always does.
func fits(take func(int, memgate.Memory) bool, page *memgate.Page, m memgate.Memory) bool {
	n := len(page.Memories)
	return take == nil || take(n, m) || n == 0
}

// first positions c at the first key strictly after `after` in the walking
// direction, or at the start when after is nil.
func first(c *bolt.Cursor, after []byte, desc bool) ([]byte, []byte) {
	switch {
	case after == nil && desc:
		return c.Last()
	case after == nil:
		return c.First()
	}
	k, v := c.Seek(after)
	if desc {
		if k == nil {
			return c.Last()
		}
		return c.Prev()
	}
	if k != nil && string(k) == string(after) {
		return c.Next()
	}
	return k, v
}

func step(c *bolt.Cursor, desc bool) ([]byte, []byte) {
	if desc {
		return c.Prev()
	}
	return c.Next()
}

func checkLimit(field string, limit, def, max int) (int, error) {
	switch {
	case limit == 0:
		return def, nil
	case limit < 1 || limit > max:
		return 0, memgate.Invalid(field, "%s must be between 1 and %d", field, max)
	}
	return limit, nil
}

// docSet is a sorted set of document numbers.
type docSet []uint64

func (d docSet) has(doc uint64) bool {
	_, ok := slices.BinarySearch(d, doc)
	return ok
}

// Narrowed listings. In update order (document order, newest first), the
// filter's walk gives the page directly: it costs the page and the smallest
// list. In creation order, the filter's documents are gathered first, up to
// gatherMax of them; a few (byRecord or fewer) are put in creation order by
// their records, more are met walking the creation index, tested against
// the gathered set or, past gatherMax, by probing the lists, where a page
// fills in about limit × memories / gatherMax steps.
var (
	gatherMax = 4096
	byRecord  = 256
)

// listNewest is a narrowed listing in update order.
func (s *Store) listNewest(v *view, w *walk, t *txn, tags []string, md map[string]any, after []byte, limit int, take func(int, memgate.Memory) bool, page *memgate.Page) error {
	f, err := s.newFilter(v, w, tags, memgate.TagsAll, md, "", descending, orderSeveral)
	if err != nil {
		return err
	}
	target := v.seq
	if after != nil {
		if target = binary.BigEndian.Uint64(after); target == 0 {
			return nil
		}
		target--
	}
	var last uint64
	for {
		doc, err := f.next(target)
		if err != nil || doc == descending.end() {
			return err
		}
		if len(page.Memories) == limit {
			page.NextCursor = encodeCursor(cursorUpdated, u64(last))
			return nil
		}
		r, err := t.record(doc)
		if err != nil {
			return err
		}
		m, err := r.memory(doc)
		if err != nil {
			return err
		}
		if !fits(take, page, m) {
			page.NextCursor = encodeCursor(cursorUpdated, u64(last))
			return nil
		}
		page.Memories = append(page.Memories, m)
		last, target = doc, doc-1
	}
}

// listFew is a narrowed listing in creation order of the few documents in
// set.
func (s *Store) listFew(t *txn, set docSet, desc bool, after []byte, limit int, take func(int, memgate.Memory) bool, page *memgate.Page) error {
	type entry struct {
		key []byte
		rec record
		doc uint64
	}
	entries := make([]entry, 0, len(set))
	for _, doc := range set {
		r, err := t.record(doc)
		if err != nil {
			return err
		}
		entries = append(entries, entry{key: createdKey(&r), rec: r, doc: doc})
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if desc {
			return bytes.Compare(b.key, a.key)
		}
		return bytes.Compare(a.key, b.key)
	})
	order := byte(cursorCreated)
	if desc {
		order = cursorCreatedDesc
	}
	var lastPos []byte
	for _, e := range entries {
		if after != nil {
			c := bytes.Compare(e.key, after)
			if desc && c >= 0 || !desc && c <= 0 {
				continue
			}
		}
		if len(page.Memories) == limit {
			page.NextCursor = encodeCursor(order, lastPos)
			return nil
		}
		m, err := e.rec.memory(e.doc)
		if err != nil {
			return err
		}
		if !fits(take, page, m) {
			page.NextCursor = encodeCursor(order, lastPos)
			return nil
		}
		page.Memories = append(page.Memories, m)
		lastPos = e.key
	}
	return nil
}

// narrowing is the documents that carry the tags (all of them) and match
// every filter pair: the whole set when it has at most gatherMax, else the
// filter, to probe.
type narrowing struct {
	set    docSet
	filter *filter
}

func (n narrowing) has(doc uint64) (bool, error) {
	if n.set != nil {
		return n.set.has(doc), nil
	}
	return n.filter.has(doc)
}

func (s *Store) narrow(v *view, w *walk, tags []string, md map[string]any) (narrowing, error) {
	f, err := s.newFilter(v, w, tags, memgate.TagsAll, md, "", ascending, orderSeveral)
	if err != nil {
		return narrowing{}, err
	}
	set := docSet{}
	for target := uint64(0); ; {
		doc, err := f.next(target)
		if err != nil {
			return narrowing{}, err
		}
		if doc == ascending.end() {
			return narrowing{set: set}, nil
		}
		if len(set) == gatherMax || dense(len(set), doc, v.seq, gatherMax) {
			break
		}
		set = append(set, doc)
		target = doc + 1
	}
	probe, err := f.fresh(v, w)
	return narrowing{filter: probe}, err
}
