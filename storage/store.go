package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/memgate/memgate"
)

// Bucket names.
var (
	bucketDocs     = []byte("docs")       // document number → sealed record
	bucketIDs      = []byte("ids")        // key(id) → document number
	bucketCreated  = []byte("created")    // created_at, origin → document number
	bucketPostings = []byte("postings")   // key(term), first document → chunk
	bucketMeta     = []byte("meta")       // counters, the schema version, encryption parameters
	bucketCands    = []byte("candidates") // key(id) → a write awaiting approval
	bucketGone     = []byte("gone")       // document number → term keys of a merged memory forgotten since the merge
)

// Keys of the meta bucket.
var (
	metaSchema   = []byte("schema")
	metaCount    = []byte("count")     // live memories
	metaBytes    = []byte("bytes")     // sum of their text bytes
	metaTotalLen = []byte("total_len") // sum of their lengths in terms
	metaMerged   = []byte("merged")    // documents up to this one are in postings
	metaMerging  = []byte("merging")   // set while a merge runs in slices
)

// schemaVersion is the newest layout this code reads and writes. A store
// is at schemaGone while its gone bucket exists, which memgate before it
// cannot read (it would take the postings of a gone memory for damage),
// and back at schemaBase once a merge has emptied it.
const (
	schemaBase    = 1
	schemaGone    = 2
	schemaRecords = 3 // records may hold fields after the metadata (expiry, source): for good
	// schemaFolded (4, reindex.go): the index folds accents; for good.
	schemaVersion = schemaFolded
)

// FileName is the name of a store's file inside its folder.
const FileName = "memgate.db"

// Options tune a Store. The zero value is ready to use.
type Options struct {
	// MaxTextBytes bounds a memory's text (--max-memory-bytes); 0 means
	// memgate.DefaultMaxTextBytes.
	MaxTextBytes int
	// LockTimeout bounds the wait for another process's lock on the file;
	// 0 means 100ms. A store is never opened without one.
	LockTimeout time.Duration
	// NoSync skips fsync on commit. For tests and benchmarks only: a crash
	// can lose acknowledged writes.
	NoSync bool
	// Logger receives internal failures; nil discards them.
	Logger *slog.Logger
	// Now returns the time of a write; nil means time.Now.
	Now func() time.Time
	// MergeEvery is how many documents the in-memory tail of the index
	// gathers before it is merged into the postings on disk; 0 means 4096.
	MergeEvery int
	// MergeBytes bounds the memory (estimated) that the tail holds: past
	// it, the tail is merged whatever its number of documents; 0 means
	// DefaultMergeBytes.
	MergeBytes int64
	// TailBudget, when set, bounds the memory of the tails of every store
	// that shares it (see TailBudget); tenants.Pool gives one to all its
	// stores.
	TailBudget *TailBudget
	// Encryption, when set, encrypts a new store and is needed to open an
	// encrypted one; nil means a plain store. Opening a store in the other
	// mode fails with ErrEncrypted or ErrNotEncrypted.
	Encryption *Encryption
	// Binding names what an encrypted store belongs to: the pool sets the
	// namespace. A store created with a binding opens only with the same
	// one (ErrOtherNamespace otherwise); one created without, or by an
	// older memgate, opens with any.
	Binding string
	// MaxMemories and MaxBytes (text bytes), when above 0, bound what the
	// store holds: a write past one fails with quota_exceeded.
	MaxMemories int64
	MaxBytes    int64
	// TrashRetention, when above 0, makes Delete keep the memory in the
	// trash, where Sweep deletes it once this long has passed.
	TrashRetention time.Duration
	// Embedder, when set, gives memories vectors and searches a semantic
	// ranking fused with BM25 (see vectors.go); nil means lexical recall.
	Embedder Embedder
	// EmbedTimeout bounds each call to the embedder; 0 means 2s.
	EmbedTimeout time.Duration
	// Log, when set, makes the store one replica of a namespace that
	// several processes share, its file a cache of the log (replica.go).
	Log Log
	// Staleness bounds how old a replica's view may be when a read starts
	// (--replica-staleness); 0 means DefaultStaleness.
	Staleness time.Duration
	// CompactEvery is how many entries of the log a replica lets pass
	// between the snapshots it sends it; 0 means DefaultCompactEvery.
	CompactEvery int
}

// Store is one namespace's memories in one bbolt file. It is safe for
// concurrent use. Reads run in parallel; writes go through one committer
// that groups concurrent writers into shared commits.
type Store struct {
	db      *bolt.DB
	path    string
	opts    Options
	seal    sealer
	sealing Sealing // what opens it, as the open found it
	log     *slog.Logger
	now     func() time.Time
	write   *committer
	index   index // the tail of the index and its merge

	closeOnce sync.Once
	closeErr  error

	file    *os.File    // the file bbolt has open, to close under a wedged bbolt
	damaged atomic.Bool // found damaged: every call fails (see guard)

	vecs        vecIndex // the current model's vectors (vectors.go)
	stopVectors func()   // stops the catch-up; nil without an embedder

	repl    *replica      // nil unless the store is a replica (Options.Log)
	commits atomic.Uint64 // writes committed (refusals are not)
}

// Open opens the store in the file at path, creating it (and its folder) if
// needed. A file locked by another process fails within Options.LockTimeout
// with store_locked.
func Open(path string, opts Options) (*Store, error) {
	const op = "storage.Open"
	if opts.MaxTextBytes <= 0 {
		opts.MaxTextBytes = memgate.DefaultMaxTextBytes
	}
	if opts.MergeEvery <= 0 {
		opts.MergeEvery = 4096
	}
	if opts.MergeBytes <= 0 {
		opts.MergeBytes = DefaultMergeBytes
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = 100 * time.Millisecond
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, StoreError(op, err)
	}
	db, file, err := openBolt(path, opts)
	switch {
	case isDamage(err):
		return nil, err
	case errors.Is(err, berrors.ErrTimeout):
		return nil, &memgate.Error{Code: memgate.CodeStoreLocked, Op: op, Cause: err,
			Message: "the store is in use by another memgate process; stop it or use another data folder"}
	case errors.Is(err, fs.ErrPermission):
		return nil, &memgate.Error{Code: memgate.CodeUnavailable, Op: op, Cause: err,
			Message: "the store cannot be opened: permission denied"}
	case err != nil:
		return nil, StoreError(op, err)
	}
	// bbolt grows a file past 16 MiB by 16 MiB at a time; smaller steps keep
	// the file near its data at the price of a few more (rare) grows.
	db.AllocSize = 1 << 20
	s := &Store{db: db, file: file, path: path, opts: opts, seal: plainSealer{}, log: log, now: now}
	if opts.Log != nil {
		s.repl = newReplica(opts)
		s.now = s.repl.now(now)
	}
	if err := s.checkFile(); err != nil {
		s.closeBolt()
		return nil, err
	}
	if err := s.init(); err != nil {
		s.closeBolt()
		return nil, StoreError(op, err)
	}
	if s.repl != nil {
		if err := s.openReplica(); err != nil {
			s.closeBolt()
			return nil, err
		}
	}
	if old, err := s.needsReindex(); err != nil || old {
		if err == nil {
			err = s.reindexFolded()
		}
		if err != nil {
			s.closeBolt()
			return nil, StoreError(op, err)
		}
	}
	s.index.s = s
	if err := s.index.open(); err != nil {
		s.closeBolt()
		return nil, err
	}
	s.write = newCommitter(s, log)
	opts.TailBudget.join(s)
	s.startVectors()
	return s, nil
}

// openFile opens and locks the file at path. A rekey replaces the file
// (rename) while it holds the lock on the old one; a process that waited
// for that lock would then hold a file nobody sees any more, so after
// taking the lock openFile checks that path is still the file it locked,
// and opens it again if not.
func openFile(path string, opts Options, open func(string, int, os.FileMode) (*os.File, error)) (*bolt.DB, error) {
	for attempt := 0; ; attempt++ {
		before, statErr := os.Stat(path)
		if errors.Is(statErr, fs.ErrNotExist) {
			// A new store's file appears whole (see createFile), so a file
			// of no bytes is never one memgate is making: it was cut short.
			if err := createFile(path, opts, open); err != nil {
				return nil, err
			}
			before, statErr = os.Stat(path)
		}
		var size int64
		if statErr == nil {
			size = before.Size()
			if size == 0 {
				return nil, damagedError("storage.Open", errors.New("the store file is empty"))
			}
		}
		bo := &bolt.Options{
			Timeout:      opts.LockTimeout,
			NoSync:       opts.NoSync,
			FreelistType: bolt.FreelistMapType,
			MmapFlags:    mmapFlags(size),
			OpenFile:     open,
		}
		db, err := bolt.Open(path, 0o600, bo)
		if errors.Is(err, syscall.EROFS) && statErr == nil {
			// A store on a read-only filesystem still answers reads; its
			// writes fail with the filesystem's condition (StoreError).
			bo.ReadOnly = true
			db, err = bolt.Open(path, 0o600, bo)
		}
		if err != nil || statErr != nil || attempt == 3 {
			return db, err
		}
		if after, err := os.Stat(path); err == nil && os.SameFile(before, after) {
			return db, nil
		}
		db.Close()
	}
}

// createFile makes the file of a new store at path whole or not at all:
// bbolt writes its first pages to a file of another name, which is then
// linked at path (and left as it is when another process made one there
// meanwhile). A crash or a full disk leaves at most that other file, which
// no store opens.
func createFile(path string, opts Options, open func(string, int, os.FileMode) (*os.File, error)) error {
	tmp := fmt.Sprintf("%s.new-%d-%d", path, os.Getpid(), newFileSeq.Add(1))
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: opts.LockTimeout, NoSync: opts.NoSync,
		FreelistType: bolt.FreelistMapType, OpenFile: open})
	if err == nil {
		err = db.Close()
	}
	if err == nil {
		switch err = os.Link(tmp, path); {
		case errors.Is(err, fs.ErrExist):
			err = nil
		case err != nil: // a filesystem without hard links (FAT, exFAT)
			if _, serr := os.Stat(path); errors.Is(serr, fs.ErrNotExist) {
				err = os.Rename(tmp, path)
			} else {
				err = nil
			}
		}
	}
	os.Remove(tmp)
	return err
}

// newFileSeq tells apart the new files of one process.
var newFileSeq atomic.Int64

// init creates the buckets of a new store and checks the schema of an old
// one, and sets up the store's sealer: plain, or, for an encrypted store,
// one whose keys come from the passphrase and the store's salt. Opening an
// existing store writes nothing, and a file is new only when it holds
// nothing at all: a store with data that lost its schema or its
// encryption records is refused, never laid out again over its data.
func (s *Store) init() error {
	const op = "storage.Open"
	var (
		schema, kdf, check []byte
		empty              = true
	)
	err := s.readTx(op, func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bucketMeta); meta != nil {
			schema = bytes.Clone(meta.Get(metaSchema))
			kdf = bytes.Clone(meta.Get(metaKDF))
			check = bytes.Clone(meta.Get(metaKeyCheck))
		}
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
			if k, _ := b.Cursor().First(); k != nil || b.Sequence() != 0 {
				empty = false
			}
			return nil
		})
	})
	enc := s.opts.Encryption
	switch {
	case err != nil:
		return memgate.Wrap(op, err)
	case empty:
		var (
			sealed *encSealer
			check  []byte
		)
		if enc != nil {
			if kdf, check, sealed, err = enc.create(s.opts.Binding); err != nil {
				return memgate.AsError(op, err)
			}
		}
		err = s.writeTx(op, func(tx *bolt.Tx) error {
			return createBuckets(tx, kdf, check, sealed)
		})
		if err != nil {
			return memgate.Wrap(op, err)
		}
		if sealed != nil {
			s.seal = sealed
		}
		s.sealing = Sealing{KDF: kdf, Check: check, Binding: s.opts.Binding, known: true}
		return nil
	case kdf != nil || check != nil:
		if schema == nil || kdf == nil || check == nil {
			return ErrRecordMissing
		}
	case schema == nil:
		return errSchemaMissing
	}
	switch {
	case len(schema) != 8 || binary.BigEndian.Uint64(schema) > schemaVersion:
		return &memgate.Error{Code: memgate.CodeUnavailable, Op: op,
			Message: "the store was written by a newer memgate; upgrade memgate to open it"}
	case kdf != nil && enc == nil:
		return ErrEncrypted
	case kdf == nil && enc != nil:
		return ErrNotEncrypted
	case kdf != nil:
		sealed, err := enc.open(kdf, check, s.opts.Binding)
		if err != nil {
			return err
		}
		if err := s.readTx(op, func(tx *bolt.Tx) error { return checkSeq(tx, sealed) }); err != nil {
			return memgate.Wrap(op, err)
		}
		s.seal = sealed
	}
	s.sealing = Sealing{KDF: kdf, Check: check, Binding: s.opts.Binding, known: true}
	return nil
}

var errSchemaMissing = &memgate.Error{Code: memgate.CodeUnavailable,
	Message: "the store's schema record is missing; restore it from a backup"}

// checkSeq checks that the docs bucket's sequence, which bbolt keeps in
// plaintext, is the one the store sealed: a sequence moved back would give
// new memories the numbers of existing ones.
func checkSeq(tx *bolt.Tx, s *encSealer) error {
	if !s.counters {
		return nil
	}
	seq, err := s.openU64(metaSeq, tx.Bucket(bucketMeta).Get(metaSeq))
	if err != nil {
		return err
	}
	if seq != tx.Bucket(bucketDocs).Sequence() {
		return errMisplaced
	}
	return nil
}

// createBuckets lays out a new store in tx; with sealed (and its KDF record
// kdf and key check), an encrypted one, whose counters are sealed from the
// start.
func createBuckets(tx *bolt.Tx, kdf, check []byte, sealed *encSealer) error {
	for _, name := range [][]byte{bucketDocs, bucketIDs, bucketCreated, bucketPostings, bucketMeta, bucketCands} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bucketMeta)
	if sealed != nil {
		if err := meta.Put(metaKDF, kdf); err != nil {
			return err
		}
		if err := meta.Put(metaKeyCheck, check); err != nil {
			return err
		}
		if sealed.counters {
			for _, key := range [][]byte{metaCount, metaBytes, metaTotalLen, metaMerged, metaSeq} {
				if err := meta.Put(key, sealed.sealU64(key, 0)); err != nil {
					return err
				}
			}
		}
	}
	return meta.Put(metaSchema, u64(schemaFolded))
}

// Path is the store's file.
func (s *Store) Path() string { return s.path }

// Close waits for pending writes to commit, merges a large index tail so
// the next open has little to rebuild, and closes the file. It is safe to
// call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.repl != nil {
			s.closeReplica()
		}
		if s.stopVectors != nil {
			s.stopVectors()
		}
		s.write.close()
		s.index.close()
		s.closeErr = s.closeBolt()
	})
	return s.closeErr
}

// Sync flushes the file to disk. Commits already do unless NoSync is set.
func (s *Store) Sync() error { return s.db.Sync() }

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

// counter reads the counter key of the meta bucket: plaintext, or sealed
// in a store that seals them (then a changed or missing one is an error).
func (s *Store) counter(meta *bolt.Bucket, key []byte) (uint64, error) {
	return s.seal.openU64(key, meta.Get(key))
}

func (s *Store) setCounter(meta *bolt.Bucket, key []byte, v uint64) error {
	return meta.Put(key, s.seal.sealU64(key, v))
}

// addCounter adds delta to a counter of meta.
func (s *Store) addCounter(meta *bolt.Bucket, key []byte, delta int64) error {
	v, err := s.counter(meta, key)
	if err != nil {
		return err
	}
	return s.setCounter(meta, key, uint64(int64(v)+delta))
}

// diskFull reports whether err is a full disk or an exhausted quota.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// StoreError is the one place a failure of a store's file (or of its
// folder) becomes the error a caller sees. A full disk and a read-only filesystem are conditions of the
// store, not faults of memgate: unavailable, with a message that names the
// condition and says what still works. Anything else is as memgate.Wrap
// makes it. Every write path (the committer, merges, Open, backups) goes
// through it; op names the operation for an error that has none.
func StoreError(op string, err error) error {
	if err == nil || memgate.ErrorCode(err) != memgate.CodeInternal {
		return err
	}
	var msg string
	switch {
	case errors.Is(err, syscall.ENOSPC):
		msg = "the disk is full; writes fail until space is freed (reads still work)"
	case errors.Is(err, syscall.EDQUOT):
		msg = "the disk quota is exhausted; writes fail until space is freed (reads still work)"
	case errors.Is(err, syscall.EROFS), errors.Is(err, berrors.ErrDatabaseReadOnly):
		msg = "the filesystem is read-only; writes fail until it is writable again (reads still work)"
	default:
		return memgate.Wrap(op, err)
	}
	var e *memgate.Error
	if errors.As(err, &e) && e.Op != "" {
		op = e.Op
	}
	return &memgate.Error{Code: memgate.CodeUnavailable, Op: op, Cause: err, Message: msg}
}

var errClosed = &memgate.Error{Code: memgate.CodeUnavailable, Message: "the store is closed"}

// cancelled turns a done context into the error a caller sees.
func cancelled(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return &memgate.Error{Code: memgate.CodeUnavailable, Message: "the request was cancelled before it ran", Cause: err}
	}
	return nil
}

func (s *Store) String() string {
	return fmt.Sprintf("storage.Store(%s)", filepath.Base(filepath.Dir(s.path)))
}
