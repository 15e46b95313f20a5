package storage

import (
	"encoding/binary"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
)

// schemaFolded marks a store whose index was built with accents folded
// (cafe finds Café). A store below it holds terms with their accents, which
// queries folded now would not meet: Open reindexes it (reindexFolded).
// memgate before it refuses a store at it, whose queries would keep the
// accents the index dropped.
const schemaFolded = 4

// needsReindex reports whether the store's schema predates schemaFolded.
func (s *Store) needsReindex() (bool, error) {
	var schema uint64
	err := s.readTx("storage.Open", func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(metaSchema); len(v) == 8 {
			schema = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return schema != 0 && schema < schemaFolded, err
}

// reindexFolded drops the store's index in one transaction and sets the
// merged mark to 0, so that Open's rebuild of the tail analyses every memory
// again with the analysis of now, and a merge writes the postings anew.
// The counters BM25 reads are counted again from the records. A crash
// before the commit leaves the old index and schema (the next Open starts
// over); after it, the index is derived from the records, as every tail is.
func (s *Store) reindexFolded() error {
	const op = "storage.Open"
	err := s.writeTx(op, func(tx *bolt.Tx) error {
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
		var total uint64
		c := tx.Bucket(bucketDocs).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			r, err := s.decodeRecord(k, v)
			if err != nil {
				return err
			}
			total += uint64(recordTerms(&r, func(byte, string, int) {}))
		}
		if err := s.setCounter(meta, metaTotalLen, total); err != nil {
			return err
		}
		if err := s.setCounter(meta, metaMerged, 0); err != nil {
			return err
		}
		if err := meta.Delete(metaMerging); err != nil {
			return err
		}
		return meta.Put(metaSchema, u64(schemaFolded))
	})
	if err != nil {
		return memgate.Wrap(op, err)
	}
	s.log.Info("the index was rebuilt with accents folded", "op", op)
	return nil
}
