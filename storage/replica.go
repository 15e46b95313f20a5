package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
)

// Replicas. A store opened with Options.Log is one replica of a namespace
// that several processes serve: the log (PostgreSQL's, say) orders every
// write of the namespace, and each replica's file is a cache of the log,
// rebuilt from it whenever it cannot be trusted.
//
// A write takes the log's lock for the namespace (no other replica writes
// meanwhile), applies the entries this replica lacks, runs itself on the
// store as it would without a log, and appends itself to the log — what
// was asked, the clock it ran at and the seed of the ids it made — then
// commits the log. So every check that can refuse a write (a version, a
// quota, a duplicate) is made on the whole namespace, across replicas, and
// every replica applying the same entries in the same order with the same
// clock and ids reaches the same memories, versions and index: BM25 scores
// are the same everywhere by construction. A refused write changes nothing
// and is not logged. A write whose log append or commit fails after it
// changed the file leaves a replica that no longer matches the log: the
// store is marked damaged, and its pool makes a new file from the log.
//
// A read applies what the log holds beyond the replica first, asking the
// log for its head at most every Options.Staleness/2: a write acknowledged
// anywhere is seen by a read anywhere within Staleness.
//
// Entries replay as the write that made them did, whatever this replica's
// own settings: the limits and quotas a write passed are not checked again,
// and a forget keeps its memory in the trash if the trash was on where it
// ran. Under encryption the entries are sealed with a key of the
// namespace's own (its KDF record is the log's), bound to their place in
// the log: the database holds no text, tag, id or term in the clear.

// Log is the shared order of one namespace's writes.
type Log interface {
	// Head returns the log's state: Epoch 0 when the namespace has none.
	Head(ctx context.Context) (LogState, error)
	// Read calls fn with each entry after seq, in order.
	Read(ctx context.Context, after uint64, fn func(seq uint64, entry []byte) error) error
	// Begin locks the namespace's log for one write, creating it (with a
	// new epoch and the key record key returns) when there is none: no
	// other Begin of it returns until this one commits or rolls back.
	Begin(ctx context.Context, key func() ([]byte, error)) (LogWrite, error)
	// Snapshot returns the namespace's latest snapshot: a replica's file
	// holding the entries up to seq (0 and nil when there is none).
	Snapshot(ctx context.Context) (seq uint64, file []byte, err error)
	// Compact keeps file as the namespace's snapshot at seq of epoch,
	// unless it has a later one (or another epoch), and drops the entries
	// that the snapshot it replaces held: a replica less than one snapshot
	// behind still catches up from the entries.
	Compact(ctx context.Context, epoch int64, seq uint64, file []byte) error
}

// LogWrite is a locked log.
type LogWrite interface {
	// State is the log's state when it was locked.
	State() LogState
	Read(ctx context.Context, after uint64, fn func(seq uint64, entry []byte) error) error
	// Append adds entry at seq, the head's next, and makes chain the
	// head's chain.
	Append(ctx context.Context, seq uint64, entry, chain []byte) error
	// Commit ends the write, keeping what was appended; Rollback ends it
	// without (and does nothing after Commit).
	Commit(ctx context.Context) error
	Rollback()
}

// LogState is a log's head: its epoch (a new one each time the namespace
// is created again after an erase), the sequence of its last entry, and
// the key record of its entries (nil for plain ones).
type LogState struct {
	Epoch    int64
	Seq      uint64
	Key      []byte
	Snapshot uint64 // the sequence of the latest snapshot, 0 for none
	// Chain is the log's history to its head: the SHA-256 of the chain
	// before each entry and the entry (see chainOf). A replica whose own
	// differs at the same sequence holds another history (a database
	// restored to an earlier time and grown again since).
	Chain []byte
}

// chainOf is the chain after entry, whose log's chain was before.
func chainOf(before, entry []byte) []byte {
	h := sha256.New()
	h.Write(before)
	h.Write(entry)
	return h.Sum(nil)
}

// DefaultStaleness is the default of Options.Staleness (--replica-staleness).
const DefaultStaleness = time.Second

// logTimeout bounds a write from its start on the store to its commit in
// the log, once the call that asked for it no longer can (see replicate).
const logTimeout = 30 * time.Second

// DefaultCompactEvery is the default of Options.CompactEvery: entries
// between snapshots (or fewer, holding compactBytes).
const DefaultCompactEvery = 10000

// compactBytes is how many bytes of entries a replica logs before it sends
// a snapshot however few they are: a large import replays slower than its
// replica's file travels.
var compactBytes int64 = 16 << 20

// maxSnapshotBytes bounds a snapshot (PostgreSQL's bytea holds 1 GiB): a
// larger replica is not snapshotted, and its log keeps every entry.
var maxSnapshotBytes int64 = 1 << 29

// ErrStaleReplica is Open's error for a replica's file that was not closed
// cleanly (or came from elsewhere): its place in the log is unknown, so it
// is of no use. Its owner removes it and opens a new one.
var ErrStaleReplica = errors.New("storage: the replica's file does not record its place in the log")

// metaReplica records, in a replica's file closed cleanly, the epoch and
// sequence of the last entry it holds; Open takes it out again, so that a
// file left by a crash records nothing.
var metaReplica = []byte("replica")

// bucketLog is the sealer's place for log entries (never a bucket).
var bucketLog = []byte("log")

// replica is a store's side of its log.
type replica struct {
	log       Log
	staleness time.Duration
	checked   atomic.Int64 // when the last look at the log's head started, unix ns

	mu         ctxMutex // one write or catch-up at a time, in log order
	epoch      int64
	applied    uint64
	chain      []byte     // the log's chain after applied
	seal       *encSealer // the entries' sealer; nil for plain entries or until known
	snapshot   uint64     // the latest snapshot's sequence that this replica knows of
	tried      uint64     // the sequence of this replica's last snapshot, sent or not
	written    int64      // bytes of the entries this replica logged since it last tried
	compacting bool       // a snapshot of this replica is on its way to the log
	every      uint64     // entries between snapshots

	stop    context.CancelFunc // ends the snapshot on its way
	sending sync.WaitGroup

	down   atomic.Bool // the log could not be reached, and has not been since
	badLog atomic.Bool // an entry of the log could not be applied

	at  atomic.Int64   // the clock of the entry being applied, unix ns; 0 for none
	ids *mrand.ChaCha8 // the ids of the entry being applied
	cur *entry         // the entry being applied, nil for none
}

// Kinds of entry.
const (
	opWrite      = "write"
	opDelete     = "delete"
	opPropose    = "propose"
	opApprove    = "approve"
	opReject     = "reject"
	opRestore    = "restore"
	opEmptyTrash = "empty_trash"
	opImport     = "import"
	opSweep      = "sweep"
)

// entry is one logged write: what was asked, and what made it run as it
// did.
type entry struct {
	Kind       string         `json:"k"`
	At         int64          `json:"t"`
	Seed       []byte         `json:"s"`
	Write      *memgate.Write `json:"w,omitempty"`
	ID         string         `json:"id,omitempty"`
	IfVersion  *int64         `json:"v,omitempty"`
	Trash      bool           `json:"trash,omitempty"` // a forget kept its memory in the trash
	Body       []byte         `json:"b,omitempty"`     // an import's lines
	OnConflict string         `json:"c,omitempty"`
	Retention  int64          `json:"r,omitempty"` // a sweep's trash retention, ns; -1 keeps the trash

	replay bool // applied from the log, not asked of this replica
}

// applyingKey marks the context of a write that runs on the store alone:
// an entry being applied (from the log, or under the log's lock).
type applyingKey struct{}

// applying reports whether ctx is an entry's application: a write to run
// on the store as it is, not to replicate.
func applying(ctx context.Context) bool { return ctx.Value(applyingKey{}) != nil }

// replayed returns the entry being applied from the log, whose limits are
// not checked again; nil when none is. Read by a write of that entry, on
// whichever goroutine runs its transaction.
func (s *Store) replayed() *entry {
	if s.repl == nil || s.repl.cur == nil || !s.repl.cur.replay {
		return nil
	}
	return s.repl.cur
}

// maxText is the bound on a memory's text for a write: none for an entry
// replayed from the log, which passed its own.
func (s *Store) maxText() int {
	if s.replayed() != nil {
		return math.MaxInt32
	}
	return s.opts.MaxTextBytes
}

// keepsTrash says whether a forget keeps its memory in the trash: as it
// did where it ran, for an entry replayed from the log.
func (s *Store) keepsTrash() bool {
	if e := s.replayed(); e != nil {
		return e.Trash
	}
	return s.opts.TrashRetention > 0
}

func newReplica(opts Options) *replica {
	st := opts.Staleness
	if st <= 0 {
		st = DefaultStaleness
	}
	every := opts.CompactEvery
	if every <= 0 {
		every = DefaultCompactEvery
	}
	return &replica{log: opts.Log, staleness: st, every: uint64(every), stop: func() {}, mu: newCtxMutex()}
}

// A ctxMutex is a mutex whose LockCtx gives up when its context ends: a
// call waiting behind a write that a stalled database holds is answered
// at its deadline.
type ctxMutex struct{ held chan struct{} }

func newCtxMutex() ctxMutex { return ctxMutex{held: make(chan struct{}, 1)} }

func (m *ctxMutex) Lock()   { m.held <- struct{}{} }
func (m *ctxMutex) Unlock() { <-m.held }

// LockCtx locks m, or returns ctx's error once ctx ends first.
func (m *ctxMutex) LockCtx(ctx context.Context) error {
	select {
	case m.held <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errBusy is the error of a call that gave up waiting for the write
// before it.
func errBusy(op string, err error) error {
	return &memgate.Error{Code: memgate.CodeUnavailable, Op: op, Cause: err,
		Message: "the shared store has not yet confirmed an earlier write of this namespace; retry shortly"}
}

// compact sends the log a snapshot of this replica — a copy of its file,
// recording its place in the log — which takes the place of the entries
// before it. The copy is made at once (one read transaction, to a file
// beside the store's); it travels on its own goroutine. Called with r.mu
// held, after a write.
func (s *Store) compact() {
	const op = "storage.compact"
	r := s.repl
	seq, epoch, chain := r.applied, r.epoch, r.chain
	r.tried, r.written = seq, 0
	file, err := s.snapshotFile(epoch, seq, chain)
	switch {
	case err != nil:
		s.log.Warn("a snapshot of a replica could not be made; the log keeps its entries", "op", op, "error", err)
		return
	case int64(len(file)) > maxSnapshotBytes:
		s.log.Warn("a replica is too large for a snapshot; the log keeps its entries", "op", op, "bytes", len(file))
		return
	}
	// A Close waits a moment for it (closeGrace), then ends it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	r.compacting, r.stop = true, cancel
	r.sending.Go(func() {
		defer cancel()
		err := r.log.Compact(ctx, epoch, seq, file)
		r.mu.Lock()
		r.compacting = false
		if err == nil {
			r.snapshot = max(r.snapshot, seq)
		}
		r.mu.Unlock()
		if err != nil {
			s.log.Warn("a snapshot of a replica could not be kept; the log keeps its entries", "op", op,
				"namespace", s.opts.Binding, "error", err)
		}
	})
}

// closeGrace bounds how long a replica's Close waits for its snapshot on
// the way before it ends it: the next writer sends another.
const closeGrace = 2 * time.Second

// snapshotFile returns a copy of the store's file that records its place
// in the log (epoch, seq).
func (s *Store) snapshotFile(epoch int64, seq uint64, chain []byte) ([]byte, error) {
	f, err := os.CreateTemp(filepath.Dir(s.path), ".memgate-snapshot-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	err = s.readTx("storage.compact", func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(f)
		return err
	})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	db, err := bolt.Open(f.Name(), 0o600, &bolt.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaReplica, append(binary.BigEndian.AppendUint64(u64(uint64(epoch)), seq), chain...))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	file, err := os.ReadFile(f.Name())
	if err != nil {
		return nil, err
	}
	return sealSnapshot(file, epoch, seq), nil
}

// A snapshot in the log is the replica's file and a trailer: its epoch and
// sequence, and the SHA-256 of the three, so that a snapshot damaged (or
// moved between namespaces, or rows) in the database is refused, never
// served. (Under --encrypt the file's values are sealed besides.)
const snapshotTrailer = 8 + 8 + sha256.Size

func sealSnapshot(file []byte, epoch int64, seq uint64) []byte {
	out := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(file, uint64(epoch)), seq)
	sum := sha256.Sum256(out)
	return append(out, sum[:]...)
}

// openSnapshot returns the file of a snapshot found at seq in a log of
// epoch, or ErrBadSnapshot.
func openSnapshot(blob []byte, epoch int64, seq uint64) ([]byte, error) {
	if len(blob) < snapshotTrailer {
		return nil, ErrBadSnapshot
	}
	n := len(blob) - sha256.Size
	sum := sha256.Sum256(blob[:n])
	if !bytes.Equal(sum[:], blob[n:]) || int64(binary.BigEndian.Uint64(blob[n-16:])) != epoch ||
		binary.BigEndian.Uint64(blob[n-8:]) != seq {
		return nil, ErrBadSnapshot
	}
	return blob[:n-16], nil
}

// ErrBadSnapshot: the namespace's snapshot in the log is not the one its
// log names (damaged, or altered there).
var ErrBadSnapshot = errors.New("storage: the namespace's snapshot in the shared store is damaged or altered")

// WriteSnapshot writes the latest snapshot of log, if any, to path (a
// replica's file that is not there yet), whole or not at all, and reports
// whether there was one. A snapshot that is not the one the log names
// fails with ErrBadSnapshot.
func WriteSnapshot(ctx context.Context, log Log, path string) (bool, error) {
	st, err := log.Head(ctx)
	if err != nil || st.Snapshot == 0 {
		return false, err
	}
	seq, blob, err := log.Snapshot(ctx)
	if err != nil {
		return false, err
	}
	if blob == nil || seq < st.Snapshot {
		return false, ErrBadSnapshot
	}
	file, err := openSnapshot(blob, st.Epoch, seq)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".memgate-snapshot-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(file)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	return err == nil, err
}

// now is the store's clock: the entry's while one is applied.
func (r *replica) now(base func() time.Time) func() time.Time {
	return func() time.Time {
		if at := r.at.Load(); at != 0 {
			return time.Unix(0, at)
		}
		return base()
	}
}

// newID is the id of a new memory: a UUIDv7 from the entry's clock and
// seed while one is applied, so every replica makes the same.
func (s *Store) newID() (string, error) {
	r := s.repl
	if r == nil || r.at.Load() == 0 {
		return newID()
	}
	var u [16]byte
	binary.BigEndian.PutUint64(u[:8], uint64(r.at.Load()/int64(time.Millisecond))<<16)
	binary.BigEndian.PutUint64(u[8:], r.ids.Uint64())
	binary.BigEndian.PutUint16(u[6:8], uint16(r.ids.Uint64()))
	u[6] = u[6]&0x0f | 0x70 // version 7
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// replicate runs write, a write this replica was asked for, under the
// log's lock, and logs it as e unless it was refused. changed says, for a
// write that succeeded, whether it changed anything (an empty sweep is not
// logged).
func (s *Store) replicate(ctx context.Context, op string, e *entry, write func(ctx context.Context) error, changed func() bool) error {
	r := s.repl
	if err := r.mu.LockCtx(ctx); err != nil {
		return errBusy(op, err)
	}
	held := true // r.mu and the log's lock are this call's to release (not handed on)
	defer func() {
		if held {
			r.mu.Unlock()
		}
	}()
	if s.damaged.Load() {
		return damagedError(op, nil)
	}
	lw, err := r.log.Begin(ctx, s.newLogKey)
	if err != nil {
		return s.unreachable(op, err)
	}
	s.reached()
	defer func() {
		if held {
			lw.Rollback()
		}
	}()
	if err := s.catchUpLog(ctx, op, lw.State(), lw.Read); err != nil {
		return err
	}
	e.At = time.Now().UnixNano()
	if s.opts.Now != nil {
		e.At = s.opts.Now().UnixNano()
	}
	e.Seed = make([]byte, 32)
	rand.Read(e.Seed)
	before := s.commits.Load()
	// The write runs whole, and is logged, whatever happens to the call
	// meanwhile (a client gone, a deadline): every replica applies it whole.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), logTimeout)
	werr := s.apply(wctx, e, write)
	switch {
	case werr == nil && !changed():
		cancel()
		return nil
	case werr != nil && s.commits.Load() == before:
		cancel()
		return werr // refused, or failed before any change
	case werr != nil && !refusedAgain(werr):
		// Cut short by this machine (a full disk, say) after a part of it
		// was written: it is not logged, so it did not happen anywhere,
		// and this replica, which holds its part, is made again.
		cancel()
		s.damaged.Store(true)
		s.log.Error("a write failed half done; this replica is made again from the log", "op", op,
			"namespace", s.opts.Binding, "error", werr)
		return werr
	}
	// The entry goes to the log in a goroutine of its own, so that a call
	// that ends first is answered then, not when a stalled database
	// answers: the goroutine then releases the log's lock and r.mu itself,
	// and the next write of this replica waits for it.
	done := make(chan error, 1)
	go func() {
		defer cancel()
		done <- s.logEntry(wctx, op, lw, e, werr)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done: // done as well
			return err
		default:
		}
		held = false
		go func() {
			<-done
			lw.Rollback()
			r.mu.Unlock()
		}()
		return &memgate.Error{Code: memgate.CodeUnavailable, Op: op, Cause: ctx.Err(),
			Message: "the shared store has not confirmed the write yet: it is done whole or not at all; read it back to know"}
	}
}

// logEntry appends e, whose write this replica has made (werr: refused
// again, or nil), to the log and commits, with r.mu and the log's lock
// held; a replica whose entry could not be logged is made again.
func (s *Store) logEntry(ctx context.Context, op string, lw LogWrite, e *entry, werr error) error {
	r := s.repl
	plain, err := json.Marshal(e)
	if err == nil {
		seq := r.applied + 1
		sealed := r.sealEntry(seq, plain)
		chain := chainOf(r.chain, sealed)
		if err = lw.Append(ctx, seq, sealed, chain); err == nil {
			err = lw.Commit(ctx)
		}
		if err == nil {
			r.applied, r.chain = seq, chain
			r.written += int64(len(plain))
			if !r.compacting && (r.applied >= max(r.snapshot, r.tried)+r.every || r.written >= compactBytes) {
				s.compact()
			}
			return werr
		}
	}
	// The file holds a write the log may not: it is no replica any more.
	s.damaged.Store(true)
	s.log.Error("a write could not be logged; this replica is made again from the log", "op", op,
		"namespace", s.opts.Binding, "error", err)
	return logError(op, err)
}

// apply runs write with e's clock and ids. Called with r.mu held.
func (s *Store) apply(ctx context.Context, e *entry, write func(ctx context.Context) error) error {
	r := s.repl
	r.ids = mrand.NewChaCha8([32]byte(e.Seed))
	r.cur = e
	r.at.Store(e.At)
	defer func() {
		r.at.Store(0)
		r.cur = nil
	}()
	return write(context.WithValue(ctx, applyingKey{}, e))
}

// fresh brings the replica up to the log's head when it has not looked at
// it for Staleness/2: a read's first step.
func (s *Store) fresh(ctx context.Context, op string) error {
	r := s.repl
	if r == nil {
		return nil
	}
	if applying(ctx) {
		return nil
	}
	start := time.Now().UnixNano()
	if start-r.checked.Load() < int64(r.staleness/2) {
		return nil
	}
	st, err := r.log.Head(ctx)
	if err != nil {
		return s.unreachable(op, err)
	}
	s.reached()
	if err := r.mu.LockCtx(ctx); err != nil {
		return errBusy(op, err)
	}
	defer r.mu.Unlock()
	if st.Epoch != r.epoch || st.Seq < r.applied {
		// A write of this replica may have come between the look and the
		// lock (the namespace's first, say): look again, with none between.
		if st, err = r.log.Head(ctx); err != nil {
			return logError(op, err)
		}
	}
	if err := s.catchUpLog(ctx, op, st, r.log.Read); err != nil {
		return err
	}
	if start > r.checked.Load() {
		r.checked.Store(start)
	}
	return nil
}

// catchUp applies the entries of the log (whose head is st, read with
// read) that the replica lacks. Called with r.mu held.
func (s *Store) catchUpLog(ctx context.Context, op string, st LogState, read func(context.Context, uint64, func(uint64, []byte) error) error) error {
	r := s.repl
	if s.damaged.Load() {
		return damagedError(op, nil)
	}
	if st.Epoch != r.epoch {
		if r.applied != 0 || r.epoch != 0 {
			// Erased (and maybe made anew) since: this file is another
			// namespace's.
			s.damaged.Store(true)
			return &memgate.Error{Code: memgate.CodeUnavailable, Op: op, Cause: ErrStaleReplica,
				Message: "this namespace was erased and made anew on another replica; retry"}
		}
		r.epoch = st.Epoch
	}
	switch {
	case st.Epoch == 0:
	case st.Key == nil && s.opts.Encryption != nil:
		return ErrNotEncrypted
	case r.seal == nil && st.Key != nil:
		if err := s.openLogKey(st.Key); err != nil {
			return err
		}
	}
	if st.Seq < r.applied {
		// The log went back (a database restored to an earlier time): this
		// file holds writes it does not.
		s.damaged.Store(true)
		return &memgate.Error{Code: memgate.CodeUnavailable, Op: op, Cause: ErrStaleReplica,
			Message: "the shared store went back in time (restored?); this replica is made again, retry"}
	}
	if st.Seq == r.applied {
		return s.sameHistory(op, st)
	}
	r.snapshot = max(r.snapshot, st.Snapshot)
	err := read(ctx, r.applied, func(seq uint64, sealed []byte) error {
		if seq != r.applied+1 {
			if r.applied < r.snapshot {
				return errBehindSnapshot
			}
			return fmt.Errorf("%w: entry %d follows %d", ErrDamaged, seq, r.applied)
		}
		plain, err := r.openEntry(seq, sealed)
		if err != nil {
			return err
		}
		chain := chainOf(r.chain, sealed)
		var e entry
		if err := json.Unmarshal(plain, &e); err != nil || len(e.Seed) != 32 || e.At <= 0 {
			return fmt.Errorf("%w: an entry of the log does not decode", ErrDamaged)
		}
		e.replay = true
		// An entry is applied whole whatever happens to the call that
		// brought it (a client gone, a deadline): a write cut short would
		// read as a refusal.
		actx := context.WithoutCancel(ctx)
		if err := s.apply(actx, &e, func(ctx context.Context) error { return s.replay(ctx, &e) }); err != nil && !refusedAgain(err) {
			return err
		}
		r.applied, r.chain = seq, chain
		return cancelled(ctx) // between entries, a cancelled call stops
	})
	if err == nil && r.applied < st.Seq {
		err = fmt.Errorf("%w: the log ends at %d before its head %d", ErrDamaged, r.applied, st.Seq)
	}
	if err == nil && r.applied == st.Seq {
		return s.sameHistory(op, st)
	}
	switch {
	case errors.Is(err, errBehindSnapshot):
		s.damaged.Store(true)
		s.log.Info("a replica fell behind the log's snapshot; it is made again from it", "op", op, "namespace", s.opts.Binding)
		return &memgate.Error{Code: memgate.CodeUnavailable, Op: op, Cause: err,
			Message: "this replica fell behind the shared store and is made again; retry"}
	case err != nil:
		if errors.Is(err, ErrDamaged) || errors.Is(err, ErrTampered) {
			s.damaged.Store(true)
			r.badLog.Store(true)
			s.log.Error("an entry of the log cannot be applied; this replica is made again from the log", "op", op,
				"namespace", s.opts.Binding, "error", err)
		}
		return logError(op, err)
	}
	return nil
}

// ReplicaPlace returns the epoch and sequence of the last entry of its log
// that a replica holds.
func (s *Store) ReplicaPlace() (epoch int64, seq uint64) {
	r := s.repl
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epoch, r.applied
}

// LogDamaged reports whether the store is a replica that found an entry of
// its log that cannot be applied: damage in the log, which a new replica
// meets again.
func (s *Store) LogDamaged() bool { return s.repl != nil && s.repl.badLog.Load() }

// sameHistory checks that the replica, at the log's head st, holds the
// log's history: a replica whose chain differs is made again.
func (s *Store) sameHistory(op string, st LogState) error {
	r := s.repl
	if st.Chain == nil || bytes.Equal(st.Chain, r.chain) {
		return nil
	}
	s.damaged.Store(true)
	s.log.Error("a replica holds another history than its log (a database restored to an earlier time?); it is made again",
		"op", op, "namespace", s.opts.Binding)
	return &memgate.Error{Code: memgate.CodeUnavailable, Op: op, Cause: ErrStaleReplica,
		Message: "the shared store went back in time (restored?); this replica is made again, retry"}
}

// errBehindSnapshot: the entries a replica lacks were dropped when a
// snapshot took their place; the replica is made again from the snapshot.
var errBehindSnapshot = errors.New("storage: the replica is behind the log's snapshot")

// replay runs entry e as the write it logs.
func (s *Store) replay(ctx context.Context, e *entry) error {
	var err error
	switch e.Kind {
	case opWrite:
		if e.Write == nil {
			return errBadEntry
		}
		_, err = s.Write(ctx, *e.Write)
	case opDelete:
		err = s.Delete(ctx, e.ID, e.IfVersion)
	case opPropose:
		if e.Write == nil {
			return errBadEntry
		}
		_, err = s.Propose(ctx, *e.Write)
	case opApprove:
		_, err = s.Approve(ctx, e.ID)
	case opReject:
		err = s.Reject(ctx, e.ID)
	case opRestore:
		_, err = s.Restore(ctx, e.ID)
	case opEmptyTrash:
		_, err = s.EmptyTrash(ctx)
	case opImport:
		_, err = s.Import(ctx, bytes.NewReader(e.Body), e.OnConflict)
	case opSweep:
		_, _, err = s.Sweep(ctx, time.Duration(e.Retention))
	default:
		return errBadEntry
	}
	return err
}

// refusedAgain reports whether err, from an entry applied from the log, is
// the entry's own refusal, which it met where it ran too (and so changed
// nothing there either): any other failure (the disk, a cancelled call)
// leaves the entry to apply again.
func refusedAgain(err error) bool {
	switch memgate.ErrorCode(err) {
	case memgate.CodeInvalidArgument, memgate.CodeNotFound, memgate.CodeVersionConflict,
		memgate.CodeTooLarge, memgate.CodeSecretDetected, memgate.CodeQuotaExceeded:
		return true
	}
	return false
}

var errBadEntry = fmt.Errorf("%w: an entry of the log names no write memgate knows", ErrDamaged)

// logError is the error of a call that the log failed: unavailable, to be
// retried.
func logError(op string, err error) error {
	var me *memgate.Error
	if errors.As(err, &me) {
		return err
	}
	if errors.Is(err, ErrDamaged) || errors.Is(err, ErrTampered) {
		return &memgate.Error{Code: memgate.CodeUnavailable, Op: op, Cause: err,
			Message: "this namespace's log in the shared store holds an entry that cannot be applied (damaged or altered there); see the server's log"}
	}
	return &memgate.Error{Code: memgate.CodeUnavailable, Op: op, Cause: err,
		Message: "the shared store cannot be reached; retry shortly"}
}

// unreachable logs, once until it is reached again, that the log cannot
// be reached, and returns the call's error.
func (s *Store) unreachable(op string, err error) error {
	if s.repl.down.CompareAndSwap(false, true) {
		s.log.Warn("the shared store cannot be reached", "op", op, "namespace", s.opts.Binding, "error", err)
	}
	return logError(op, err)
}

// reached logs that the log is reached again, after it could not be.
func (s *Store) reached() {
	if s.repl.down.CompareAndSwap(true, false) {
		s.log.Info("the shared store is reached again", "op", "storage.replica", "namespace", s.opts.Binding)
	}
}

// newLogKey makes the key record of a new namespace's log: the KDF record
// and key check of its entries' sealer, nil for a plain store. The sealer
// is taken from the log's state (catchUpLog): another replica may have
// made the namespace first.
func (s *Store) newLogKey() ([]byte, error) {
	enc := s.opts.Encryption
	if enc == nil {
		return nil, nil
	}
	rec, check, _, err := enc.create(s.opts.Binding)
	if err != nil {
		return nil, err
	}
	out := binary.AppendUvarint(nil, uint64(len(rec)))
	return append(append(out, rec...), check...), nil
}

// openLogKey sets the sealer of the log's entries from its key record.
func (s *Store) openLogKey(key []byte) error {
	enc := s.opts.Encryption
	if enc == nil {
		return ErrEncrypted
	}
	n, k := binary.Uvarint(key)
	if k <= 0 || n > uint64(len(key)-k) {
		return fmt.Errorf("%w: the log's key record does not decode", ErrDamaged)
	}
	sealer, err := enc.open(key[k:k+int(n)], key[k+int(n):], s.opts.Binding)
	if err != nil {
		return err
	}
	s.repl.seal = sealer
	return nil
}

func (r *replica) sealEntry(seq uint64, plain []byte) []byte {
	if r.seal == nil {
		return plain
	}
	return r.seal.seal(bucketLog, u64(seq), plain)
}

func (r *replica) openEntry(seq uint64, sealed []byte) ([]byte, error) {
	if r.seal == nil {
		return sealed, nil
	}
	return r.seal.open(bucketLog, u64(seq), sealed)
}

// openReplica reads, and takes out, the place in the log that a replica's
// file closed cleanly recorded. A new file is at the log's start; a file
// with memories and no record is ErrStaleReplica.
func (s *Store) openReplica() error {
	r := s.repl
	return s.writeTx("storage.Open", func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		v := meta.Get(metaReplica)
		if v == nil {
			if !storeEmpty(tx) {
				return ErrStaleReplica
			}
			return nil
		}
		if len(v) != 16 && len(v) != 16+sha256.Size {
			return ErrStaleReplica
		}
		r.epoch = int64(binary.BigEndian.Uint64(v))
		r.applied = binary.BigEndian.Uint64(v[8:])
		if len(v) > 16 {
			r.chain = bytes.Clone(v[16:])
		}
		return meta.Delete(metaReplica)
	})
}

// closeReplica records the replica's place in the log in its file, with
// the file synced to disk, so that the next Open goes on from there.
func (s *Store) closeReplica() {
	r := s.repl
	done := make(chan struct{})
	go func() { r.sending.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeGrace):
		r.mu.Lock()
		r.stop()
		r.mu.Unlock()
		<-done
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.damaged.Load() || s.db.IsReadOnly() {
		return
	}
	v := append(binary.BigEndian.AppendUint64(u64(uint64(r.epoch)), r.applied), r.chain...)
	s.db.NoSync = false
	err := s.writeTx("storage.Close", func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaReplica, v)
	})
	if err != nil {
		s.log.Warn("a replica's place in the log could not be recorded; its file is rebuilt at its next open",
			"op", "storage.Close", "error", err)
	}
}

// storeEmpty reports whether tx's store holds no memory, candidate or
// trash: nothing a log could have put there.
func storeEmpty(tx *bolt.Tx) bool {
	for _, name := range [][]byte{bucketDocs, bucketCands, bucketTrash} {
		if b := tx.Bucket(name); b != nil {
			if k, _ := b.Cursor().First(); k != nil {
				return false
			}
		}
	}
	return true
}

// readBody reads an import's lines whole, for its entry, up to limit bytes.
func readBody(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &memgate.Error{Code: memgate.CodeInvalidArgument, Op: "storage.Import",
			Details: map[string]any{"field": "body"},
			Message: fmt.Sprintf("an import into a shared store holds at most %d bytes; split it", limit)}
	}
	return b, nil
}

// always is the changed of a write that changes something whenever it
// succeeds.
func always() bool { return true }

// maxImportEntry bounds an import into a replica: its lines travel as one
// entry of the log.
var maxImportEntry int64 = 64 << 20
