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
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/memgate/memgate"
)

// Encryption at rest. A store opened with Options.Encryption seals every
// value with XChaCha20-Poly1305 under a key derived from a passphrase, and
// turns every key derived from content into a keyed hash (HMAC-SHA-256,
// cut to 128 bits) under a second key derived from the same passphrase.
// The store's meta bucket keeps the KDF parameters and salts (metaKDF) and
// a key check (metaKeyCheck): a value sealed under the store's key, which
// also names the namespace the store belongs to, so that a wrong
// passphrase or a store copied from another namespace fails the open
// instead of serving. docs/ENCRYPTION.md says what this hides and what it
// does not.
//
// Two formats of the KDF record exist. Format 1 (older stores): Argon2id
// over the passphrase and the store's own salt gives the store's master
// key; counters are plaintext and the store is not bound to a namespace.
// Format 2 (every store created or rekeyed now): Argon2id over the
// passphrase and the data folder's salt gives a master key that one
// process derives once, and HKDF over it with the store's own salt gives
// the store's keys; the counters and the docs sequence are sealed, and the
// key check names the namespace.

// Keys of the meta bucket that only an encrypted store has.
var (
	metaKDF      = []byte("kdf")       // KDF parameters and salts: the store is encrypted
	metaKeyCheck = []byte("key_check") // keyCheckText (and, format 2, the binding), sealed
	metaSeq      = []byte("seq")       // format 2: the docs bucket's sequence, sealed
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

// DefaultKDF is the cost of the master key: 64 MiB and a few tenths of a
// second, once per process, passphrase and data folder salt.
var DefaultKDF = KDFParams{Time: 3, Memory: 64 << 10, Threads: 4}

// Bounds on the parameters a store may record, so that a damaged or
// hostile file cannot make an open take long or most of a small machine's
// memory: 16 times the default's memory and passes at most.
const (
	maxKDFTime   = 16
	maxKDFMemory = 1 << 20 // KiB: 1 GiB
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
	// ErrOtherNamespace refuses an encrypted store bound to another
	// namespace than the one it is opened as: a store file copied between
	// tenants' folders. memgate rekey --from-namespace moves one on purpose.
	ErrOtherNamespace = &memgate.Error{Code: memgate.CodeUnavailable,
		Message: "the store belongs to another namespace; move it with memgate rekey --namespace and --from-namespace"}
	// ErrRecordMissing refuses an encrypted store that holds data but
	// lost its KDF record, key check or schema record: creating them anew
	// would make every memory unreadable for good.
	ErrRecordMissing = &memgate.Error{Code: memgate.CodeUnavailable,
		Message: "the store's encryption record is missing; restore it from a backup"}
	// ErrTampered is in the chain of the damaged-store error a read returns when a
	// sealed value fails its authentication: the file was damaged or altered.
	ErrTampered = errors.New("storage: a sealed value failed authentication")
	// errMisplaced is a record that authenticates but is not the one its
	// reference named (another memory's, or a sequence that moved back).
	errMisplaced = fmt.Errorf("%w: a record is not the one its key names", ErrTampered)
)

// Encryption seals the stores opened with it under keys derived from one
// passphrase. One value serves every store of a process, concurrently: it
// derives the Argon2id master key once per salt and parameters, and keeps
// each store's keys by KDF record, so that opening a store (again, after
// the pool closed it) costs no Argon2id run. It never shows the passphrase
// when printed or logged.
type Encryption struct {
	// KDF is the cost for stores created (or rekeyed) with it; the zero
	// value means DefaultKDF. Existing stores keep their own.
	KDF KDFParams

	passphrase []byte
	saltFile   string

	mu      sync.Mutex
	salt    []byte                // the Argon2id salt of new stores
	masters map[string]*masterKey // by parameters and salt
	keys    map[string]*encSealer // by KDF record
}

// masterKey is one Argon2id derivation, run once however many stores wait.
type masterKey struct {
	once sync.Once
	key  []byte
}

// NewEncryption returns the encryption of passphrase, which must not be
// empty.
func NewEncryption(passphrase string) (*Encryption, error) {
	if passphrase == "" {
		return nil, memgate.Invalid("passphrase", "the passphrase is empty")
	}
	return &Encryption{passphrase: []byte(passphrase)}, nil
}

// UseSaltFile makes the stores created from now on take their Argon2id
// salt from the file at path (the data folder's), which is created with a
// random salt the first time one is needed. Without it, the salt is random
// per Encryption. The salt is recorded in each store, so a store opens
// without the file, and in another data folder: the file only lets every
// store of a folder share one derivation across processes.
func (e *Encryption) UseSaltFile(path string) {
	e.mu.Lock()
	e.saltFile = path
	e.mu.Unlock()
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
//	byte    format (kdfLegacy or kdfFormat)
//	byte    aeadXChaCha20Poly1305
//	byte    kdfArgon2id
//	uint32  time, uint32 memory (KiB), byte threads (big-endian)
//	byte    salt length, then the Argon2id salt
//	format 2 only: byte store salt length, then the store's HKDF salt
const (
	kdfLegacy             = 1
	kdfFormat             = 2
	aeadXChaCha20Poly1305 = 1
	kdfArgon2id           = 1
)

// kdfRecord is a decoded KDF record.
type kdfRecord struct {
	format    byte
	params    KDFParams
	salt      []byte // Argon2id's
	storeSalt []byte // HKDF's; format 2
}

func encodeKDF(r kdfRecord) []byte {
	b := []byte{r.format, aeadXChaCha20Poly1305, kdfArgon2id}
	b = binary.BigEndian.AppendUint32(b, r.params.Time)
	b = binary.BigEndian.AppendUint32(b, r.params.Memory)
	b = append(b, r.params.Threads, byte(len(r.salt)))
	b = append(b, r.salt...)
	if r.format == kdfLegacy {
		return b
	}
	b = append(b, byte(len(r.storeSalt)))
	return append(b, r.storeSalt...)
}

var errBadKDF = &memgate.Error{Code: memgate.CodeUnavailable,
	Message: "the store's encryption parameters are damaged or from a newer memgate"}

func decodeKDF(b []byte) (kdfRecord, error) {
	if len(b) < 14 || (b[0] != kdfLegacy && b[0] != kdfFormat) || b[1] != aeadXChaCha20Poly1305 || b[2] != kdfArgon2id {
		return kdfRecord{}, errBadKDF
	}
	r := kdfRecord{format: b[0],
		params: KDFParams{Time: binary.BigEndian.Uint32(b[3:]), Memory: binary.BigEndian.Uint32(b[7:]), Threads: b[11]}}
	n, rest := int(b[12]), b[13:]
	if n < saltSize || n > len(rest) || !r.params.valid() {
		return kdfRecord{}, errBadKDF
	}
	r.salt, rest = rest[:n], rest[n:]
	if r.format == kdfFormat {
		if len(rest) < 1 {
			return kdfRecord{}, errBadKDF
		}
		n, rest = int(rest[0]), rest[1:]
		if n < saltSize || n > len(rest) {
			return kdfRecord{}, errBadKDF
		}
		r.storeSalt, rest = rest[:n], rest[n:]
	}
	if len(rest) != 0 {
		return kdfRecord{}, errBadKDF
	}
	return r, nil
}

// kdfSlots bounds the derivations that run at once: each takes the KDF's
// memory, and a pool may open many stores together.
var kdfSlots = make(chan struct{}, 2)

// maxCachedKeys bounds the keys an Encryption keeps; past it, it starts over.
const maxCachedKeys = 4096

// master returns the Argon2id key of the passphrase under salt and p,
// deriving it once.
func (e *Encryption) master(p KDFParams, salt []byte) []byte {
	id := string(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32([]byte{p.Threads}, p.Time), p.Memory)) + string(salt)
	e.mu.Lock()
	m := e.masters[id]
	if m == nil {
		if e.masters == nil || len(e.masters) >= maxCachedKeys {
			e.masters = map[string]*masterKey{}
		}
		m = &masterKey{}
		e.masters[id] = m
	}
	e.mu.Unlock()
	m.once.Do(func() { m.key = e.argon2(p, salt) })
	return m.key
}

// argonRuns counts derivations, for tests.
var argonRuns atomic.Int64

// argon2 derives a master key, in one of kdfSlots.
func (e *Encryption) argon2(p KDFParams, salt []byte) []byte {
	kdfSlots <- struct{}{}
	defer func() { <-kdfSlots }()
	argonRuns.Add(1)
	return argon2.IDKey(e.passphrase, salt, p.Time, p.Memory, p.Threads, 32)
}

// sealer returns the sealer of the store whose KDF record is rec.
func (e *Encryption) sealer(rec []byte) (*encSealer, error) {
	e.mu.Lock()
	s := e.keys[string(rec)]
	e.mu.Unlock()
	if s != nil {
		return s, nil
	}
	r, err := decodeKDF(rec)
	if err != nil {
		return nil, err
	}
	if r.format == kdfLegacy {
		// One derivation per store: its master key is its own.
		master := e.argon2(r.params, r.salt)
		s, err = newEncSealer(master, nil)
		clear(master)
	} else {
		s, err = newEncSealer(e.master(r.params, r.salt), r.storeSalt)
	}
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

// folderSalt returns the Argon2id salt of new stores: the salt file's,
// created if need be, or one random salt for this Encryption.
func (e *Encryption) folderSalt() ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.salt != nil {
		return e.salt, nil
	}
	if e.saltFile == "" {
		e.salt = make([]byte, saltSize)
		rand.Read(e.salt)
		return e.salt, nil
	}
	salt, err := loadSaltFile(e.saltFile)
	if err != nil {
		return nil, err
	}
	e.salt = salt
	return salt, nil
}

// The salt file holds saltMagic and the salt, nothing else.
const saltMagic = "memgate kdf salt 1\n"

// loadSaltFile reads the salt file at path, or creates it. Two processes
// creating it at once agree: each writes its own file beside it and links
// it into place, and the one that finds it there already reads that.
func loadSaltFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		salt := make([]byte, saltSize)
		rand.Read(salt)
		tmp, err := os.CreateTemp(filepath.Dir(path), ".kdf-salt-*")
		if err != nil {
			return nil, err
		}
		defer os.Remove(tmp.Name())
		_, err = tmp.Write(append([]byte(saltMagic), salt...))
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		if err := os.Link(tmp.Name(), path); err == nil {
			return salt, syncDir(filepath.Dir(path))
		} else if !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	if len(b) != len(saltMagic)+saltSize || string(b[:len(saltMagic)]) != saltMagic {
		return nil, errors.New("storage: the data folder's salt file is damaged")
	}
	return b[len(saltMagic):], nil
}

// create makes the KDF record of a new store bound to binding, with a
// fresh store salt, and its sealer and sealed key check.
func (e *Encryption) create(binding string) (rec, check []byte, s *encSealer, err error) {
	p := e.params()
	if !p.valid() {
		return nil, nil, nil, memgate.Invalid("kdf", "the key derivation parameters are out of range")
	}
	salt, err := e.folderSalt()
	if err != nil {
		return nil, nil, nil, memgate.Internal("storage.Open", err)
	}
	storeSalt := make([]byte, saltSize)
	rand.Read(storeSalt)
	rec = encodeKDF(kdfRecord{format: kdfFormat, params: p, salt: salt, storeSalt: storeSalt})
	if s, err = e.sealer(rec); err != nil {
		return nil, nil, nil, err
	}
	return rec, s.keyCheck(binding), s, nil
}

// keyCheck returns the key check of a format 2 store bound to binding.
func (s *encSealer) keyCheck(binding string) []byte {
	plain := append(append(bytes.Clone(keyCheckText), 0), binding...)
	return s.seal(bucketMeta, metaKeyCheck, plain)
}

// open returns the sealer of a store with KDF record rec and key check
// check, opened as binding: ErrWrongPassphrase when the passphrase is not
// the store's, ErrOtherNamespace when the store is bound to another.
// A store bound to nothing (format 1, or created without a binding) opens
// as any.
func (e *Encryption) open(rec, check []byte, binding string) (*encSealer, error) {
	s, err := e.sealer(rec)
	if err != nil {
		return nil, err
	}
	plain, err := s.open(bucketMeta, metaKeyCheck, check)
	if err != nil || !bytes.HasPrefix(plain, keyCheckText) {
		return nil, ErrWrongPassphrase
	}
	rest := plain[len(keyCheckText):]
	switch {
	case !s.counters && len(rest) == 0:
		return s, nil
	case !s.counters || len(rest) == 0 || rest[0] != 0:
		return nil, ErrWrongPassphrase
	case len(rest) > 1 && string(rest[1:]) != binding:
		return nil, ErrOtherNamespace
	}
	return s, nil
}

// Sealing is what opens a store, as its open found it: its KDF record and
// sealed key check (none for a plain store) and the namespace it is bound
// to. None of it is secret: the salts, the KDF's parameters and a value
// sealed under the key. A process that cannot open the store (another
// holds it) checks its own settings against it (Opens), so that a command
// that goes through the holder is refused as it would be on the file.
type Sealing struct {
	KDF, Check []byte
	Binding    string
	known      bool // false: the store was not opened from a file of its own (a replica)
}

// Sealing returns what opens s.
func (s *Store) Sealing() Sealing { return s.sealing }

// Known reports whether the sealing was found by an open of a store file.
func (sl Sealing) Known() bool { return sl.known }

// SealingOf is the sealing a holder reports, as known.
func SealingOf(kdf, check []byte, binding string) Sealing {
	return Sealing{KDF: kdf, Check: check, Binding: binding, known: true}
}

// Opens reports whether enc (nil: without --encrypt) opens a store of
// this sealing: nil, or the error its open would fail with.
func (sl Sealing) Opens(enc *Encryption) error {
	switch {
	case !sl.known:
		return nil
	case sl.KDF != nil && enc == nil:
		return ErrEncrypted
	case sl.KDF == nil && enc != nil:
		return ErrNotEncrypted
	case sl.KDF != nil:
		_, err := enc.open(sl.KDF, sl.Check, sl.Binding)
		return err
	}
	return nil
}

// encSealer seals values with XChaCha20-Poly1305 (random 192-bit nonces:
// no limit on how many values one key seals) and hashes content-derived
// keys with HMAC-SHA-256. Both keys come from the master key by HKDF. It is
// safe for concurrent use.
type encSealer struct {
	aead cipher.AEAD
	macs sync.Pool // of hash.Hash, keyed
	// counters is set for format 2 stores: the meta counters and the docs
	// sequence are sealed, and must be there.
	counters bool
}

const (
	nonceSize   = chacha20poly1305.NonceSizeX
	sealedExtra = nonceSize + chacha20poly1305.Overhead
	keyHashSize = 16
)

// newEncSealer makes the sealer of master: a format 1 store's own master
// key with storeSalt nil, or the shared master key and a format 2 store's
// salt.
func newEncSealer(master, storeSalt []byte) (*encSealer, error) {
	sealInfo, keyInfo := "memgate seal", "memgate key"
	if storeSalt != nil {
		sealInfo, keyInfo = "memgate store seal 2", "memgate store key 2"
	}
	sealKey, err := hkdf.Key(sha256.New, master, storeSalt, sealInfo, chacha20poly1305.KeySize)
	if err != nil {
		return nil, err
	}
	macKey, err := hkdf.Key(sha256.New, master, storeSalt, keyInfo, 32)
	if err != nil {
		return nil, err
	}
	aead, err := chacha20poly1305.NewX(sealKey)
	clear(sealKey)
	if err != nil {
		return nil, err
	}
	s := &encSealer{aead: aead, counters: storeSalt != nil}
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

// sealU64 is a meta counter's value on disk: sealed in a format 2 store,
// eight bytes otherwise.
func (s *encSealer) sealU64(key []byte, v uint64) []byte {
	if !s.counters {
		return u64(v)
	}
	return s.seal(bucketMeta, key, u64(v))
}

// openU64 reads a meta counter. In a format 2 store every counter is
// written when the store is created, so a missing one was removed.
func (s *encSealer) openU64(key, raw []byte) (uint64, error) {
	if !s.counters {
		return plainSealer{}.openU64(key, raw)
	}
	if raw == nil {
		return 0, ErrTampered
	}
	plain, err := s.open(bucketMeta, key, raw)
	if err != nil || len(plain) != 8 {
		return 0, ErrTampered
	}
	return binary.BigEndian.Uint64(plain), nil
}

// recordSeq seals the docs sequence into meta, in a store that seals its
// counters (checkSeq checks it at open).
func (s *Store) recordSeq(meta *bolt.Bucket, seq uint64) error {
	if es, ok := s.seal.(*encSealer); ok && es.counters {
		return meta.Put(metaSeq, es.sealU64(metaSeq, seq))
	}
	return nil
}
