package storage

import (
	"encoding/binary"
	"strings"
)

// A sealer is the one place record values and content-derived keys pass
// through on their way to disk. Values are sealed with their bucket and key
// as associated data, so a sealed value cannot be moved to another key.
// Keys derived from content (ids, index terms, tags, metadata filter values)
// come from key, so an encrypting sealer can make them keyed hashes.
//
// open may return a slice of sealed itself: callers copy what they keep
// beyond the transaction.
type sealer interface {
	seal(bucket, key, plain []byte) []byte
	open(bucket, key, sealed []byte) ([]byte, error)
	key(kind byte, content string) []byte
	// sealU64 and openU64 carry the meta bucket's counters.
	sealU64(key []byte, v uint64) []byte
	openU64(key, raw []byte) (uint64, error)
}

// Kinds of content-derived keys. Each kind has its own key space.
const (
	kindID   byte = 'i' // a memory id, in the ids bucket
	kindWord byte = 'w' // an analysed word of title or text
	kindTag  byte = 't' // a tag
	kindMeta byte = 'm' // a metadata key and value, for filters
)

// plainSealer stores values as they are and keys as kind, content, NUL. The
// NUL ends the key so that no key is a prefix of another: content never
// holds a NUL byte (ids and tags refuse control characters, words come from
// the analyser, metadata values are JSON-encoded). Content that is longer
// than maxPlainContent, or that holds a NUL or a 0xFF byte after all, is
// hashed instead (see hashedKey), so every key fits bbolt whatever the
// content.
type plainSealer struct{}

func (plainSealer) seal(_, _, plain []byte) []byte { return plain }

func (plainSealer) open(_, _, sealed []byte) ([]byte, error) { return sealed, nil }

func (plainSealer) sealU64(_ []byte, v uint64) []byte { return u64(v) }

// openU64 reads a plain counter; a missing one is 0.
func (plainSealer) openU64(_, raw []byte) (uint64, error) {
	if len(raw) != 8 {
		return 0, nil
	}
	return binary.BigEndian.Uint64(raw), nil
}

func (plainSealer) key(kind byte, content string) []byte {
	if len(content) > maxPlainContent || strings.IndexByte(content, 0) >= 0 || strings.IndexByte(content, 0xff) >= 0 {
		return hashedKey(kind, content)
	}
	k := make([]byte, 0, len(content)+2)
	k = append(k, kind)
	k = append(k, content...)
	return append(k, 0)
}
