package tenants

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/storage/storetest"
)

// memShared is a Shared in memory: the logs several pools share in a test.
type memShared struct{ *storetest.MemLogs }

func newMemShared() memShared { return memShared{storetest.NewMemLogs()} }

func (m memShared) Log(ns memgate.Namespace) storage.Log { return m.MemLogs.Log(string(ns)) }

func (m memShared) Exists(_ context.Context, ns memgate.Namespace) (bool, error) {
	return m.MemLogs.Exists(string(ns)), nil
}

func (m memShared) Namespaces(context.Context, string, int) ([]memgate.Namespace, error) {
	return nil, errors.New("not in this test")
}

func (m memShared) Erase(_ context.Context, ns memgate.Namespace) error {
	m.MemLogs.Erase(string(ns))
	return nil
}

// A replica whose write could not be logged is closed once its lease
// ends, its file removed, and the next lease makes it again from the log:
// the unlogged write is gone, the logged ones are there.
func TestReplicaThatMissedTheLogIsMadeAgain(t *testing.T) {
	ctx := context.Background()
	sh := newMemShared()
	p := newPool(t, Options{Shared: sh, Store: storage.Options{Staleness: 1}})
	write := func(id string) error {
		s, release, err := p.Lease(ctx, "team")
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		_, err = s.Write(ctx, memgate.Write{ID: id, Text: "memory " + id})
		return err
	}
	if err := write("a"); err != nil {
		t.Fatal(err)
	}
	sh.FailNextAppend()
	if err := write("b"); memgate.ErrorCode(err) != memgate.CodeUnavailable {
		t.Fatalf("an unlogged write: %v", err)
	}
	if err := write("c"); err != nil {
		t.Fatalf("the write after: %v", err)
	}
	s, release, err := p.Lease(ctx, "team")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, err := s.Get(ctx, "b"); memgate.ErrorCode(err) != memgate.CodeNotFound {
		t.Fatalf("the unlogged write is there: %v", err)
	}
	for _, id := range []string{"a", "c"} {
		if _, err := s.Get(ctx, id); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
}

// downLog is a log whose database, while down is set, cannot be reached.
type downLog struct {
	storage.Log
	down *atomic.Bool
}

var errRefused = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

func (l downLog) Head(ctx context.Context) (storage.LogState, error) {
	if l.down.Load() {
		return storage.LogState{}, errRefused
	}
	return l.Log.Head(ctx)
}

type downShared struct {
	memShared
	down *atomic.Bool
}

func (d downShared) Log(ns memgate.Namespace) storage.Log {
	return downLog{d.memShared.Log(ns), d.down}
}

// A replica made again while the database cannot be reached answers
// unavailable, to be retried, not internal; and opens once it is back.
func TestReplicaMadeAgainWhileTheDatabaseIsDownIsUnavailable(t *testing.T) {
	ctx := context.Background()
	down := new(atomic.Bool)
	sh := downShared{newMemShared(), down}
	p := newPool(t, Options{Shared: sh, Store: storage.Options{Staleness: 1}, RetryOpenAfter: time.Millisecond})
	write := func(id string) error {
		s, release, err := p.Lease(ctx, "team")
		if err != nil {
			return err
		}
		defer release()
		_, err = s.Write(ctx, memgate.Write{ID: id, Text: "memory " + id})
		return err
	}
	if err := write("a"); err != nil {
		t.Fatal(err)
	}
	sh.FailNextAppend() // the replica is made again at its next lease
	if err := write("b"); memgate.ErrorCode(err) != memgate.CodeUnavailable {
		t.Fatalf("an unlogged write: %v", err)
	}
	down.Store(true)
	for range 3 {
		if err := write("c"); memgate.ErrorCode(err) != memgate.CodeUnavailable {
			t.Fatalf("a write while the database is down: %v", err)
		}
		time.Sleep(2 * time.Millisecond) // past RetryOpenAfter
	}
	down.Store(false)
	if err := write("c"); err != nil {
		t.Fatalf("once the database is back: %v", err)
	}
}

// Two pools over one log: what one writes the other reads; a replica's
// file closed cleanly is taken up where it was, one a crash left (no
// record of its place) is made again, and a bbolt data folder's stores are
// never touched.
func TestPoolsShareTheLog(t *testing.T) {
	ctx := context.Background()
	sh := newMemShared()
	dirA := t.TempDir()
	bboltStore := StoreFile(dirA, "team")
	if err := os.MkdirAll(filepath.Dir(bboltStore), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bboltStore, []byte("a bbolt store of before"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := newPool(t, Options{Dir: dirA, Shared: sh, Store: storage.Options{Staleness: 1}})
	b := newPool(t, Options{Shared: sh, Store: storage.Options{Staleness: 1}})
	with := func(p *Pool, fn func(*storage.Store)) {
		t.Helper()
		s, release, err := p.Lease(ctx, "team")
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		fn(s)
	}
	with(a, func(s *storage.Store) {
		if _, err := s.Write(ctx, memgate.Write{ID: "x", Text: "written on a"}); err != nil {
			t.Fatal(err)
		}
	})
	with(b, func(s *storage.Store) {
		if m, err := s.Get(ctx, "x"); err != nil || m.Text != "written on a" {
			t.Fatalf("%v %v", m, err)
		}
	})
	if b, err := os.ReadFile(bboltStore); err != nil || string(b) != "a bbolt store of before" {
		t.Fatalf("the bbolt store was touched: %q %v", b, err)
	}
	if ents, _, err := a.Namespaces(ctx, "", 10); err == nil {
		t.Fatalf("namespaces from the folder, not the log: %v", ents)
	}
	if ok, _ := sh.Exists(ctx, "nobody"); ok || a.exists(ctx, "nobody") {
		t.Fatal("a namespace without a log exists")
	}
	if !a.exists(ctx, "team") {
		t.Fatal("the shared namespace does not exist")
	}

	// Closed cleanly, a replica goes on from its place in the log.
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	served := sh.Served("team")
	a = newPool(t, Options{Dir: dirA, Shared: sh, Store: storage.Options{Staleness: 1}})
	with(a, func(s *storage.Store) {
		if _, err := s.Get(ctx, "x"); err != nil {
			t.Fatal(err)
		}
	})
	if again := sh.Served("team") - served; again != 0 {
		t.Fatalf("the replica closed cleanly read %d entries again", again)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A file that records no place in the log is not trusted: here, a
	// store with a memory the log never had.
	replica := filepath.Join(dirA, ReplicasFolder, "stores", "team", storage.FileName)
	os.Remove(replica)
	st, err := storage.Open(replica, storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write(ctx, memgate.Write{ID: "ghost", Text: "never logged"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	a = newPool(t, Options{Dir: dirA, Shared: sh, Store: storage.Options{Staleness: 1}})
	with(a, func(s *storage.Store) {
		if _, err := s.Get(ctx, "ghost"); memgate.ErrorCode(err) != memgate.CodeNotFound {
			t.Fatalf("a memory of an untrusted file: %v", err)
		}
		if _, err := s.Get(ctx, "x"); err != nil {
			t.Fatal(err)
		}
	})
}

// A log that went back behind a replica (a database restored to an earlier
// time) makes it fail that call and start again from the log.
func TestReplicaAheadOfTheLogIsMadeAgain(t *testing.T) {
	ctx := context.Background()
	sh := newMemShared()
	p := newPool(t, Options{Shared: sh, Store: storage.Options{Staleness: 1}})
	call := func(fn func(*storage.Store) error) error {
		s, release, err := p.Lease(ctx, "team")
		if err != nil {
			return err
		}
		defer release()
		return fn(s)
	}
	for _, id := range []string{"x", "y"} {
		if err := call(func(s *storage.Store) error {
			_, err := s.Write(ctx, memgate.Write{ID: id, Text: "memory " + id})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	sh.Truncate("team", 1)
	get := func(id string) error {
		return call(func(s *storage.Store) error { _, err := s.Get(ctx, id); return err })
	}
	if err := get("x"); memgate.ErrorCode(err) != memgate.CodeUnavailable {
		t.Fatalf("a read of a replica ahead of its log: %v", err)
	}
	if err := get("x"); err != nil {
		t.Fatal(err)
	}
	if err := get("y"); memgate.ErrorCode(err) != memgate.CodeNotFound {
		t.Fatalf("a write the log lost: %v", err)
	}
}

// Every CompactEvery entries a replica sends the log a snapshot, which
// takes the place of the entries before the snapshot it replaces: the log
// stays short, a new replica starts from the snapshot, and one that fell
// behind it is made again from it.
func TestSnapshotsKeepTheLogShort(t *testing.T) {
	ctx := context.Background()
	sh := newMemShared()
	opts := Options{Shared: sh, Store: storage.Options{Staleness: 1, CompactEvery: 10}}
	a, b := newPool(t, opts), newPool(t, opts)
	write := func(p *Pool, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if err := onTeam(p, func(s *storage.Store) error {
				_, err := s.Write(ctx, memgate.Write{ID: fmt.Sprint("m", i), Text: fmt.Sprint("memory number ", i)})
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(a, 0, 5)
	if n, err := countTeam(b); err != nil || n != 5 {
		t.Fatalf("b: %d %v", n, err)
	}
	// Snapshots travel on their own goroutine: write until the log is
	// short, every entry of b's place gone.
	n := 5
	for ; n < 1000 && (n < 45 || sh.Entries("team") > 25); n++ {
		write(a, n, n+1)
	}
	if sh.Entries("team") > 25 {
		t.Fatalf("after %d writes the log holds %d entries", n, sh.Entries("team"))
	}
	// b was at 5, behind every entry the log still has: one call says so,
	// the next is served by a replica made from the snapshot.
	if _, err := countTeam(b); memgate.ErrorCode(err) != memgate.CodeUnavailable {
		t.Fatalf("a replica behind the snapshot: %v", err)
	}
	if got, err := countTeam(b); err != nil || got != int64(n) {
		t.Fatalf("b made again: %d of %d, %v", got, n, err)
	}
	// A new process starts from the snapshot, reading few entries.
	served := sh.Served("team")
	c := newPool(t, opts)
	if got, err := countTeam(c); err != nil || got != int64(n) {
		t.Fatalf("c: %d of %d, %v", got, n, err)
	}
	if read := sh.Served("team") - served; read > 25 { // at most the entries the log keeps
		t.Fatalf("a new replica read %d entries, not the snapshot", read)
	}
	write(c, n, n+5)
	if got, err := countTeam(a); err != nil || got != int64(n+5) {
		t.Fatalf("a: %d of %d, %v", got, n+5, err)
	}
}

// A snapshot damaged in the database is refused, never served: that
// namespace answers unavailable (for a moment, then tries again), and once
// the snapshot is whole again it is served. A replica closed behind the
// snapshot starts from it at its next open, without a failed call.
func TestDamagedSnapshotIsRefused(t *testing.T) {
	ctx := context.Background()
	sh := newMemShared()
	opts := Options{Shared: sh, Store: storage.Options{Staleness: 1, CompactEvery: 10}, RetryOpenAfter: time.Millisecond}
	a, b := newPool(t, opts), newPool(t, opts)
	n := 0
	write := func() {
		t.Helper()
		if err := onTeam(a, func(s *storage.Store) error {
			_, err := s.Write(ctx, memgate.Write{ID: fmt.Sprint("m", n), Text: fmt.Sprint("memory number ", n)})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		n++
	}
	for ; n < 3; write() {
	}
	if got, err := countTeam(b); err != nil || got != 3 {
		t.Fatalf("b: %d %v", got, err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for n < 1000 && sh.Entries("team") > 25 || n < 45 {
		write()
	}
	// b closed at 3, behind the snapshot: it starts from it.
	b = newPool(t, opts)
	if got, err := countTeam(b); err != nil || got != int64(n) {
		t.Fatalf("b after the snapshot: %d of %d, %v", got, n, err)
	}
	var good []byte
	sh.TamperSnapshot("team", func(f []byte) []byte {
		good = bytes.Clone(f)
		f[len(f)/2] ^= 0xff
		return f
	})
	c := newPool(t, opts)
	if _, err := countTeam(c); memgate.ErrorCode(err) != memgate.CodeUnavailable || !strings.Contains(err.Error(), "snapshot") {
		t.Fatalf("a damaged snapshot: %v", err)
	}
	sh.TamperSnapshot("team", func([]byte) []byte { return good })
	time.Sleep(5 * time.Millisecond) // past RetryOpenAfter
	if got, err := countTeam(c); err != nil || got != int64(n) {
		t.Fatalf("the snapshot whole again: %d of %d, %v", got, n, err)
	}
}

// A database restored to an earlier time and grown again since holds
// another history than a replica that saw the lost writes: the replica
// tells by the log's chain, answers one call unavailable, and is made
// again from the log's history.
func TestReplicaOfAnotherHistoryIsMadeAgain(t *testing.T) {
	sh := newMemShared()
	opts := Options{Shared: sh, Store: storage.Options{Staleness: 1}}
	a, b := newPool(t, opts), newPool(t, opts)
	write := func(p *Pool, id string) {
		t.Helper()
		if err := writeTeam(p, id); err != nil {
			t.Fatal(err)
		}
	}
	get := getTeam
	for _, id := range []string{"x1", "x2", "x3", "x4", "x5"} {
		write(a, id)
	}
	if err := get(b, "x5"); err != nil {
		t.Fatal(err)
	}
	sh.Truncate("team", 3)
	c := newPool(t, opts)
	for _, id := range []string{"y4", "y5", "y6", "y7", "y8"} {
		write(c, id)
	}
	if err := get(b, "y6"); memgate.ErrorCode(err) != memgate.CodeUnavailable {
		t.Fatalf("a replica of another history: %v", err)
	}
	if err := get(b, "y6"); err != nil {
		t.Fatalf("made again: %v", err)
	}
	if err := get(b, "x5"); memgate.ErrorCode(err) != memgate.CodeNotFound {
		t.Fatalf("a write of the lost history: %v", err)
	}
}

// onTeam runs fn on a lease of namespace team's store in p.
func onTeam(p *Pool, fn func(*storage.Store) error) error {
	s, release, err := p.Lease(context.Background(), "team")
	if err != nil {
		return err
	}
	defer release()
	return fn(s)
}

// writeTeam writes memory id into team in p.
func writeTeam(p *Pool, id string) error {
	return onTeam(p, func(s *storage.Store) error {
		_, err := s.Write(context.Background(), memgate.Write{ID: id, Text: "memory " + id})
		return err
	})
}

// getTeam gets memory id of team in p.
func getTeam(p *Pool, id string) error {
	return onTeam(p, func(s *storage.Store) error { _, err := s.Get(context.Background(), id); return err })
}

// countTeam counts team's memories in p.
func countTeam(p *Pool) (int64, error) {
	var n int64
	err := onTeam(p, func(s *storage.Store) error {
		st, err := s.Stats(context.Background())
		n = st.Count
		return err
	})
	return n, err
}
