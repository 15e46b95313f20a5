package storage

import (
	"crypto/sha256"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Every key a store writes must fit bbolt's limit (bolt.MaxKeySize, 32 KiB):
// a Put past it fails, and a merge that fails on it could never finish. Keys
// of fixed size (document numbers, creation keys, meta keys) fit at once;
// keys derived from content (sealer.key) are bounded by construction. The
// longest is a posting chunk's: a term key and 8 bytes of document number.
const (
	// maxTermKey is the longest key a sealer may return.
	maxTermKey = bolt.MaxKeySize - 8
	// maxPlainContent is the longest content the plain sealer keeps as it
	// is, with its kind and its closing NUL: every key that ever fitted
	// keeps its form.
	maxPlainContent = maxTermKey - 2
	// keyPrefixBytes is how much of a longer content a hashed key keeps in
	// front of its hash, so that keys of similar content stay neighbours.
	keyPrefixBytes = 64
)

// hashedKey is the plain sealer's key for content it does not keep whole:
// kind, up to keyPrefixBytes of the content (cut before any NUL or 0xFF),
// 0xFF, the SHA-256 of the content, NUL; at most keyPrefixBytes+35 bytes.
//
// No key is a prefix of another. A whole key (kind, content, NUL) holds no
// 0xFF, since its content is UTF-8 without a NUL, so it cannot start with
// a hashed key; nor can a hashed key start with it: where the whole key
// has its NUL, the hashed key has a prefix byte (never NUL) or its 0xFF,
// and if the whole content is longer than the prefix, the whole key has a
// content byte (never 0xFF) where the hashed key has its 0xFF. Two hashed
// keys of one kind differ where the shorter prefix ends (0xFF against a
// prefix byte) or have one length, so neither starts the other unless they
// are equal, which takes two contents with one SHA-256.
func hashedKey(kind byte, content string) []byte {
	prefix := content[:min(len(content), keyPrefixBytes)]
	if i := strings.IndexByte(prefix, 0); i >= 0 {
		prefix = prefix[:i]
	}
	if i := strings.IndexByte(prefix, 0xff); i >= 0 {
		prefix = prefix[:i]
	}
	sum := sha256.Sum256([]byte(content))
	k := make([]byte, 0, len(prefix)+len(sum)+3)
	k = append(k, kind)
	k = append(k, prefix...)
	k = append(k, 0xff)
	k = append(k, sum[:]...)
	return append(k, 0)
}
