package storage

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Postings live in the postings bucket as chunks. A chunk's key is the term's
// key (from the sealer) followed by the big-endian document number of the
// chunk's first posting. Its value starts with a header — the number of
// postings and the gap from the first document to the last, as uvarints —
// so appending needs no decoding; then come up to chunkSize postings in
// document order, each as three uvarints: the gap from the previous document
// (0 for the first), the term frequency, and the document's length in terms.
//
// Document numbers only grow (every write takes a new one), so adding a
// document appends to a term's last chunk, and removing one rewrites the one
// chunk that holds it: a write touches one bounded chunk per distinct term,
// whatever the number of memories. Within one transaction, additions are
// gathered per term and appended once, when the transaction ends.
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

// chunkHeader reads a chunk's header: its posting count, its last document
// (given its first, base) and the bytes after the header.
func chunkHeader(base uint64, chunk []byte) (count int, last uint64, body []byte, ok bool) {
	n, a := binary.Uvarint(chunk)
	if a <= 0 {
		return 0, 0, nil, false
	}
	span, b := binary.Uvarint(chunk[a:])
	if b <= 0 {
		return 0, 0, nil, false
	}
	return int(n), base + span, chunk[a+b:], true
}

// appendChunk decodes chunk (whose first document is base) onto dst.
func appendChunk(dst []posting, base uint64, chunk []byte) ([]posting, bool) {
	_, _, body, ok := chunkHeader(base, chunk)
	if !ok {
		return dst, false
	}
	doc := base
	for len(body) > 0 {
		gap, n1 := binary.Uvarint(body)
		if n1 <= 0 {
			return dst, false
		}
		tf, n2 := binary.Uvarint(body[n1:])
		if n2 <= 0 {
			return dst, false
		}
		dl, n3 := binary.Uvarint(body[n1+n2:])
		if n3 <= 0 {
			return dst, false
		}
		body = body[n1+n2+n3:]
		doc += gap
		dst = append(dst, posting{doc: doc, tf: uint32(tf), docLen: uint32(dl)})
	}
	return dst, true
}

// encodeChunk encodes ps, the whole of a chunk whose key names ps[0].doc.
func encodeChunk(ps []posting) []byte {
	dst := make([]byte, 0, 4+len(ps)*6)
	dst = binary.AppendUvarint(dst, uint64(len(ps)))
	dst = binary.AppendUvarint(dst, ps[len(ps)-1].doc-ps[0].doc)
	return appendEntries(dst, ps[0].doc, ps)
}

func appendEntries(dst []byte, prev uint64, ps []posting) []byte {
	for _, p := range ps {
		dst = binary.AppendUvarint(dst, p.doc-prev)
		dst = binary.AppendUvarint(dst, uint64(p.tf))
		dst = binary.AppendUvarint(dst, uint64(p.docLen))
		prev = p.doc
	}
	return dst
}

// postingsWriter changes posting lists inside one write transaction.
// Additions wait in adds until flush; removals apply at once.
type postingsWriter struct {
	b    *bolt.Bucket
	seal sealer
	adds map[string][]posting
	buf  []posting
}

// add queues p for term's list. p.doc must be larger than every document in
// the list.
func (w *postingsWriter) add(term []byte, p posting) {
	if w.adds == nil {
		w.adds = make(map[string][]posting)
	}
	w.adds[string(term)] = append(w.adds[string(term)], p)
}

// flush appends the queued additions, term by term in key order.
func (w *postingsWriter) flush() error {
	terms := make([]string, 0, len(w.adds))
	for t := range w.adds {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	for _, t := range terms {
		if ps := w.adds[t]; len(ps) > 0 {
			if err := w.appendTerm([]byte(t), ps); err != nil {
				return err
			}
		}
	}
	clear(w.adds)
	return nil
}

// appendTerm appends ps to term's list: into its last chunk while it has
// room, then into new chunks.
func (w *postingsWriter) appendTerm(term []byte, ps []posting) error {
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
		count, last, body, ok := chunkHeader(base, plain)
		if !ok {
			return errBadRecord
		}
		if room := chunkSize - count; room > 0 {
			take := ps[:min(room, len(ps))]
			ps = ps[len(take):]
			val := make([]byte, 0, 4+len(body)+len(take)*6)
			val = binary.AppendUvarint(val, uint64(count+len(take)))
			val = binary.AppendUvarint(val, take[len(take)-1].doc-base)
			val = append(val, body...)
			val = appendEntries(val, last, take)
			key := bytes.Clone(k)
			if err := w.b.Put(key, w.seal.seal(bucketPostings, key, val)); err != nil {
				return err
			}
		}
	}
	for len(ps) > 0 {
		take := ps[:min(chunkSize, len(ps))]
		ps = ps[len(take):]
		key := chunkKey(term, take[0].doc)
		if err := w.b.Put(key, w.seal.seal(bucketPostings, key, encodeChunk(take))); err != nil {
			return err
		}
	}
	return nil
}

// remove takes doc out of term's list; a missing posting is not an error.
func (w *postingsWriter) remove(term []byte, doc uint64) error {
	if queued := w.adds[string(term)]; len(queued) > 0 {
		if i := slices.IndexFunc(queued, func(p posting) bool { return p.doc == doc }); i >= 0 {
			w.adds[string(term)] = slices.Delete(queued, i, i+1)
			return nil
		}
	}
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
	i := slices.IndexFunc(ps, func(p posting) bool { return p.doc == doc })
	if i < 0 {
		return nil
	}
	ps = slices.Delete(ps, i, i+1)
	if err := w.b.Delete(key); err != nil {
		return err
	}
	if len(ps) == 0 {
		return nil
	}
	nk := chunkKey(term, ps[0].doc)
	return w.b.Put(nk, w.seal.seal(bucketPostings, nk, encodeChunk(ps)))
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
