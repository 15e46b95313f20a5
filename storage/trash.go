package storage

import (
	"context"
	"encoding/binary"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
)

// Trashed is a forgotten memory in the trash, as it was when forgotten.
type Trashed struct {
	Memory    memgate.Memory `json:"memory"`
	DeletedAt time.Time      `json:"deleted_at"`
}

// TrashPage is one page of the trash, oldest first.
type TrashPage struct {
	Memories   []Trashed `json:"memories"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// toTrash keeps r, forgotten at now (Unix nanoseconds), in the trash; a
// memory of the same id already there is replaced.
func (t *txn) toTrash(r *record, doc uint64, now int64) error {
	trash, err := t.bucket(bucketTrash)
	if err != nil {
		return err
	}
	at, err := t.bucket(bucketTrashAt)
	if err != nil {
		return err
	}
	key := t.s.seal.key(kindID, r.id)
	if old := trash.Get(key); old != nil {
		if err := t.unindexTrash(key, old); err != nil {
			return err
		}
	}
	val := binary.AppendVarint(nil, now)
	val = binary.AppendUvarint(val, doc)
	val = r.marshal(val)
	if err := trash.Put(key, t.s.seal.seal(bucketTrash, key, val)); err != nil {
		return err
	}
	if r.expires != 0 {
		// It expires in the trash as it would have outside.
		ex, err := t.bucket(bucketTrashExpiry)
		if err != nil {
			return err
		}
		if err := ex.Put(twoKey(u64(uint64(r.expires)), key), nil); err != nil {
			return err
		}
	}
	return at.Put(twoKey(u64(uint64(now)), key), nil)
}

// unindexTrash deletes the keys that order the trash entry of key (its
// value v): in trash_at, and in trash_expiry when it expires.
func (t *txn) unindexTrash(key, v []byte) error {
	when, _, r, err := t.s.openTrash(key, v)
	if err != nil {
		return err
	}
	if r.expires != 0 {
		if ex := t.tx.Bucket(bucketTrashExpiry); ex != nil {
			if err := ex.Delete(twoKey(u64(uint64(r.expires)), key)); err != nil {
				return err
			}
		}
	}
	if at := t.tx.Bucket(bucketTrashAt); at != nil {
		return at.Delete(twoKey(u64(uint64(when)), key))
	}
	return nil
}

// trashGone reports whether a trash entry forgotten at when, of record r,
// is gone for its readers at now: it expired, or the store's retention has
// passed (the sweep has yet to purge it).
func (s *Store) trashGone(when int64, r *record, now int64) bool {
	retention := s.opts.TrashRetention.Nanoseconds()
	return r.expired(now) || retention > 0 && when <= now-retention
}

// openTrash decodes a trash value: when it was forgotten, its version then,
// and its record.
func (s *Store) openTrash(key, v []byte) (int64, uint64, record, error) {
	plain, err := s.seal.open(bucketTrash, key, v)
	if err != nil {
		return 0, 0, record{}, err
	}
	when, n := binary.Varint(plain)
	if n <= 0 {
		return 0, 0, record{}, errBadRecord
	}
	doc, m := binary.Uvarint(plain[n:])
	if m <= 0 {
		return 0, 0, record{}, errBadRecord
	}
	r, err := unmarshalRecord(plain[n+m:])
	return when, doc, r, err
}

// purgeTrash deletes up to sweepBatch trash entries forgotten at or
// before before (Unix nanoseconds).
func (t *txn) purgeTrash(before int64) (int, error) {
	return t.purgeTrashBy(bucketTrashAt, before)
}

// purgeExpiredTrash deletes up to sweepBatch trash entries whose memories
// have expired by now.
func (t *txn) purgeExpiredTrash(now int64) (int, error) {
	return t.purgeTrashBy(bucketTrashExpiry, now)
}

// purgeTrashBy deletes up to sweepBatch trash entries that bucket (trash_at
// or trash_expiry: a time, then the entry's key) orders at or before
// before, with the keys that order them.
func (t *txn) purgeTrashBy(bucket []byte, before int64) (int, error) {
	by := t.tx.Bucket(bucket)
	trash := t.tx.Bucket(bucketTrash)
	if by == nil {
		return 0, nil
	}
	var keys [][]byte
	c := by.Cursor()
	for k, _ := c.First(); k != nil && len(keys) < sweepBatch; k, _ = c.Next() {
		if len(k) < 8 {
			return 0, errBadRecord
		}
		if int64(binary.BigEndian.Uint64(k)) > before {
			break
		}
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		if err := by.Delete(k); err != nil { // an entry gone already leaves only this
			return 0, err
		}
		key := k[8:]
		var v []byte
		if trash != nil {
			v = trash.Get(key)
		}
		if v == nil {
			continue
		}
		if err := t.unindexTrash(key, v); err != nil {
			return 0, err
		}
		if err := trash.Delete(key); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

// Trash returns one page of the trash, oldest first.
func (s *Store) Trash(ctx context.Context, cursor string, limit int) (TrashPage, error) {
	const op = "storage.Trash"
	if err := s.fresh(ctx, op); err != nil {
		return TrashPage{}, err
	}
	limit, err := checkLimit("limit", limit, memgate.DefaultListLimit, memgate.MaxListLimit)
	if err != nil {
		return TrashPage{}, err
	}
	var after []byte
	if cursor != "" {
		if after, err = decodeCursor(cursor, cursorTrash, -1); err != nil {
			return TrashPage{}, err
		}
	}
	if err := cancelled(ctx); err != nil {
		return TrashPage{}, err
	}
	page := TrashPage{Memories: []Trashed{}}
	var lastKey []byte
	now := s.now().UnixNano()
	err = s.readTx(op, func(tx *bolt.Tx) error {
		at, trash := tx.Bucket(bucketTrashAt), tx.Bucket(bucketTrash)
		if at == nil || trash == nil {
			return nil
		}
		c := at.Cursor()
		for k, _ := first(c, after, false); k != nil; k, _ = c.Next() {
			if len(page.Memories) == limit {
				page.NextCursor = encodeCursor(cursorTrash, lastKey)
				return nil
			}
			if len(k) < 8 {
				return errBadRecord
			}
			key := k[8:]
			when, doc, r, err := s.openTrash(key, trash.Get(key))
			if err != nil {
				return err
			}
			lastKey = append(lastKey[:0], k...)
			if s.trashGone(when, &r, now) {
				continue
			}
			m, err := r.memory(doc)
			if err != nil {
				return err
			}
			page.Memories = append(page.Memories, Trashed{Memory: m, DeletedAt: time.Unix(0, when).UTC()})
		}
		return nil
	})
	if err != nil {
		return TrashPage{}, memgate.AsError(op, err)
	}
	return page, nil
}

var errNotInTrash = &memgate.Error{Code: memgate.CodeNotFound, Message: "no memory with this id is in the trash"}

// Restore brings the memory id back from the trash, with its id, fields and
// created_at, as a new version. A live memory of the same id makes it a
// version_conflict: forget that one first.
func (s *Store) Restore(ctx context.Context, id string) (memgate.Memory, error) {
	const op = "storage.Restore"
	if err := memgate.ValidateID("id", id); err != nil {
		return memgate.Memory{}, err
	}
	if s.repl != nil && !applying(ctx) {
		var m memgate.Memory
		err := s.replicate(ctx, op, &entry{Kind: opRestore, ID: id}, func(ctx context.Context) (err error) {
			m, err = s.Restore(ctx, id)
			return err
		}, always)
		return m, err
	}
	var (
		rec record
		doc uint64
	)
	err := s.write.do(func(t *txn) error {
		if err := cancelled(ctx); err != nil {
			return err
		}
		trash := t.tx.Bucket(bucketTrash)
		key := s.seal.key(kindID, id)
		var v []byte
		if trash != nil {
			v = trash.Get(key)
		}
		if v == nil {
			return errNotInTrash
		}
		when, _, r, err := s.openTrash(key, v)
		if err != nil {
			return err
		}
		now := s.now().UnixNano()
		if s.trashGone(when, &r, now) {
			return errNotInTrash
		}
		old, oldDoc, err := t.lookup(id)
		if err != nil {
			return err
		}
		live := oldDoc != 0 && !old.expired(now)
		if live {
			return &memgate.Error{Code: memgate.CodeVersionConflict,
				Message: "a memory with this id exists; forget it before restoring the one in the trash",
				Details: map[string]any{"current_version": oldDoc}}
		}
		if err := t.checkQuota(oldDoc == 0, len(r.text)-len(old.text)); err != nil {
			return err
		}
		entries, length := s.entries(&r)
		if doc, err = t.nextDoc(); err != nil {
			return err
		}
		if oldDoc != 0 {
			if err := t.remove(&old, oldDoc, doc); err != nil {
				return err
			}
		}
		r.updated = now
		if err := t.insert(&r, doc, &prepared{entries: entries, length: length, textKey: s.seal.key(kindText, textKey(r.text))}); err != nil {
			return err
		}
		if err := t.unindexTrash(key, v); err != nil {
			return err
		}
		rec = r
		return trash.Delete(key)
	})
	if err != nil {
		return memgate.Memory{}, memgate.AsError(op, err)
	}
	m, err := rec.memory(doc)
	if err != nil {
		return memgate.Memory{}, memgate.Internal(op, err)
	}
	return m, nil
}

// EmptyTrash deletes every memory in the trash for good and returns how
// many.
func (s *Store) EmptyTrash(ctx context.Context) (int, error) {
	const op = "storage.EmptyTrash"
	total := 0
	if s.repl != nil && !applying(ctx) {
		err := s.replicate(ctx, op, &entry{Kind: opEmptyTrash}, func(ctx context.Context) (err error) {
			total, err = s.EmptyTrash(ctx)
			return err
		}, func() bool { return total > 0 })
		return total, err
	}
	for {
		n, err := s.sweepOnce(ctx, func(t *txn, _ int64) (int, error) { return t.purgeTrash(math.MaxInt64) })
		total += n
		if err != nil {
			return total, memgate.AsError(op, err)
		}
		if n < sweepBatch {
			return total, nil
		}
	}
}
