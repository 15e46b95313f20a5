package storage

import (
	"bytes"
	"encoding/binary"
	"math"

	bolt "go.etcd.io/bbolt"
)

// Postings live in the postings bucket as chunks. A chunk's key is the term's
// key (from the sealer) followed by the big-endian document number of the
// chunk's first posting; its value holds up to chunkSize postings in document
// order, each as three uvarints: the gap from the previous document (from the
// key's document for the first), the term frequency, and the document's
// length in terms.
//
// Document numbers only grow (every write takes a new one), so adding a
// document appends to a term's last chunk, and removing one rewrites the one
// chunk that holds it: a write touches one bounded chunk per distinct term,
// whatever the number of memories.
const chunkSize = 128

// posting is one document in a term's list.
type posting struct {
	doc    uint64
	tf     uint32
	docLen uint32
}

func chunkKey(term []byte, doc uint64) []byte {
	k := make([]byte, len(term)+8)
	copy(k, term)
	binary.BigEndian.PutUint64(k[len(term):], doc)
	return k
}

// appendChunk decodes chunk (whose first document is base) onto dst.
func appendChunk(dst []posting, base uint64, chunk []byte) ([]posting, bool) {
	doc := base
	for len(chunk) > 0 {
		gap, n1 := binary.Uvarint(chunk)
		if n1 <= 0 {
			return dst, false
		}
		tf, n2 := binary.Uvarint(chunk[n1:])
		if n2 <= 0 {
			return dst, false
		}
		dl, n3 := binary.Uvarint(chunk[n1+n2:])
		if n3 <= 0 {
			return dst, false
		}
		chunk = chunk[n1+n2+n3:]
		doc += gap
		dst = append(dst, posting{doc: doc, tf: uint32(tf), docLen: uint32(dl)})
	}
	return dst, true
}

func encodeChunk(dst []byte, ps []posting) []byte {
	prev := ps[0].doc
	for _, p := range ps {
		dst = binary.AppendUvarint(dst, p.doc-prev)
		dst = binary.AppendUvarint(dst, uint64(p.tf))
		dst = binary.AppendUvarint(dst, uint64(p.docLen))
		prev = p.doc
	}
	return dst
}

// postingsWriter changes posting lists inside one write transaction.
type postingsWriter struct {
	b    *bolt.Bucket
	seal sealer
	buf  []posting
}

// add appends p to term's list. p.doc must be larger than every document in
// the list.
func (w *postingsWriter) add(term []byte, p posting) error {
	c := w.b.Cursor()
	k, v := c.Seek(chunkKey(term, math.MaxUint64))
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	if k != nil && len(k) == len(term)+8 && bytes.HasPrefix(k, term) {
		plain, err := w.seal.open(bucketPostings, k, v)
		if err != nil {
			return err
		}
		base := binary.BigEndian.Uint64(k[len(term):])
		ps, ok := appendChunk(w.buf[:0], base, plain)
		if !ok {
			return errBadRecord
		}
		w.buf = ps
		if len(ps) < chunkSize {
			ps = append(ps, p)
			key := bytes.Clone(k)
			return w.b.Put(key, w.seal.seal(bucketPostings, key, encodeChunk(nil, ps)))
		}
	}
	key := chunkKey(term, p.doc)
	return w.b.Put(key, w.seal.seal(bucketPostings, key, encodeChunk(nil, []posting{p})))
}

// remove takes doc out of term's list; a missing posting is not an error.
func (w *postingsWriter) remove(term []byte, doc uint64) error {
	c := w.b.Cursor()
	k, v := c.Seek(chunkKey(term, doc))
	switch {
	case k == nil:
		k, v = c.Last()
	case !bytes.Equal(k, chunkKey(term, doc)):
		k, v = c.Prev()
	}
	if k == nil || len(k) != len(term)+8 || !bytes.HasPrefix(k, term) {
		return nil
	}
	key := bytes.Clone(k)
	plain, err := w.seal.open(bucketPostings, key, v)
	if err != nil {
		return err
	}
	ps, ok := appendChunk(w.buf[:0], binary.BigEndian.Uint64(key[len(term):]), plain)
	if !ok {
		return errBadRecord
	}
	w.buf = ps
	i := 0
	for i < len(ps) && ps[i].doc != doc {
		i++
	}
	if i == len(ps) {
		return nil
	}
	ps = append(ps[:i], ps[i+1:]...)
	if err := w.b.Delete(key); err != nil {
		return err
	}
	if len(ps) == 0 {
		return nil
	}
	nk := chunkKey(term, ps[0].doc)
	return w.b.Put(nk, w.seal.seal(bucketPostings, nk, encodeChunk(nil, ps)))
}

// readPostings appends every posting of term to dst, in document order.
func readPostings(b *bolt.Bucket, s sealer, term []byte, dst []posting) ([]posting, error) {
	c := b.Cursor()
	for k, v := c.Seek(term); k != nil && len(k) == len(term)+8 && bytes.HasPrefix(k, term); k, v = c.Next() {
		plain, err := s.open(bucketPostings, k, v)
		if err != nil {
			return dst, err
		}
		var ok bool
		dst, ok = appendChunk(dst, binary.BigEndian.Uint64(k[len(term):]), plain)
		if !ok {
			return dst, errBadRecord
		}
	}
	return dst, nil
}

// readDocs appends the document numbers of term's list to dst, in order.
func readDocs(b *bolt.Bucket, s sealer, term []byte, dst []uint64, scratch []posting) ([]uint64, []posting, error) {
	ps, err := readPostings(b, s, term, scratch[:0])
	for _, p := range ps {
		dst = append(dst, p.doc)
	}
	return dst, ps, err
}
