package storage

import (
	"slices"

	bolt "go.etcd.io/bbolt"
)

// mergeSlice is how many terms one merge transaction appends. A merge in
// slices keeps the file small: the pages a slice replaces are free again for
// the next one, so the file never needs room for two copies of the index.
var mergeSlice = 2048

// mergeFault, when set by a test, fails the merge before slice n.
var mergeFault func(n int) error

// merge moves the tail's live postings into the postings bucket, one chunk
// append per term, raises the merged mark to the current sequence, and
// starts an empty tail. Only the committer calls it (through tryMerge),
// between groups, and Open and Close, so no write runs meanwhile; readers go
// on (see tail).
//
// The merge runs in slices of mergeSlice terms, one transaction each. Until
// the last one commits, the merged mark stays where it was and readers use
// the old tail; a term already merged has its tail postings on disk too, and
// view.list reads each posting once. The first slice records the mark it is
// merging to; if the process dies before the last, Open finishes the merge,
// and appendTerm skips what is already on disk.
func (x *index) merge() error {
	s := x.s
	tl := x.current()
	live, gone := tl.snapshot(), tl.goneByTerm()
	terms := make([]string, 0, len(live))
	for k := range live {
		terms = append(terms, k)
	}
	slices.Sort(terms) // key order: neighbouring terms share pages
	var mark uint64
	for start := 0; start == 0 || start < len(terms); start += mergeSlice {
		slice := terms[start:min(start+mergeSlice, len(terms))]
		last := start+mergeSlice >= len(terms)
		if mergeFault != nil {
			if err := mergeFault(start / mergeSlice); err != nil {
				return err
			}
		}
		err := s.writeTx("storage.merge", func(tx *bolt.Tx) error {
			t := s.txn(tx)
			if start == 0 {
				mark = t.docs.Sequence()
				if err := s.setCounter(t.meta, metaMerging, mark); err != nil {
					return err
				}
			}
			for _, k := range slice {
				if err := t.postings.appendTerm([]byte(k), live[k]); err != nil {
					return err
				}
			}
			if !last {
				return nil
			}
			// The gone documents leave the chunks with the mark that drops
			// them from the tail: no snapshot sees one without the other.
			if err := t.purgeGone(gone); err != nil {
				return err
			}
			if err := t.meta.Delete(metaMerging); err != nil {
				return err
			}
			return s.setCounter(t.meta, metaMerged, mark)
		})
		if err != nil {
			return err
		}
	}
	x.tail.Store(newTail(mark, s.opts.TailBudget))
	tl.release()
	return nil
}
