package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"sync"

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
// Document numbers only grow (every write takes a new one), so a merge of
// the tail (see tail.go) appends to each term's last chunk, and removing a
// merged document rewrites the one chunk that holds it: bounded work per
// distinct term, whatever the number of memories.
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

// postingsWriter changes posting lists on disk inside one write
// transaction: merges append, and purge the postings of gone documents.
type postingsWriter struct {
	b    *bolt.Bucket
	seal sealer
	c    *bolt.Cursor // purge's, kept: a cursor costs an allocation
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
		// After a merge that was cut short, some postings are there already.
		for len(ps) > 0 && ps[0].doc <= last {
			ps = ps[1:]
		}
		if len(ps) == 0 {
			return nil
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

// view is a read transaction together with the tail that matches it.
type view struct {
	tx       *bolt.Tx
	tail     *tail
	seq      uint64 // the docs sequence of this snapshot
	postings *bolt.Bucket
	seal     sealer
	gone     []goneDoc    // the tail's gone documents (see dead)
	expired  []uint64     // the documents expired and not swept yet, in order
	bufs     []*[]posting // the iterators' chunk buffers, back to chunkPool at the end
}

// chunkPool holds buffers of one decoded chunk: a search walks a hundred
// lists or more, each with a chunk decoded at a time.
var chunkPool = sync.Pool{New: func() any { b := make([]posting, 0, chunkSize); return &b }}

// chunkBuf returns a buffer for an iterator of v's, valid until v ends.
func (v *view) chunkBuf() []posting {
	b := chunkPool.Get().(*[]posting)
	v.bufs = append(v.bufs, b)
	return (*b)[:0]
}

// done gives v's buffers back.
func (v *view) done() {
	for _, b := range v.bufs {
		chunkPool.Put(b)
	}
	v.bufs = nil
}

// errStaleTail makes view start again: a merge came between taking the
// tail and opening the transaction.
var errStaleTail = errors.New("storage: tail changed")

// view runs fn in a read transaction with the matching tail.
func (s *Store) view(fn func(v *view) error) error {
	for {
		tl := s.index.current()
		err := s.readTx("storage.view", func(tx *bolt.Tx) error {
			merged, err := s.counter(tx.Bucket(bucketMeta), metaMerged)
			if err != nil {
				return err
			}
			if merged != tl.base {
				return errStaleTail
			}
			v := &view{tx: tx, tail: tl, seq: tx.Bucket(bucketDocs).Sequence(),
				postings: tx.Bucket(bucketPostings), seal: s.seal, gone: tl.goneDocs(), expired: expiredDocs(tx, s.lazyNow())}
			defer v.done()
			return fn(v)
		})
		if err != errStaleTail {
			return err
		}
	}
}

// list appends to dst every posting of term in this snapshot, by document:
// the merged ones from disk, then the tail's.
func (v *view) list(term []byte, dst []posting) ([]posting, error) {
	n := len(dst)
	dst, err := readPostings(v.postings, v.seal, term, dst)
	if err != nil {
		return dst, err
	}
	// While a merge runs, a term may be on disk and in the tail at once.
	after := v.tail.base
	if len(dst) > n {
		after = max(after, dst[len(dst)-1].doc)
	}
	dst = v.tail.postings(term, v.seq, after, dst)
	return append(dst[:n], v.dropGone(dst[n:])...), nil
}

// docs appends the document numbers of term's list to dst, in order.
func (v *view) docs(term []byte, dst []uint64, scratch []posting) ([]uint64, []posting, error) {
	ps, err := v.list(term, scratch[:0])
	for _, p := range ps {
		dst = append(dst, p.doc)
	}
	return dst, ps, err
}
