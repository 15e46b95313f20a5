package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"time"

	"github.com/memgate/memgate"
)

// A record is a memory as it sits in the docs bucket: a compact binary form,
// sealed before it is written. The version is not stored: it is the record's
// key, the document number.
//
//	byte     recordFormat
//	uvarint  origin (the document number of the memory's first write; with
//	         created_at it keys the by_created bucket)
//	varint   created_at (Unix nanoseconds)
//	uvarint  updated_at − created_at (often 0: one byte)
//	bytes    id, text, title
//	uvarint  tag count, then bytes per tag
//	bytes    metadata as canonical JSON ("" when empty)
//
// and, only when the memory expires or has a source (so that a record
// without either is the same bytes as before there were such fields):
//
//	byte     which follow: 1 expires, 2 source, 4 the source's observed_at
//	varint   expires_at (Unix nanoseconds)
//	bytes    the source's kind, reference, actor
//	varint   its observed_at (Unix nanoseconds)
//
// where bytes is a uvarint length followed by that many bytes.
const recordFormat = 1

const (
	hasExpiry   = 1
	hasSource   = 2
	hasObserved = 4
)

type record struct {
	origin  uint64
	created int64
	updated int64
	id      string
	text    string
	title   string
	tags    []string
	meta    string // canonical JSON object, or ""
	expires int64  // Unix nanoseconds; 0: never
	source  *memgate.Source
}

// extended reports whether r needs the fields after the metadata, which
// memgate before them cannot read (see schemaRecords).
func (r *record) extended() bool { return r.expires != 0 || r.source != nil }

var errBadRecord = errors.New("storage: malformed record")

func newRecord(w memgate.Write, origin uint64, created, updated int64) (record, error) {
	r := record{origin: origin, created: created, updated: updated,
		id: w.ID, text: w.Text, title: w.Title, tags: w.Tags, source: w.Source}
	if w.ExpiresAt != nil {
		r.expires = w.ExpiresAt.UnixNano()
	}
	if len(w.Metadata) > 0 {
		b, err := json.Marshal(w.Metadata)
		if err != nil {
			return r, err
		}
		r.meta = string(b)
	}
	return r, nil
}

func (r *record) size() int {
	n := 1 + 3*binary.MaxVarintLen64 + 4*binary.MaxVarintLen32 + len(r.id) + len(r.text) + len(r.title) + len(r.meta)
	for _, t := range r.tags {
		n += binary.MaxVarintLen32 + len(t)
	}
	if src := r.source; src != nil {
		n += 1 + 2*binary.MaxVarintLen64 + 3*binary.MaxVarintLen32 + len(src.Kind) + len(src.Reference) + len(src.Actor)
	} else if r.expires != 0 {
		n += 1 + binary.MaxVarintLen64
	}
	return n
}

func (r *record) marshal(dst []byte) []byte {
	dst = append(dst, recordFormat)
	dst = binary.AppendUvarint(dst, r.origin)
	dst = binary.AppendVarint(dst, r.created)
	dst = binary.AppendVarint(dst, r.updated-r.created)
	dst = appendBytes(dst, r.id)
	dst = appendBytes(dst, r.text)
	dst = appendBytes(dst, r.title)
	dst = binary.AppendUvarint(dst, uint64(len(r.tags)))
	for _, t := range r.tags {
		dst = appendBytes(dst, t)
	}
	dst = appendBytes(dst, r.meta)
	if !r.extended() {
		return dst
	}
	var which byte
	if r.expires != 0 {
		which |= hasExpiry
	}
	if r.source != nil {
		which |= hasSource
		if r.source.ObservedAt != nil {
			which |= hasObserved
		}
	}
	dst = append(dst, which)
	if r.expires != 0 {
		dst = binary.AppendVarint(dst, r.expires)
	}
	if src := r.source; src != nil {
		dst = appendBytes(dst, src.Kind)
		dst = appendBytes(dst, src.Reference)
		dst = appendBytes(dst, src.Actor)
		if src.ObservedAt != nil {
			dst = binary.AppendVarint(dst, src.ObservedAt.UnixNano())
		}
	}
	return dst
}

func appendBytes(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// unmarshalRecord decodes b. The strings it returns are copies, so they stay
// valid after the transaction that read b ends: b is copied once, and every
// string is a part of that copy (a page of a thousand memories with thirty
// tags each is a thousand allocations, not thirty-five thousand).
func unmarshalRecord(b []byte) (record, error) {
	var r record
	d := decoder{b: b, s: string(b)}
	if d.byte() != recordFormat {
		return r, errBadRecord
	}
	r.origin = d.uvarint()
	r.created = d.varint()
	r.updated = r.created + d.varint()
	r.id = d.string()
	r.text = d.string()
	r.title = d.string()
	if n := d.uvarint(); n > 0 && n <= memgate.MaxTags {
		r.tags = make([]string, n)
		for i := range r.tags {
			r.tags[i] = d.string()
		}
	} else if n > memgate.MaxTags {
		return r, errBadRecord
	}
	r.meta = d.string()
	if len(d.b) > 0 && !d.err {
		which := d.byte()
		if which&hasExpiry != 0 {
			if r.expires = d.varint(); r.expires == 0 {
				return r, errBadRecord
			}
		}
		if which&hasSource != 0 {
			r.source = &memgate.Source{Kind: d.string(), Reference: d.string(), Actor: d.string()}
			if which&hasObserved != 0 {
				t := time.Unix(0, d.varint()).UTC()
				r.source.ObservedAt = &t
			}
		}
		if which == 0 || which&^(hasExpiry|hasSource|hasObserved) != 0 || which&hasObserved != 0 && which&hasSource == 0 {
			return r, errBadRecord
		}
	}
	if d.err || len(d.b) != 0 {
		return r, errBadRecord
	}
	return r, nil
}

// decodeRecord unseals and decodes the docs bucket's value v under key k.
func (s *Store) decodeRecord(k, v []byte) (record, error) {
	if len(k) != 8 { // a document number; anything else is damage
		return record{}, errBadRecord
	}
	plain, err := s.seal.open(bucketDocs, k, v)
	if err != nil {
		return record{}, err
	}
	return unmarshalRecord(plain)
}

// memory turns the record into the memory clients see.
func (r *record) memory(version uint64) (memgate.Memory, error) {
	m := memgate.Memory{
		ID:        r.id,
		Text:      r.text,
		Bytes:     len(r.text),
		Title:     r.title,
		Tags:      r.tags,
		CreatedAt: time.Unix(0, r.created).UTC(),
		UpdatedAt: time.Unix(0, r.updated).UTC(),
		Version:   int64(version),
	}
	if m.Tags == nil {
		m.Tags = []string{}
	}
	if r.expires != 0 {
		t := time.Unix(0, r.expires).UTC()
		m.ExpiresAt = &t
	}
	if r.source != nil {
		src := *r.source
		m.Source = &src
	}
	md, err := decodeMetadata(r.meta)
	if err != nil {
		return m, errBadRecord
	}
	m.Metadata = md
	return m, nil
}

// indexText is what BM25 ranks: the title and the text, as one field.
func (r *record) indexText() string {
	if r.title == "" {
		return r.text
	}
	return r.title + "\n" + r.text
}

// decoder reads the fields of a record; after the first short read every
// further read yields zero values and err stays set.
type decoder struct {
	b   []byte
	s   string // b as first given, copied: string takes its parts from it
	err bool
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.err = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = true
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = true
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.err = true
		d.b = nil
		return ""
	}
	var s string
	if d.s != "" {
		at := len(d.s) - len(d.b)
		s = d.s[at : at+int(n)]
	} else {
		s = string(d.b[:n])
	}
	d.b = d.b[n:]
	return s
}
