package storage

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
)

// Put creates or replaces one memory and returns it as stored, and whether
// it was created. It returns only after the write has committed.
//
// A replace keeps created_at. With w.IfVersion set, the write happens only
// if the memory's current version is *w.IfVersion (0: it must not exist);
// otherwise it fails with version_conflict, whose details carry the current
// version (0 when there is none).
func (s *Store) Put(ctx context.Context, w memgate.Write) (memgate.Memory, bool, error) {
	r, err := s.Write(ctx, w)
	return r.Memory, r.Created, err
}

// Write is Put, saying whether the write was a duplicate. A write with no
// id and no if_version whose text equals that of a live memory — compared
// after Unicode NFC, case folding, trimming and collapsing runs of white
// space — stores nothing and returns that memory, unless w.AllowDuplicate.
func (s *Store) Write(ctx context.Context, w memgate.Write) (memgate.Written, error) {
	if s.repl != nil && !applying(ctx) {
		var done memgate.Written
		err := s.replicate(ctx, "storage.Put", &entry{Kind: opWrite, Write: &w}, func(ctx context.Context) (err error) {
			done, err = s.put(ctx, w, nil)
			return err
		}, func() bool { return !done.Deduplicated })
		return done, err
	}
	return s.put(ctx, w, nil)
}

// put is Put with an extra step, then, run in the same transaction after
// the write.
func (s *Store) put(ctx context.Context, w memgate.Write, then func(*txn) error) (memgate.Written, error) {
	const op = "storage.Put"
	w, err := w.Normalize(s.maxText())
	if err != nil {
		return memgate.Written{}, err
	}
	dedup := w.ID == "" && w.IfVersion == nil && !w.AllowDuplicate
	if w.ID == "" {
		if w.ID, err = s.newID(); err != nil {
			return memgate.Written{}, err
		}
	}
	if w.ExpiresAt != nil && !w.ExpiresAt.After(s.now()) {
		return memgate.Written{}, memgate.Invalid("expires_at", "expires_at must be later than now")
	}
	p, err := s.prepare(w)
	if err != nil {
		return memgate.Written{}, memgate.AsError(op, err)
	}
	p.vec = s.prepareVector(ctx, &p.rec)
	var (
		rec  record
		doc  uint64
		done memgate.Written
	)
	err = s.write.do(func(t *txn) error {
		if err := cancelled(ctx); err != nil {
			return err
		}
		now := s.now().UnixNano()
		done = memgate.Written{}
		if dedup {
			dup, dupDoc, err := t.duplicate(p.textKey, now)
			if err != nil {
				return err
			}
			if dupDoc != 0 {
				rec, doc, done.Deduplicated = dup, dupDoc, true
				return nil
			}
		}
		old, oldDoc, err := t.lookup(w.ID)
		if err != nil {
			return err
		}
		// An expired memory is gone for every reader: the write creates.
		live := oldDoc
		if oldDoc != 0 && old.expired(now) {
			live = 0
		}
		if err := checkVersion(w.IfVersion, live); err != nil {
			return err
		}
		rec = p.rec
		if w.TTL != 0 {
			rec.expires = now + w.TTL.Nanoseconds()
		}
		if err := t.checkQuota(live == 0, len(rec.text)-liveBytes(&old, live)); err != nil {
			return err
		}
		if doc, err = t.nextDoc(); err != nil {
			return err
		}
		rec.origin, rec.created, rec.updated = doc, now, now
		if oldDoc != 0 {
			if live != 0 {
				rec.origin, rec.created = old.origin, old.created
			}
			if err := t.remove(&old, oldDoc, doc); err != nil {
				return err
			}
		}
		done.Created = live == 0
		if err := t.insert(&rec, doc, &p); err != nil {
			return err
		}
		if then != nil {
			return then(t)
		}
		return nil
	})
	if err != nil {
		return memgate.Written{}, memgate.AsError(op, err)
	}
	if p.vec == nil && s.opts.Embedder != nil && !done.Deduplicated {
		s.wakeCatchUp() // the memory went without a vector
	}
	if done.Memory, err = rec.memory(doc); err != nil {
		return memgate.Written{}, memgate.Internal(op, err)
	}
	return done, nil
}

// liveBytes is the text bytes of old, document doc (0: none).
func liveBytes(old *record, doc uint64) int {
	if doc == 0 {
		return 0
	}
	return len(old.text)
}

// checkQuota refuses a write that would take the store past
// Options.MaxMemories (adding one memory: adds) or Options.MaxBytes (text
// bytes growing by grow), counting what the transaction already wrote.
func (t *txn) checkQuota(adds bool, grow int) error {
	if t.s.replayed() != nil {
		return nil // the write passed its quota where it ran
	}
	o := t.s.opts
	// What has expired but is not swept yet counts in the counters, not
	// against the quotas; it is looked up only when a quota is at stake.
	var expired *[2]int64
	over := func(i int, counter []byte, add, limit int64) (bool, error) {
		n, err := t.s.counter(t.meta, counter)
		if err != nil || int64(n)+t.counts[i]+add <= limit {
			return false, err
		}
		if expired == nil {
			c, b, err := t.expiredNow(t.s.now().UnixNano())
			if err != nil {
				return false, err
			}
			expired = &[2]int64{c, b}
		}
		return int64(n)+t.counts[i]-expired[i]+add > limit, nil
	}
	if o.MaxMemories > 0 && adds {
		if full, err := over(0, metaCount, 1, o.MaxMemories); err != nil || full {
			return cmp.Or(err, quotaExceeded("memories", o.MaxMemories))
		}
	}
	if o.MaxBytes > 0 && grow > 0 {
		if full, err := over(1, metaBytes, int64(grow), o.MaxBytes); err != nil || full {
			return cmp.Or(err, quotaExceeded("bytes", o.MaxBytes))
		}
	}
	return nil
}

func quotaExceeded(kind string, limit int64) error {
	what := "memories"
	if kind == "bytes" {
		what = "bytes of text"
	}
	return &memgate.Error{Code: memgate.CodeQuotaExceeded,
		Message: fmt.Sprintf("the namespace holds its limit of %d %s; forget some memories first", limit, what),
		Details: map[string]any{"kind": kind, "limit": limit}}
}

// prepared is a write's record and index entries, made before the write
// joins the committer so that the analysis runs on the writer's goroutine,
// in parallel with other writers, not inside the shared commit.
type prepared struct {
	rec     record // origin and times are set in the transaction
	entries []indexEntry
	length  int
	textKey []byte        // the key of its normalised text (see textKey)
	vec     *storedVector // its vector, when an embedder made one
}

func (s *Store) prepare(w memgate.Write) (prepared, error) {
	rec, err := newRecord(w, 0, 0, 0)
	if err != nil {
		return prepared{}, err
	}
	entries, length := s.entries(&rec)
	return prepared{rec: rec, entries: entries, length: length, textKey: s.seal.key(kindText, textKey(rec.text))}, nil
}

// Delete forgets one memory. With ifVersion set it forgets it only if its
// current version is *ifVersion.
func (s *Store) Delete(ctx context.Context, id string, ifVersion *int64) error {
	const op = "storage.Delete"
	if err := memgate.ValidateID("id", id); err != nil {
		return err
	}
	if ifVersion != nil && *ifVersion < 1 {
		return memgate.Invalid("if_version", "if_version must be a version read earlier")
	}
	if s.repl != nil && !applying(ctx) {
		e := &entry{Kind: opDelete, ID: id, IfVersion: ifVersion, Trash: s.keepsTrash()}
		return s.replicate(ctx, op, e, func(ctx context.Context) error { return s.Delete(ctx, id, ifVersion) }, always)
	}
	err := s.write.do(func(t *txn) error {
		if err := cancelled(ctx); err != nil {
			return err
		}
		old, oldDoc, err := t.lookup(id)
		if err != nil {
			return err
		}
		clock := s.lazyNow()
		if oldDoc == 0 || old.expiredBy(clock) {
			return errNotFound
		}
		if err := checkVersion(ifVersion, oldDoc); err != nil {
			return err
		}
		stamp, err := t.nextDoc()
		if err != nil {
			return err
		}
		if s.keepsTrash() {
			if err := t.toTrash(&old, oldDoc, clock()); err != nil {
				return err
			}
		}
		return t.remove(&old, oldDoc, stamp)
	})
	return memgate.Wrap(op, err)
}

var errNotFound = &memgate.Error{Code: memgate.CodeNotFound, Message: "no memory has this id"}

func checkVersion(want *int64, current uint64) error {
	if want == nil || uint64(*want) == current {
		return nil
	}
	msg := "the memory changed since it was read; read it again and retry"
	if *want == 0 {
		msg = "a memory with this id already exists"
	}
	return &memgate.Error{Code: memgate.CodeVersionConflict, Message: msg,
		Details: map[string]any{"current_version": current}}
}

// txn bundles the buckets of one transaction.
type txn struct {
	s        *Store
	tx       *bolt.Tx
	merged   uint64 // the merged mark: documents above it live in the tail
	seqMoved bool   // nextDoc took a document number
	change   tailChange
	counts   [3]int64 // memories, text bytes, terms: see count
	docs     *bolt.Bucket
	ids      *bolt.Bucket
	created  *bolt.Bucket
	meta     *bolt.Bucket
	postings postingsWriter
	vecAdds  []vecAdd // vectors written, for the index after the commit
	vecDrops []uint64
}

func (s *Store) txn(tx *bolt.Tx) *txn {
	t := &txn{
		s:       s,
		tx:      tx,
		docs:    tx.Bucket(bucketDocs),
		ids:     tx.Bucket(bucketIDs),
		created: tx.Bucket(bucketCreated),
		meta:    tx.Bucket(bucketMeta),
	}
	t.postings = postingsWriter{b: tx.Bucket(bucketPostings), seal: s.seal}
	// The tail's base is the merged mark (view and Open check it against
	// meta's); write transactions and merges run with the current tail.
	if tl := s.index.current(); tl != nil {
		t.merged = tl.base
	}
	if tx.Writable() {
		// Page fill, measured at 100k memories: document numbers and
		// creation keys only grow, so their pages are packed full; ids pack
		// well at 0.9; posting chunks grow in place, and above 0.7 their
		// pages only split more often.
		t.docs.FillPercent = 1
		t.created.FillPercent = 1
		t.ids.FillPercent = 0.9
		t.postings.b.FillPercent = 0.7
	}
	return t
}

// lookup returns the record and document number of id; 0 when it does not
// exist.
func (t *txn) lookup(id string) (record, uint64, error) {
	key := t.s.seal.key(kindID, id)
	v := t.ids.Get(key)
	if v == nil {
		return record{}, 0, nil
	}
	plain, err := t.s.seal.open(bucketIDs, key, v)
	if err != nil {
		return record{}, 0, err
	}
	doc, err := docRef(plain)
	if err != nil {
		return record{}, 0, err
	}
	r, err := t.record(doc)
	if err == nil && r.id != id {
		err = errMisplaced
	}
	return r, doc, err
}

// nextDoc takes the next document number; flushCounts records the new
// sequence where the store seals it.
func (t *txn) nextDoc() (uint64, error) {
	t.seqMoved = true
	return t.docs.NextSequence()
}

func (t *txn) record(doc uint64) (record, error) {
	key := u64(doc)
	v := t.docs.Get(key)
	if v == nil {
		return record{}, errBadRecord
	}
	return t.s.decodeRecord(key, v)
}

func createdKey(r *record) []byte {
	k := make([]byte, 16)
	binary.BigEndian.PutUint64(k, uint64(r.created))
	binary.BigEndian.PutUint64(k[8:], r.origin)
	return k
}

// insert writes r as document doc, with its index entries (from
// Store.entries) and counters.
func (t *txn) insert(r *record, doc uint64, p *prepared) error {
	s := t.s
	key := u64(doc)
	if err := t.docs.Put(key, s.seal.seal(bucketDocs, key, r.marshal(make([]byte, 0, r.size())))); err != nil {
		return err
	}
	idKey := s.seal.key(kindID, r.id)
	if err := t.ids.Put(idKey, s.seal.seal(bucketIDs, idKey, binary.AppendUvarint(nil, doc))); err != nil {
		return err
	}
	ck := createdKey(r)
	if err := t.created.Put(ck, s.seal.seal(bucketCreated, ck, binary.AppendUvarint(nil, doc))); err != nil {
		return err
	}
	if err := t.keep(r, doc, p.textKey); err != nil {
		return err
	}
	if p.vec != nil {
		if err := t.putVector(doc, p.vec); err != nil {
			return err
		}
	}
	t.change.adds = append(t.change.adds, tailDoc{doc: doc, entries: p.entries, length: p.length})
	return t.count(1, len(r.text), p.length)
}

// remove takes document doc (holding r) out of the store and the index.
// stamp is a sequence number taken by this transaction: readers whose
// snapshot is older still see the document in the tail.
func (t *txn) remove(r *record, doc, stamp uint64) error {
	entries, length := t.s.entries(r)
	return t.removeAnalysed(r, doc, stamp, entries, length)
}

// removeAnalysed is remove with r's index entries and length, analysed
// before the transaction.
func (t *txn) removeAnalysed(r *record, doc, stamp uint64, entries []indexEntry, length int) error {
	s := t.s
	switch {
	case doc > t.merged:
		if !t.change.dropAdd(doc) {
			t.change.deaths = append(t.change.deaths, [2]uint64{doc, stamp})
		}
	default:
		// Its postings are merged: the next merge takes them out (gone.go).
		if err := t.markGone(doc, stamp, entries); err != nil {
			return err
		}
	}
	if err := t.drop(r, doc); err != nil {
		return err
	}
	if err := t.dropVector(doc); err != nil {
		return err
	}
	if err := t.docs.Delete(u64(doc)); err != nil {
		return err
	}
	if err := t.ids.Delete(s.seal.key(kindID, r.id)); err != nil {
		return err
	}
	if err := t.created.Delete(createdKey(r)); err != nil {
		return err
	}
	return t.count(-1, -len(r.text), -length)
}

// count gathers changes to the store's counters; flushCounts writes them
// once per transaction.
func (t *txn) count(n, bytes, length int) error {
	t.counts[0] += int64(n)
	t.counts[1] += int64(bytes)
	t.counts[2] += int64(length)
	return nil
}

func (t *txn) flushCounts() error {
	for i, key := range [][]byte{metaCount, metaBytes, metaTotalLen} {
		if t.counts[i] != 0 {
			if err := t.s.addCounter(t.meta, key, t.counts[i]); err != nil {
				return err
			}
		}
	}
	t.counts = [3]int64{}
	if t.seqMoved {
		t.seqMoved = false
		return t.s.recordSeq(t.meta, t.docs.Sequence())
	}
	return nil
}

func newID() (string, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", memgate.Internal("storage.newID", err)
	}
	return u.String(), nil
}

// docRef decodes a document number stored as a value (ids, created): a
// uvarint, a few bytes instead of eight.
func docRef(v []byte) (uint64, error) {
	doc, n := binary.Uvarint(v)
	if n <= 0 || n != len(v) || doc == 0 {
		return 0, errBadRecord
	}
	return doc, nil
}
