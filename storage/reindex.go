package storage

import (
	"encoding/binary"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
)

// schemaFolded marks a store whose index is built with accents folded
// (cafe finds Café). A store below it holds terms with their accents, which
// queries folded now would not meet: Open reindexes it (reindexFolded).
// memgate before it refuses a store at it, whose queries would keep the
// accents the index dropped, and whose index may be half rebuilt.
const schemaFolded = 4

// metaFolding is set while the index is rebuilt with accents folded: the
// postings then hold the memories up to the merged mark, analysed anew, and
// those after it wait for the next batch.
var metaFolding = []byte("folding")

// reindexBatch is how many memories one transaction of the rebuild
// analyses: each commit is bounded, whatever the store's size, and the
// memory the rebuild holds is one batch's postings (a few MB). At 100k
// memories of 176 bytes, batches of 1,024 took 15 s, most of it rewriting
// the last chunk of each term once a batch; of 8,192, 5 s, most of it the
// analysis itself.
var reindexBatch = 8192

// reindexFault, when set by a test, fails the rebuild before batch n.
var reindexFault func(n int) error

// needsReindex reports whether the store's schema predates schemaFolded, or
// a rebuild was cut short.
func (s *Store) needsReindex() (bool, error) {
	var old bool
	err := s.readTx("storage.Open", func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(metaSchema); len(v) == 8 && binary.BigEndian.Uint64(v) < schemaFolded {
			old = true
		}
		old = old || meta.Get(metaFolding) != nil
		return nil
	})
	return old, err
}

// reindexFolded rebuilds the index from the records with the analysis of
// now, in transactions of bounded size, before Open returns:
//
//  1. One transaction drops the postings and the gone documents, sets the
//     merged mark and the terms' total to 0, and the schema to
//     schemaFolded with metaFolding. From here memgate before it refuses
//     the store, and Open resumes the rebuild.
//  2. Each next transaction analyses the reindexBatch memories after the
//     merged mark, appends their postings in key order, and raises the mark
//     and the total with them. The postings up to the mark are always
//     exactly those of the records up to it.
//  3. The last one, finding no memory after the mark, clears metaFolding.
//
// A crash or an error anywhere leaves a consistent store: Open starts
// again at the mark, and the rebuilt index is the one a fresh store holding
// the same records would have (a store the rebuild was cut short in and a
// store rebuilt at once answer the same).
func (s *Store) reindexFolded() error {
	const op = "storage.Open"
	started := false
	err := s.readTx(op, func(tx *bolt.Tx) error {
		started = tx.Bucket(bucketMeta).Get(metaFolding) != nil
		return nil
	})
	switch {
	case err != nil:
		return memgate.Wrap(op, err)
	case started:
		s.log.Warn("resuming the rebuild of the index with accents folded", "op", op)
	default:
		s.log.Info("rebuilding the index with accents folded", "op", op)
		if err := s.writeTx(op, s.startFolding); err != nil {
			return memgate.Wrap(op, err)
		}
	}
	for n := 0; ; n++ {
		if reindexFault != nil {
			if err := reindexFault(n); err != nil {
				return memgate.Wrap(op, err)
			}
		}
		done := false
		err := s.writeTx(op, func(tx *bolt.Tx) error {
			var err error
			done, err = s.foldBatch(tx)
			return err
		})
		if err != nil {
			return memgate.Wrap(op, err)
		}
		if done {
			s.log.Info("the index was rebuilt with accents folded", "op", op, "batches", n)
			return nil
		}
	}
}

// startFolding is the rebuild's first transaction.
func (s *Store) startFolding(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketPostings, bucketGone} {
		if tx.Bucket(name) == nil {
			continue
		}
		if err := tx.DeleteBucket(name); err != nil {
			return err
		}
	}
	if _, err := tx.CreateBucket(bucketPostings); err != nil {
		return err
	}
	meta := tx.Bucket(bucketMeta)
	for _, key := range [][]byte{metaTotalLen, metaMerged, metaFolding} {
		if err := s.setCounter(meta, key, 0); err != nil {
			return err
		}
	}
	if err := meta.Delete(metaMerging); err != nil {
		return err
	}
	return meta.Put(metaSchema, u64(schemaFolded))
}

// foldBatch analyses the memories of one batch after the merged mark into
// the postings and raises the mark past them; with none left, it ends the
// rebuild and reports done.
func (s *Store) foldBatch(tx *bolt.Tx) (done bool, err error) {
	t := s.txn(tx)
	merged, err := s.counter(t.meta, metaMerged)
	if err != nil {
		return false, err
	}
	total, err := s.counter(t.meta, metaTotalLen)
	if err != nil {
		return false, err
	}
	byTerm := map[string][]posting{}
	last, n := merged, 0
	c := t.docs.Cursor()
	for k, v := c.Seek(u64(merged + 1)); k != nil && n < reindexBatch; k, v = c.Next() {
		r, err := s.decodeRecord(k, v)
		if err != nil {
			return false, err
		}
		doc := binary.BigEndian.Uint64(k)
		entries, length := s.entries(&r)
		for _, e := range entries {
			byTerm[string(e.term)] = append(byTerm[string(e.term)], posting{doc: doc, tf: e.tf, docLen: uint32(length)})
		}
		total += uint64(length)
		last, n = doc, n+1
	}
	if n == 0 {
		return true, t.meta.Delete(metaFolding)
	}
	terms := make([]string, 0, len(byTerm))
	for term := range byTerm {
		terms = append(terms, term)
	}
	slices.Sort(terms) // key order: neighbouring terms share pages
	for _, term := range terms {
		if err := t.postings.appendTerm([]byte(term), byTerm[term]); err != nil {
			return false, err
		}
	}
	if err := s.setCounter(t.meta, metaTotalLen, total); err != nil {
		return false, err
	}
	return false, s.setCounter(t.meta, metaMerged, last)
}
