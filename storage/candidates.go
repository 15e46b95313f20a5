package storage

import (
	"context"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
)

// Candidates are writes that wait for a person's approval (--write-mode
// candidate). They live in their own bucket, outside the index: get, list
// and search do not see them. A candidate is named by the id of the memory
// it would write; proposing the same id again replaces the candidate.
//
// A candidate's value is a uvarint — 0, or 1 + the if_version the write
// carried, checked when it is approved — followed by its record.

// Propose keeps w as a candidate and returns it as the memory it would be
// (version 0: it is not a memory yet).
func (s *Store) Propose(ctx context.Context, w memgate.Write) (memgate.Memory, error) {
	const op = "storage.Propose"
	if s.repl != nil && !applying(ctx) {
		var m memgate.Memory
		err := s.replicate(ctx, op, &entry{Kind: opPropose, Write: &w}, func(ctx context.Context) (err error) {
			m, err = s.Propose(ctx, w)
			return err
		}, always)
		return m, err
	}
	w, err := w.Normalize(s.maxText())
	if err != nil {
		return memgate.Memory{}, err
	}
	if w.ID == "" {
		if w.ID, err = s.newID(); err != nil {
			return memgate.Memory{}, err
		}
	}
	at := s.now()
	if w.ExpiresAt != nil && !w.ExpiresAt.After(at) {
		return memgate.Memory{}, memgate.Invalid("expires_at", "expires_at must be later than now")
	}
	if w.TTL != 0 {
		expires := at.Add(w.TTL).UTC()
		w.ExpiresAt, w.TTL = &expires, 0
	}
	now := at.UnixNano()
	rec, err := newRecord(w, 0, now, now)
	if err != nil {
		return memgate.Memory{}, memgate.Internal(op, err)
	}
	var cond uint64
	if w.IfVersion != nil {
		cond = uint64(*w.IfVersion) + 1
	}
	val := binary.AppendUvarint(nil, cond)
	val = rec.marshal(val)
	err = s.write.do(func(t *txn) error {
		if err := cancelled(ctx); err != nil {
			return err
		}
		key := s.seal.key(kindID, w.ID)
		b := t.tx.Bucket(bucketCands)
		return b.Put(key, s.seal.seal(bucketCands, key, val))
	})
	if err != nil {
		return memgate.Memory{}, memgate.AsError(op, err)
	}
	m, err := rec.memory(0)
	if err != nil {
		return memgate.Memory{}, memgate.Internal(op, err)
	}
	return m, nil
}

var errNoCandidate = &memgate.Error{Code: memgate.CodeNotFound, Message: "no candidate has this id"}

// Candidates returns one page of the candidates, in key order.
func (s *Store) Candidates(ctx context.Context, cursor string, limit int) (memgate.Page, error) {
	const op = "storage.Candidates"
	if err := s.fresh(ctx, op); err != nil {
		return memgate.Page{}, err
	}
	limit, err := checkLimit("limit", limit, memgate.DefaultListLimit, memgate.MaxListLimit)
	if err != nil {
		return memgate.Page{}, err
	}
	var after []byte
	if cursor != "" {
		b, err := decodeCursor(cursor, cursorCandidate, -1)
		if err != nil {
			return memgate.Page{}, err
		}
		after = b
	}
	if err := cancelled(ctx); err != nil {
		return memgate.Page{}, err
	}
	page := memgate.Page{Memories: []memgate.Memory{}}
	err = s.readTx(op, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketCands).Cursor()
		var last []byte
		for k, v := first(c, after, false); k != nil; k, v = c.Next() {
			if len(page.Memories) == limit {
				page.NextCursor = encodeCursor(cursorCandidate, last)
				return nil
			}
			_, rec, err := s.decodeCandidate(k, v)
			if err != nil {
				return err
			}
			m, err := rec.memory(0)
			if err != nil {
				return err
			}
			page.Memories = append(page.Memories, m)
			last = append(last[:0], k...)
		}
		return nil
	})
	if err != nil {
		return memgate.Page{}, memgate.AsError(op, err)
	}
	return page, nil
}

func (s *Store) decodeCandidate(k, v []byte) (*int64, record, error) {
	plain, err := s.seal.open(bucketCands, k, v)
	if err != nil {
		return nil, record{}, err
	}
	cond, n := binary.Uvarint(plain)
	if n <= 0 {
		return nil, record{}, errBadRecord
	}
	rec, err := unmarshalRecord(plain[n:])
	if err != nil {
		return nil, record{}, err
	}
	if cond == 0 {
		return nil, rec, nil
	}
	v64 := int64(cond - 1)
	return &v64, rec, nil
}

// Approve writes the candidate id as a memory — with its if_version
// checked, as any write — and drops the candidate.
func (s *Store) Approve(ctx context.Context, id string) (memgate.Memory, error) {
	const op = "storage.Approve"
	if err := memgate.ValidateID("id", id); err != nil {
		return memgate.Memory{}, err
	}
	if s.repl != nil && !applying(ctx) {
		var m memgate.Memory
		err := s.replicate(ctx, op, &entry{Kind: opApprove, ID: id}, func(ctx context.Context) (err error) {
			m, err = s.Approve(ctx, id)
			return err
		}, always)
		return m, err
	}
	var w memgate.Write
	err := s.readTx(op, func(tx *bolt.Tx) error {
		key := s.seal.key(kindID, id)
		v := tx.Bucket(bucketCands).Get(key)
		if v == nil {
			return errNoCandidate
		}
		cond, rec, err := s.decodeCandidate(key, v)
		if err != nil {
			return err
		}
		m, err := rec.memory(0)
		if err != nil {
			return err
		}
		w = memgate.Write{ID: m.ID, Text: m.Text, Title: m.Title, Tags: m.Tags, Metadata: m.Metadata,
			IfVersion: cond, AllowEmpty: true, ExpiresAt: m.ExpiresAt, Source: m.Source, AllowDuplicate: true}
		if _, err := w.Normalize(max(s.opts.MaxTextBytes, len(w.Text))); err != nil {
			return errBadRecord // it was valid when it was proposed
		}
		return nil
	})
	if err != nil {
		return memgate.Memory{}, memgate.AsError(op, err)
	}
	done, err := s.put(ctx, w, func(t *txn) error {
		key := s.seal.key(kindID, id)
		return t.tx.Bucket(bucketCands).Delete(key)
	})
	return done.Memory, err
}

// Reject drops the candidate id.
func (s *Store) Reject(ctx context.Context, id string) error {
	const op = "storage.Reject"
	if err := memgate.ValidateID("id", id); err != nil {
		return err
	}
	if s.repl != nil && !applying(ctx) {
		return s.replicate(ctx, op, &entry{Kind: opReject, ID: id}, func(ctx context.Context) error { return s.Reject(ctx, id) }, always)
	}
	err := s.write.do(func(t *txn) error {
		key := s.seal.key(kindID, id)
		b := t.tx.Bucket(bucketCands)
		if b.Get(key) == nil {
			return errNoCandidate
		}
		return b.Delete(key)
	})
	return memgate.Wrap(op, err)
}
