package storage

import (
	"slices"

	bolt "go.etcd.io/bbolt"
)

// merge moves the tail's live postings into the postings bucket, one chunk
// append per term, raises the merged mark to the current sequence, and
// starts an empty tail. Only the committer calls it, between groups, so no
// write runs meanwhile; readers go on (see tail).
func (s *Store) merge() error {
	tl := s.tail.Load()
	live := tl.snapshot()
	terms := make([]string, 0, len(live))
	for k := range live {
		terms = append(terms, k)
	}
	slices.Sort(terms) // key order: neighbouring terms share pages
	var mark uint64
	err := s.db.Update(func(tx *bolt.Tx) error {
		t := s.txn(tx)
		for _, k := range terms {
			if err := t.postings.appendTerm([]byte(k), live[k]); err != nil {
				return err
			}
		}
		mark = t.docs.Sequence()
		return t.meta.Put(metaMerged, u64(mark))
	})
	if err != nil {
		return err
	}
	s.tail.Store(newTail(mark))
	return nil
}
