package storage

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/memgate/memgate"
)

// A memory's lifecycle beyond put and delete: expiry, duplicates, quotas and
// the trash. Each keeps a small index in the transaction that writes the
// memory, so that none of them ever scans the store:
//
//	expiry    expires_at, document number → nothing: what the sweeper deletes
//	          and what readers hide, oldest first
//	hashes    key(normalised text), document number → nothing: duplicates
//	trash     key(id) → a forgotten memory: when, and its record
//	trash_at  forgotten at, key(id) → nothing: what the sweeper purges
//	          once the retention has passed
//	trash_expiry  expires_at, key(id) → nothing: forgotten memories that
//	          expire before their retention ends, which the sweeper purges
//	          then (an older memgate leaves a key here whose entry is gone:
//	          the sweep drops it)
//
// The buckets are made by the first write that needs them.
var (
	bucketExpiry      = []byte("expiry")
	bucketHashes      = []byte("hashes")
	bucketTrash       = []byte("trash")
	bucketTrashAt     = []byte("trash_at")
	bucketTrashExpiry = []byte("trash_expiry")
)

// Kinds of content-derived keys of the lifecycle.
const (
	kindText   byte = 'h' // a memory's normalised text, hashed
	kindSource byte = 's' // a source kind, indexed for search's source_kind
)

// folders keeps case folders, which are not safe for concurrent use and
// cost a few kilobytes each to make.
var folders = sync.Pool{New: func() any { c := cases.Fold(); return &c }}

// textKey is what duplicates share: the SHA-256 of the text after Unicode
// NFC, case folding, trimming and collapsing runs of white space.
func textKey(text string) string {
	c := folders.Get().(*cases.Caser)
	folded := c.String(norm.NFC.String(text))
	folders.Put(c)
	var b strings.Builder
	b.Grow(len(folded))
	space := false
	for _, r := range strings.TrimSpace(folded) {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// twoKey is a key of two parts: a prefix (a time, or a content key) and a
// document number or another key.
func twoKey(a, b []byte) []byte { return append(append(make([]byte, 0, len(a)+len(b)), a...), b...) }

// bucket returns the lifecycle bucket name of tx, making it if needed.
func (t *txn) bucket(name []byte) (*bolt.Bucket, error) {
	if b := t.tx.Bucket(name); b != nil {
		return b, nil
	}
	return t.tx.CreateBucket(name)
}

// keep records r (document doc) in the lifecycle indexes; textKey is its
// textKey, under the store's key step.
func (t *txn) keep(r *record, doc uint64, textKey []byte) error {
	if r.expires != 0 {
		b, err := t.bucket(bucketExpiry)
		if err != nil {
			return err
		}
		if err := b.Put(twoKey(u64(uint64(r.expires)), u64(doc)), nil); err != nil {
			return err
		}
	}
	if r.extended() {
		if err := t.raiseSchema(schemaRecords); err != nil {
			return err
		}
	}
	b, err := t.bucket(bucketHashes)
	if err != nil {
		return err
	}
	return b.Put(twoKey(textKey, u64(doc)), nil)
}

// drop takes r (document doc) out of the lifecycle indexes.
func (t *txn) drop(r *record, doc uint64) error {
	if b := t.tx.Bucket(bucketExpiry); b != nil && r.expires != 0 {
		if err := b.Delete(twoKey(u64(uint64(r.expires)), u64(doc))); err != nil {
			return err
		}
	}
	if b := t.tx.Bucket(bucketHashes); b != nil {
		return b.Delete(twoKey(t.s.seal.key(kindText, textKey(r.text)), u64(doc)))
	}
	return nil
}

// raiseSchema sets the store's schema to at least v.
func (t *txn) raiseSchema(v uint64) error {
	if cur := t.meta.Get(metaSchema); len(cur) == 8 && binary.BigEndian.Uint64(cur) >= v {
		return nil
	}
	return t.meta.Put(metaSchema, u64(v))
}

// expired reports whether r is gone at now (Unix nanoseconds).
func (r *record) expired(now int64) bool { return r.expires != 0 && r.expires <= now }

// expiredBy is expired at the time clock gives, which it reads only for a
// memory that expires.
func (r *record) expiredBy(clock func() int64) bool { return r.expires != 0 && r.expires <= clock() }

// lazyNow returns a clock that reads s's clock once, when first asked: a
// read that meets no expiring memory never reads it.
func (s *Store) lazyNow() func() int64 {
	var at int64
	return func() int64 {
		if at == 0 {
			at = s.now().UnixNano()
		}
		return at
	}
}

// duplicate returns a live memory whose text has textKey, if any.
func (t *txn) duplicate(textKey []byte, now int64) (record, uint64, error) {
	b := t.tx.Bucket(bucketHashes)
	if b == nil {
		return record{}, 0, nil
	}
	c := b.Cursor()
	for k, _ := c.Seek(textKey); k != nil && len(k) == len(textKey)+8 && string(k[:len(textKey)]) == string(textKey); k, _ = c.Next() {
		doc := binary.BigEndian.Uint64(k[len(textKey):])
		r, err := t.record(doc)
		if err != nil {
			return record{}, 0, err
		}
		if !r.expired(now) {
			return r, doc, nil
		}
	}
	return record{}, 0, nil
}

// expiredDocs returns the documents that expired by the time clock gives
// and are not swept yet, in document order (nil: none).
func expiredDocs(tx *bolt.Tx, clock func() int64) []uint64 {
	b := tx.Bucket(bucketExpiry)
	if b == nil {
		return nil
	}
	var docs []uint64
	c := b.Cursor()
	for k, _ := c.First(); k != nil && len(k) == 16 && int64(binary.BigEndian.Uint64(k)) <= clock(); k, _ = c.Next() {
		docs = append(docs, binary.BigEndian.Uint64(k[8:]))
	}
	slices.Sort(docs)
	return docs
}

// NextDue returns the earliest time at which Sweep, with retention, has
// work: the first expiry to come, or the oldest trash entry's end; ok is
// false when there is none (or the store cannot be read: its next open
// says why).
func (s *Store) NextDue(retention time.Duration) (due time.Time, ok bool) {
	s.readTx("storage.NextDue", func(tx *bolt.Tx) error {
		first := func(name []byte, after int64) {
			if b := tx.Bucket(name); b != nil {
				if k, _ := b.Cursor().First(); len(k) >= 8 {
					t := time.Unix(0, int64(binary.BigEndian.Uint64(k))+after)
					if !ok || t.Before(due) {
						due, ok = t, true
					}
				}
			}
		}
		first(bucketExpiry, 0)
		if retention >= 0 {
			first(bucketTrashAt, retention.Nanoseconds())
		}
		first(bucketTrashExpiry, 0)
		return nil
	})
	return due, ok
}

// sweepBatch bounds the memories one sweep transaction deletes, so that a
// sweep holds the committer — and the writers it groups with — for about
// as long as a few writes: their texts are analysed before it, outside the
// commit.
const sweepBatch = 16

// Sweep deletes the memories that have expired, and the trash entries
// whose memories have, or that are older than retention (0: none kept; a
// negative retention leaves those to a sweep that knows it), in
// transactions of at most sweepBatch; it returns how many of each it
// deleted.
func (s *Store) Sweep(ctx context.Context, retention time.Duration) (expired, purged int, err error) {
	const op = "storage.Sweep"
	if s.repl != nil && !applying(ctx) {
		// A replica with nothing due takes no lock in the log: the replica
		// that wrote what expires has it due.
		if due, ok := s.NextDue(retention); !ok || due.After(s.now()) {
			return 0, 0, nil
		}
		err = s.replicate(ctx, op, &entry{Kind: opSweep, Retention: int64(retention)}, func(ctx context.Context) (err error) {
			expired, purged, err = s.Sweep(ctx, retention)
			return err
		}, func() bool { return expired+purged > 0 })
		return expired, purged, err
	}
	for {
		start := time.Now()
		n, err := s.sweepExpired(ctx)
		expired += n
		if err != nil {
			return expired, purged, memgate.AsError(op, err)
		}
		if n < sweepBatch {
			break
		}
		if s.repl != nil {
			continue // a replica's sweep holds the log's lock: it does not pause
		}
		// Leave the committer to the writers for as long as the batch took:
		// a long sweep then takes at most every other commit.
		select {
		case <-ctx.Done():
			return expired, purged, memgate.AsError(op, ctx.Err())
		case <-time.After(time.Since(start)):
		}
	}
	purges := []func(t *txn, now int64) (int, error){(*txn).purgeExpiredTrash}
	if retention >= 0 {
		purges = append(purges, func(t *txn, now int64) (int, error) { return t.purgeTrash(now - retention.Nanoseconds()) })
	}
	for _, purge := range purges {
		for {
			n, err := s.sweepOnce(ctx, purge)
			purged += n
			if err != nil {
				return expired, purged, memgate.AsError(op, err)
			}
			if n < sweepBatch {
				break
			}
		}
	}
	return expired, purged, nil
}

// expiredNow returns how many memories have expired by now without being
// swept yet, and their bytes of text: the store's counters hold them until
// the sweep, its quotas do not.
func (t *txn) expiredNow(now int64) (count, bytes int64, err error) {
	b := t.tx.Bucket(bucketExpiry)
	if b == nil {
		return 0, 0, nil
	}
	c := b.Cursor()
	for k, _ := c.First(); k != nil && len(k) == 16 && int64(binary.BigEndian.Uint64(k)) <= now; k, _ = c.Next() {
		r, err := t.record(binary.BigEndian.Uint64(k[8:]))
		if err != nil {
			return 0, 0, err
		}
		count, bytes = count+1, bytes+int64(len(r.text))
	}
	return count, bytes, nil
}

func (s *Store) sweepOnce(ctx context.Context, fn func(t *txn, now int64) (int, error)) (int, error) {
	if err := cancelled(ctx); err != nil {
		return 0, err
	}
	var n int
	err := s.write.do(func(t *txn) error {
		var err error
		n, err = fn(t, s.now().UnixNano())
		return err
	})
	return n, err
}

// expiredMemory is a memory the sweeper deletes, analysed beforehand.
type expiredMemory struct {
	doc     uint64
	rec     record
	entries []indexEntry
	length  int
}

// sweepExpired deletes up to sweepBatch memories expired now: it reads and
// analyses them in a read transaction, then deletes those still there in
// one write.
func (s *Store) sweepExpired(ctx context.Context) (int, error) {
	if err := cancelled(ctx); err != nil {
		return 0, err
	}
	now := s.now().UnixNano()
	var batch []expiredMemory
	err := s.readTx("storage.Sweep", func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketExpiry)
		if b == nil {
			return nil
		}
		t := s.txn(tx)
		c := b.Cursor()
		for k, _ := c.First(); k != nil && len(batch) < sweepBatch; k, _ = c.Next() {
			if len(k) != 16 {
				return errBadRecord
			}
			if int64(binary.BigEndian.Uint64(k)) > now {
				break
			}
			doc := binary.BigEndian.Uint64(k[8:])
			r, err := t.record(doc)
			if err != nil {
				return err
			}
			entries, length := s.entries(&r)
			batch = append(batch, expiredMemory{doc: doc, rec: r, entries: entries, length: length})
		}
		return nil
	})
	if err != nil || len(batch) == 0 {
		return 0, err
	}
	n := 0
	err = s.write.do(func(t *txn) error {
		n = 0
		stamp, err := t.nextDoc()
		if err != nil {
			return err
		}
		for i := range batch {
			m := &batch[i]
			if t.docs.Get(u64(m.doc)) == nil {
				continue // replaced or forgotten meanwhile: document numbers are never reused
			}
			if err := t.removeAnalysed(&m.rec, m.doc, stamp, m.entries, m.length); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}
