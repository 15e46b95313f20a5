package storage

import (
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
		if doc == 0 {
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
		return err
	})
	if err != nil {
		return st, memgate.Wrap(op, err)
	}
	fi, err := os.Stat(s.path)
	if err != nil {
		return st, memgate.Internal(op, err)
	}
	st.StoreBytes = fi.Size()
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
)

// List returns one page of memories in the asked order, narrowed by tags
// (all must be present) and a metadata filter. A page's cursor stays valid
// while the store changes: a memory written after the listing began shows up
// at most once, in its new place.
func (s *Store) List(ctx context.Context, q memgate.ListQuery) (memgate.Page, error) {
	const op = "storage.List"
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
	err = s.view(func(v *view) error {
		page.Memories, page.NextCursor = page.Memories[:0], ""
		t := s.txn(v.tx)
		allowed, err := s.narrow(v, tags, memgate.TagsAll, q.Filter)
		if err != nil {
			return err
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
			if allowed != nil && !allowed.has(doc) {
				continue
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
			m, err := r.memory(doc)
			if err != nil {
				return err
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

// narrow returns the documents that carry the tags (all or any, by mode) and
// match every filter pair; nil when there are neither tags nor filter.
func (s *Store) narrow(v *view, tags []string, mode string, filter map[string]any) (docSet, error) {
	if len(tags) == 0 && len(filter) == 0 {
		return nil, nil
	}
	tagTerms, metaTerms := s.filterTerms(tags, filter)
	var (
		set     docSet
		started bool
		scratch []posting
	)
	intersect := func(term []byte) error {
		var docs []uint64
		var err error
		docs, scratch, err = v.docs(term, nil, scratch)
		if err != nil {
			return err
		}
		if !started {
			set, started = docs, true
			return nil
		}
		set = intersectSorted(set, docs)
		return nil
	}
	if mode == memgate.TagsAny && len(tagTerms) > 0 {
		var union []uint64
		for _, term := range tagTerms {
			docs, sc, err := v.docs(term, nil, scratch)
			scratch = sc
			if err != nil {
				return nil, err
			}
			union = unionSorted(union, docs)
		}
		set, started = union, true
		tagTerms = nil
	}
	for _, term := range tagTerms {
		if err := intersect(term); err != nil {
			return nil, err
		}
	}
	for _, term := range metaTerms {
		if err := intersect(term); err != nil {
			return nil, err
		}
	}
	if set == nil {
		set = docSet{}
	}
	return set, nil
}

func intersectSorted(a, b []uint64) []uint64 {
	out := a[:0]
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

func unionSorted(a, b []uint64) []uint64 {
	out := make([]uint64, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i] < b[j]:
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}
