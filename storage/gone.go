package storage

import (
	"bytes"
	"encoding/binary"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Forgetting a merged memory. A memory whose postings are still in the tail
// leaves the index at once (tail.dead). One whose postings are merged into
// the chunks would cost a chunk rewrite per distinct term — thousands for a
// large memory, and the pages of each in the commit — so its forget records
// it as gone instead: its record, id and creation key go as always, its
// document number and term keys go to the gone bucket, and readers skip
// its postings (view.dead; a term's document frequency discounts it). The
// next merge takes the postings of every gone document out of the chunks in
// the transaction that raises the merged mark, term by term for all of them
// at once, so a chunk that holds several is rewritten once. Open loads the
// gone documents back into the tail.

// goneDoc is a merged document forgotten since the last merge, and the
// sequence at which it was.
type goneDoc struct{ doc, stamp uint64 }

// goneChange is a forget of a merged document in a transaction's change.
type goneChange struct {
	doc, stamp uint64
	terms      [][]byte
}

// mergeGone is how many postings of gone documents make a merge due. It
// bounds the chunk rewrites of a merge's purge when no two of them share a
// chunk — about the chunk writes of a merge of a tail at its byte bound —
// and makes one purge serve many forgets when they do: forgetting 64 KiB
// memories (5,000 terms each) merges once in about a hundred forgets.
var mergeGone = 1 << 19

// goneBytes is the estimated cost of one posting of a gone document in the
// tail's goneTerms.
const goneBytes = 16

func cmpGone(g goneDoc, doc uint64) int { return cmpDoc(g.doc, doc) }

// encodeGone is the gone bucket's value: the document's term keys.
func encodeGone(terms [][]byte) []byte {
	n := binary.MaxVarintLen64
	for _, t := range terms {
		n += binary.MaxVarintLen32 + len(t)
	}
	out := binary.AppendUvarint(make([]byte, 0, n), uint64(len(terms)))
	for _, t := range terms {
		out = binary.AppendUvarint(out, uint64(len(t)))
		out = append(out, t...)
	}
	return out
}

func decodeGone(b []byte) ([][]byte, bool) {
	n, a := binary.Uvarint(b)
	if a <= 0 || n > uint64(len(b)) {
		return nil, false
	}
	b = b[a:]
	terms := make([][]byte, 0, n)
	for range n {
		l, a := binary.Uvarint(b)
		if a <= 0 || l == 0 || l > uint64(len(b)-a) {
			return nil, false
		}
		terms = append(terms, b[a:a+int(l)])
		b = b[a+int(l):]
	}
	return terms, len(b) == 0
}

// markGone records the merged document doc, forgotten at stamp, as gone.
func (t *txn) markGone(doc, stamp uint64, entries []indexEntry) error {
	b := t.tx.Bucket(bucketGone)
	if b == nil {
		var err error
		if b, err = t.tx.CreateBucket(bucketGone); err != nil {
			return err
		}
		if err := t.raiseSchema(schemaGone); err != nil {
			return err
		}
	}
	terms := make([][]byte, len(entries))
	for i, e := range entries {
		terms[i] = e.term
	}
	key := u64(doc)
	if err := b.Put(key, t.s.seal.seal(bucketGone, key, encodeGone(terms))); err != nil {
		return err
	}
	t.change.gones = append(t.change.gones, goneChange{doc: doc, stamp: stamp, terms: terms})
	return nil
}

// loadGone adds the gone bucket's documents to change, as forgotten before
// any snapshot: Open's, for the tail it builds.
func (s *Store) loadGone(tx *bolt.Tx, merged uint64, change *tailChange) error {
	b := tx.Bucket(bucketGone)
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error {
		if len(k) != 8 {
			return errBadRecord
		}
		doc := binary.BigEndian.Uint64(k)
		plain, err := s.seal.open(bucketGone, k, v)
		if err != nil {
			return err
		}
		terms, ok := decodeGone(plain)
		if !ok || doc == 0 || doc > merged {
			return errBadRecord
		}
		change.gones = append(change.gones, goneChange{doc: doc, terms: terms})
		return nil
	})
}

// purgeGone takes the postings of every gone document out of the chunks
// and empties the gone bucket; the last transaction of a merge runs it.
func (t *txn) purgeGone(byTerm map[string][]uint64) error {
	if t.tx.Bucket(bucketGone) == nil {
		return nil
	}
	terms := make([]string, 0, len(byTerm))
	for k := range byTerm {
		terms = append(terms, k)
	}
	slices.Sort(terms) // key order: the cursor moves forward
	var scratch []posting
	for _, k := range terms {
		var err error
		if scratch, err = t.postings.purge([]byte(k), byTerm[k], scratch); err != nil {
			return err
		}
	}
	if err := t.tx.DeleteBucket(bucketGone); err != nil {
		return err
	}
	if cur := t.meta.Get(metaSchema); len(cur) == 8 && binary.BigEndian.Uint64(cur) == schemaGone {
		return t.meta.Put(metaSchema, u64(schemaBase))
	}
	return nil
}

// purge takes docs (in order) out of term's list, rewriting each chunk that
// holds any of them once; a missing posting is not an error.
func (w *postingsWriter) purge(term []byte, docs []uint64, scratch []posting) ([]posting, error) {
	if w.c == nil {
		w.c = w.b.Cursor()
	}
	c := w.c // every use starts with a Seek: a change made through b moves no cursor
	for len(docs) > 0 {
		want := chunkKey(term, docs[0])
		k, v := c.Seek(want)
		switch {
		case k == nil:
			k, v = c.Last()
		case !bytes.Equal(k, want):
			k, v = c.Prev()
		}
		if k == nil || len(k) != len(term)+8 || !bytes.HasPrefix(k, term) {
			docs = docs[1:] // before the list's first chunk: not in it
			continue
		}
		plain, err := w.seal.open(bucketPostings, k, v)
		if err != nil {
			return scratch, err
		}
		base := binary.BigEndian.Uint64(k[len(term):])
		ps, ok := appendChunk(scratch[:0], base, plain)
		scratch = ps
		if !ok || len(ps) == 0 {
			return scratch, errBadRecord
		}
		last := ps[len(ps)-1].doc
		n := 0
		for n < len(docs) && docs[n] <= last {
			n++
		}
		if n == 0 {
			docs = docs[1:] // between this chunk and the next: not in the list
			continue
		}
		cut := docs[:n]
		docs = docs[n:]
		kept, j := ps[:0], 0
		for _, p := range ps {
			for j < len(cut) && cut[j] < p.doc {
				j++
			}
			if j < len(cut) && cut[j] == p.doc {
				continue
			}
			kept = append(kept, p)
		}
		if len(kept) == len(ps) {
			continue
		}
		if len(kept) == 0 || kept[0].doc != base {
			if err := c.Delete(); err != nil {
				return scratch, err
			}
		}
		if len(kept) > 0 {
			nk := chunkKey(term, kept[0].doc)
			if err := w.b.Put(nk, w.seal.seal(bucketPostings, nk, encodeChunk(kept))); err != nil {
				return scratch, err
			}
		}
	}
	return scratch, nil
}

// A view skips two kinds of dead document: the merged ones forgotten
// (gone, above), as if they had never been written — their postings are
// dropped from every list and their document frequencies discounted — and
// the expired ones the sweeper has not deleted yet, which are never a
// candidate, a hit or a listed memory but still count in the statistics
// of the ranking until the sweep (at most --sweep-interval).

// dead reports whether doc is dead in v's snapshot: gone, or expired.
func (v *view) dead(doc uint64) bool {
	if v == nil {
		return false
	}
	return v.gone1(doc) || v.expired1(doc)
}

func (v *view) gone1(doc uint64) bool {
	if len(v.gone) == 0 {
		return false
	}
	i, ok := slices.BinarySearchFunc(v.gone, doc, cmpGone)
	return ok && v.gone[i].stamp <= v.seq
}

func (v *view) expired1(doc uint64) bool {
	if len(v.expired) == 0 {
		return false
	}
	_, ok := slices.BinarySearch(v.expired, doc)
	return ok
}

// dropGone removes the postings of documents gone in v's snapshot from ps.
func (v *view) dropGone(ps []posting) []posting {
	if len(v.gone) == 0 {
		return ps
	}
	return slices.DeleteFunc(ps, func(p posting) bool { return v.gone1(p.doc) })
}

// clearDead zeroes the scores of documents dead in v's snapshot in acc,
// which holds documents lo to lo+len(acc)-1.
func (v *view) clearDead(acc []float64, lo uint64) {
	for _, g := range v.gone {
		if g.doc >= lo && g.doc-lo < uint64(len(acc)) && g.stamp <= v.seq {
			acc[g.doc-lo] = 0
		}
	}
	for _, doc := range v.expired {
		if doc >= lo && doc-lo < uint64(len(acc)) {
			acc[doc-lo] = 0
		}
	}
}

// goneDF is how many of term's postings on disk are of documents dead in
// v's snapshot.
func (v *view) goneDF(term []byte) int {
	if len(v.gone) == 0 {
		return 0
	}
	return v.tail.goneDF(term, v.seq)
}
