package storage

import (
	"bytes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash"
	"io"
	"log/slog"
	"sync"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/memgate/memgate"
)

// Encryption at rest. A store opened with Options.Encryption seals every
// value with XChaCha20-Poly1305 under a key derived from a passphrase, and
// turns every key derived from content into a keyed hash (HMAC-SHA-256,
// cut to 128 bits) under a second key derived from the same passphrase.
// The store's meta bucket keeps the KDF parameters and the salt (metaKDF)
// and a key check (metaKeyCheck): a value sealed under the store's key, so
// that a wrong passphrase fails the open instead of every read after it.
// docs/ENCRYPTION.md says what this hides and what it does not.

// Keys of the meta bucket that only an encrypted store has.
var (
	metaKDF      = []byte("kdf")       // KDF parameters and salt: the store is encrypted
	metaKeyCheck = []byte("key_check") // keyCheckText, sealed
)

var keyCheckText = []byte("memgate key check")

// KDFParams are the costs of Argon2id. A store records those it was made
// with, so that raising the defaults leaves old stores readable (and a
// rekey moves them to the new ones).
type KDFParams struct {
	Time    uint32 // passes over the memory
	Memory  uint32 // KiB
	Threads uint8
}

// DefaultKDF is the cost of new stores: 64 MiB and a few tenths of a
// second, once per store a process opens (the keys are kept after that).
var DefaultKDF = KDFParams{Time: 3, Memory: 64 << 10, Threads: 4}

// Bounds on the parameters a store may record, so that a damaged or
// hostile file cannot make an open take hours or all the memory.
const (
	maxKDFTime   = 64
	maxKDFMemory = 4 << 20 // KiB: 4 GiB
	saltSize     = 16
)

func (p KDFParams) valid() bool {
	return p.Time >= 1 && p.Time <= maxKDFTime && p.Threads >= 1 &&
		p.Memory >= 8*uint32(p.Threads) && p.Memory <= maxKDFMemory
}

// Errors of opening an encrypted store, or a plain one with a passphrase.
var (
	ErrWrongPassphrase = &memgate.Error{Code: memgate.CodeUnavailable,
		Message: "the passphrase does not open this store"}
	ErrEncrypted = &memgate.Error{Code: memgate.CodeUnavailable,
		Message: "the store is encrypted; open it with --encrypt and its passphrase"}
	ErrNotEncrypted = &memgate.Error{Code: memgate.CodeUnavailable,
		Message: "the store is not encrypted; open it without --encrypt"}
	// ErrTampered is in the chain of the damaged-store error a read returns when a
	// sealed value fails its authentication: the file was damaged or altered.
	ErrTampered = errors.New("storage: a sealed value failed authentication")
)

// Encryption seals the stores opened with it under keys derived from one
// passphrase. One value serves every store of a process, concurrently: it
// keeps the keys it derived, by salt, so that reopening a store (after the
// pool closed it) does not run the KDF again. It never shows the passphrase
// when printed or logged.
type Encryption struct {
	// KDF is the cost for stores created (or rekeyed) with it; the zero
	// value means DefaultKDF. Existing stores keep their own.
	KDF KDFParams

	passphrase []byte
	mu         sync.Mutex
	keys       map[string]*encSealer // by KDF record
}

// NewEncryption returns the encryption of passphrase, which must not be
// empty.
func NewEncryption(passphrase string) (*Encryption, error) {
	if passphrase == "" {
		return nil, memgate.Invalid("passphrase", "the passphrase is empty")
	}
	return &Encryption{passphrase: []byte(passphrase)}, nil
}

func (e *Encryption) String() string   { return "storage.Encryption{passphrase: redacted}" }
func (e *Encryption) GoString() string { return e.String() }

// LogValue keeps the passphrase out of structured logs.
func (e *Encryption) LogValue() slog.Value { return slog.StringValue(e.String()) }

func (e *Encryption) params() KDFParams {
	if e.KDF == (KDFParams{}) {
		return DefaultKDF
	}
	return e.KDF
}

// The KDF record in meta:
//
//	byte    kdfFormat
//	byte    aeadXChaCha20Poly1305
//	byte    kdfArgon2id
//	uint32  time, uint32 memory (KiB), byte threads (big-endian)
//	byte    salt length, then the salt
const (
	kdfFormat             = 1
	aeadXChaCha20Poly1305 = 1
	kdfArgon2id           = 1
)

func encodeKDF(p KDFParams, salt []byte) []byte {
	b := []byte{kdfFormat, aeadXChaCha20Poly1305, kdfArgon2id}
	b = binary.BigEndian.AppendUint32(b, p.Time)
	b = binary.BigEndian.AppendUint32(b, p.Memory)
	b = append(b, p.Threads, byte(len(salt)))
	return append(b, salt...)
}

var errBadKDF = &memgate.Error{Code: memgate.CodeUnavailable,
	Message: "the store's encryption parameters are damaged or from a newer memgate"}

func decodeKDF(b []byte) (KDFParams, []byte, error) {
	if len(b) < 14 || b[0] != kdfFormat || b[1] != aeadXChaCha20Poly1305 || b[2] != kdfArgon2id {
		return KDFParams{}, nil, errBadKDF
	}
	p := KDFParams{Time: binary.BigEndian.Uint32(b[3:]), Memory: binary.BigEndian.Uint32(b[7:]), Threads: b[11]}
	salt := b[13:]
	if int(b[12]) != len(salt) || len(salt) < saltSize || !p.valid() {
		return KDFParams{}, nil, errBadKDF
	}
	return p, salt, nil
}

// kdfSlots bounds the derivations that run at once: each takes the KDF's
// memory, and a pool may open many stores together.
var kdfSlots = make(chan struct{}, 2)

// maxCachedKeys bounds the keys an Encryption keeps; past it, it starts over.
const maxCachedKeys = 4096

// sealer returns the sealer of the store whose KDF record is rec.
func (e *Encryption) sealer(rec []byte) (*encSealer, error) {
	e.mu.Lock()
	s := e.keys[string(rec)]
	e.mu.Unlock()
	if s != nil {
		return s, nil
	}
	p, salt, err := decodeKDF(rec)
	if err != nil {
		return nil, err
	}
	kdfSlots <- struct{}{}
	master := argon2.IDKey(e.passphrase, salt, p.Time, p.Memory, p.Threads, 32)
	<-kdfSlots
	s, err = newEncSealer(master)
	clear(master)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if e.keys == nil || len(e.keys) >= maxCachedKeys {
		e.keys = map[string]*encSealer{}
	}
	e.keys[string(rec)] = s
	e.mu.Unlock()
	return s, nil
}

// create makes the KDF record of a new store, with a fresh salt, and its
// sealer.
func (e *Encryption) create() ([]byte, *encSealer, error) {
	p := e.params()
	if !p.valid() {
		return nil, nil, memgate.Invalid("kdf", "the key derivation parameters are out of range")
	}
	salt := make([]byte, saltSize)
	rand.Read(salt)
	rec := encodeKDF(p, salt)
	s, err := e.sealer(rec)
	return rec, s, err
}

// open returns the sealer of a store with KDF record rec and key check
// check, or ErrWrongPassphrase.
func (e *Encryption) open(rec, check []byte) (*encSealer, error) {
	s, err := e.sealer(rec)
	if err != nil {
		return nil, err
	}
	plain, err := s.open(bucketMeta, metaKeyCheck, check)
	if err != nil || !bytes.Equal(plain, keyCheckText) {
		return nil, ErrWrongPassphrase
	}
	return s, nil
}

// encSealer seals values with XChaCha20-Poly1305 (random 192-bit nonces:
// no limit on how many values one key seals) and hashes content-derived
// keys with HMAC-SHA-256. Both keys come from the master key by HKDF. It is
// safe for concurrent use.
type encSealer struct {
	aead cipher.AEAD
	macs sync.Pool // of hash.Hash, keyed
}

const (
	nonceSize   = chacha20poly1305.NonceSizeX
	sealedExtra = nonceSize + chacha20poly1305.Overhead
	keyHashSize = 16
)

func newEncSealer(master []byte) (*encSealer, error) {
	sealKey, err := hkdf.Key(sha256.New, master, nil, "memgate seal", chacha20poly1305.KeySize)
	if err != nil {
		return nil, err
	}
	macKey, err := hkdf.Key(sha256.New, master, nil, "memgate key", 32)
	if err != nil {
		return nil, err
	}
	aead, err := chacha20poly1305.NewX(sealKey)
	clear(sealKey)
	if err != nil {
		return nil, err
	}
	s := &encSealer{aead: aead}
	s.macs.New = func() any { return hmac.New(sha256.New, macKey) }
	return s, nil
}

// aad binds a value to its place: its bucket and its key.
func aad(bucket, key []byte) []byte {
	b := make([]byte, 0, 1+len(bucket)+len(key))
	b = append(b, byte(len(bucket)))
	b = append(b, bucket...)
	return append(b, key...)
}

func (s *encSealer) seal(bucket, key, plain []byte) []byte {
	out := make([]byte, nonceSize, sealedExtra+len(plain))
	rand.Read(out)
	return s.aead.Seal(out, out, plain, aad(bucket, key))
}

func (s *encSealer) open(bucket, key, sealed []byte) ([]byte, error) {
	if len(sealed) < sealedExtra {
		return nil, ErrTampered
	}
	plain, err := s.aead.Open(nil, sealed[:nonceSize], sealed[nonceSize:], aad(bucket, key))
	if err != nil {
		return nil, ErrTampered
	}
	return plain, nil
}

func (s *encSealer) key(kind byte, content string) []byte {
	h := s.macs.Get().(hash.Hash)
	h.Reset()
	h.Write([]byte{kind})
	io.WriteString(h, content)
	var sum [sha256.Size]byte
	out := h.Sum(sum[:0])
	s.macs.Put(h)
	return bytes.Clone(out[:keyHashSize])
}
