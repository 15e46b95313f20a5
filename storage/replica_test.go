package storage_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/storage/storetest"
)

// replica opens a replica of logs' namespace ns in a file of its own.
func replica(t *testing.T, logs *storetest.MemLogs, ns string, o storage.Options) *storage.Store {
	t.Helper()
	o.NoSync, o.Log, o.Binding, o.Staleness = true, logs.Log(ns), ns, 1
	s, err := storage.Open(filepath.Join(t.TempDir(), "memgate.db"), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The contract holds for three replicas of one namespace taking turns.
func TestContractOfReplicas(t *testing.T) {
	logs := storetest.NewMemLogs()
	var seq int
	storetest.Run(t, func(t *testing.T, o storage.Options) storetest.Store {
		seq++
		ns := fmt.Sprint("ns", seq)
		return storetest.Alternate(replica(t, logs, ns, o), replica(t, logs, ns, o), replica(t, logs, ns, o))
	})
}

// An import into a replica is one entry of the log: at most the bound,
// refused past it, before anything is written.
func TestReplicaImportBound(t *testing.T) {
	defer storage.SetMaxImportEntry(1 << 10)()
	ctx := context.Background()
	logs := storetest.NewMemLogs()
	s := replica(t, logs, "team", storage.Options{})
	line := func(i int) string { return fmt.Sprintf(`{"id":"m%d","text":"%s"}`, i, strings.Repeat("x", 80)) + "\n" }
	var b bytes.Buffer
	for i := 0; b.Len()+len(line(i)) <= 1<<10; i++ {
		b.WriteString(line(i))
	}
	b.WriteString(strings.Repeat(" ", 1<<10-b.Len()))
	if rep, err := s.Import(ctx, bytes.NewReader(b.Bytes()), storage.ImportSkip); err != nil || rep.Imported == 0 {
		t.Fatalf("an import of the bound: %+v %v", rep, err)
	}
	b.WriteString(" ")
	_, err := s.Import(ctx, bytes.NewReader(b.Bytes()), storage.ImportOverwrite)
	if memgate.ErrorCode(err) != memgate.CodeInvalidArgument || !strings.Contains(err.Error(), "split it") {
		t.Fatalf("an import past the bound: %v", err)
	}
}

// A call cancelled while its replica catches up stops between entries,
// never in one: the next call goes on from there, and nothing is skipped.
func TestCancelledCatchUpSkipsNothing(t *testing.T) {
	ctx := context.Background()
	logs := storetest.NewMemLogs()
	a := replica(t, logs, "team", storage.Options{})
	for i := range 200 {
		if _, err := a.Write(ctx, memgate.Write{ID: fmt.Sprint("m", i), Text: fmt.Sprint("memory ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	b := replica(t, logs, "team", storage.Options{})
	cut, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Stats(cut); memgate.ErrorCode(err) != memgate.CodeUnavailable {
		t.Fatalf("a cancelled call: %v", err)
	}
	if st, err := b.Stats(ctx); err != nil || st.Count != 200 {
		t.Fatalf("after a cancelled catch-up: %+v %v", st, err)
	}
}

// An import larger than the bytes a replica logs between snapshots is
// followed by a snapshot however few entries it made: a new replica starts
// from the file, not from the import.
func TestLargeImportIsSnapshotted(t *testing.T) {
	defer storage.SetCompactBytes(4 << 10)()
	ctx := context.Background()
	logs := storetest.NewMemLogs()
	a := replica(t, logs, "team", storage.Options{})
	var b bytes.Buffer
	for i := range 100 {
		fmt.Fprintf(&b, `{"id":"m%d","text":"imported memory number %d"}`+"\n", i, i)
	}
	if _, err := a.Import(ctx, &b, storage.ImportSkip); err != nil {
		t.Fatal(err)
	}
	log := logs.Log("team")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if st, _ := log.Head(ctx); st.Snapshot == 1 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no snapshot after a large import: %+v", st)
		}
	}
	path := filepath.Join(t.TempDir(), "memgate.db")
	if ok, err := storage.WriteSnapshot(ctx, log, path); !ok || err != nil {
		t.Fatal(ok, err)
	}
	served := logs.Served("team")
	c, err := storage.Open(path, storage.Options{NoSync: true, Log: log, Binding: "team", Staleness: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if st, err := c.Stats(ctx); err != nil || st.Count != 100 || logs.Served("team") != served {
		t.Fatalf("a replica from the snapshot: %+v %v, %d entries read", st, err, logs.Served("team")-served)
	}
}

// A replica whose file is past the largest snapshot sends none (the log
// keeps every entry); at the bound it sends one.
func TestSnapshotBound(t *testing.T) {
	defer storage.SetCompactBytes(1)()
	ctx := context.Background()
	for _, c := range []struct {
		bound int64
		sent  bool
	}{{1 << 30, true}, {1 << 10, false}} {
		restore := storage.SetMaxSnapshotBytes(c.bound)
		logs := storetest.NewMemLogs()
		a := replica(t, logs, "team", storage.Options{})
		if _, err := a.Write(ctx, memgate.Write{ID: "m", Text: "a memory"}); err != nil {
			t.Fatal(err)
		}
		a.Close() // waits for a snapshot on its way
		restore()
		if st, _ := logs.Log("team").Head(ctx); (st.Snapshot == 1) != c.sent {
			t.Fatalf("bound %d: snapshot at %d", c.bound, st.Snapshot)
		}
	}
}

// stalledLog is a log whose appends wait, as a database that stopped
// answering does, until it is released.
type stalledLog struct {
	storage.Log
	stall   chan struct{} // closed: appends go on
	waiting chan struct{} // an append waits
}

func (l *stalledLog) Begin(ctx context.Context, key func() ([]byte, error)) (storage.LogWrite, error) {
	w, err := l.Log.Begin(ctx, key)
	if err != nil {
		return nil, err
	}
	return &stalledWrite{LogWrite: w, l: l}, nil
}

type stalledWrite struct {
	storage.LogWrite
	l *stalledLog
}

func (w *stalledWrite) Append(ctx context.Context, seq uint64, entry, chain []byte) error {
	select {
	case w.l.waiting <- struct{}{}:
	default:
	}
	<-w.l.stall
	return w.LogWrite.Append(ctx, seq, entry, chain)
}

// A write whose log stalls answers when its call ends (a deadline, a
// client gone), unavailable, without waiting for the log; the write is
// then logged whole once the log answers, and the replica writes again.
func TestAWriteWhoseLogStallsAnswersAtItsDeadline(t *testing.T) {
	logs := storetest.NewMemLogs()
	log := &stalledLog{Log: logs.Log("team"), stall: make(chan struct{}), waiting: make(chan struct{}, 1)}
	s, err := storage.Open(filepath.Join(t.TempDir(), "memgate.db"), storage.Options{NoSync: true, Log: log, Binding: "team", Staleness: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// putByDeadline writes w with a deadline of 300 ms, and wants it
	// answered unavailable, however long the log stalls.
	putByDeadline := func(w memgate.Write, what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, _, err := s.Put(ctx, w)
			done <- err
		}()
		select {
		case err := <-done:
			if memgate.ErrorCode(err) != memgate.CodeUnavailable {
				t.Fatalf("%s: %v", what, err)
			}
		case <-time.After(20 * time.Second):
			close(log.stall)
			t.Fatalf("%s waited past its deadline", what)
		}
	}
	putByDeadline(memgate.Write{ID: "stalled", Text: "written while the log stalls"}, "a write while the log stalls")
	<-log.waiting
	// A write behind it, while the log still stalls, answers at its own
	// deadline too, and is not written.
	putByDeadline(memgate.Write{ID: "behind", Text: "written behind the stalled one"}, "a write behind the stalled one")
	close(log.stall)
	// Logged whole once the log answers: read back, and written after.
	for began := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if _, err := s.Get(context.Background(), "stalled"); err == nil {
			break
		} else if time.Since(began) > 10*time.Second {
			t.Fatalf("the stalled write is not there once the log answered: %v", err)
		}
	}
	if _, _, err := s.Put(context.Background(), memgate.Write{ID: "after", Text: "written after the stall"}); err != nil {
		t.Fatalf("a write after the stall: %v", err)
	}
	if _, err := s.Get(context.Background(), "behind"); memgate.ErrorCode(err) != memgate.CodeNotFound {
		t.Fatalf("the write that gave up waiting: %v, want not_found", err)
	}
	if n := logs.Entries("team"); n != 2 {
		t.Fatalf("%d entries in the log, want 2", n)
	}
}
