package replicas

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/bench/corpus"
	"github.com/memgate/memgate/bench/measure"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/storage/postgres"
)

// setup reads the corpus and makes a database of its own, or skips.
func setup(t *testing.T) (mems []memgate.Write, db *postgres.DB, pg *Server) {
	if os.Getenv("MEMGATE_REPLICA_FIGURES") == "" {
		t.Skip("a measurement: set MEMGATE_REPLICA_FIGURES=1, with bench/datasets.sh installed and " +
			AdminVariable + " naming a PostgreSQL server (scripts/postgres.sh start prints one)")
	}
	admin := os.Getenv(AdminVariable)
	if admin == "" {
		t.Fatalf("%s is not set: export %s=$(scripts/postgres.sh start)", AdminVariable, AdminVariable)
	}
	glosses, err := corpus.WordNet(corpus.Dir())
	if err != nil {
		t.Fatalf("need the WordNet data set (bench/datasets.sh): %v", err)
	}
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("MEMGATE_REPLICA_N")); err == nil && v > 0 {
		n = v // a smaller run, to try a change
	}
	ctx := context.Background()
	dsn, drop, err := NewDatabase(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("drop the database: %v", err)
		}
	})
	if _, err := postgres.Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	if db, err = postgres.Open(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if pg, err = FindServer(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	fsync, _ := Setting(ctx, dsn, "fsync")
	version, _ := Setting(ctx, dsn, "server_version")
	t.Logf("PostgreSQL %s, fsync=%s; %s, GOMAXPROCS %d; load average %s", version, fsync, runtime.Version(), runtime.GOMAXPROCS(0), loadAvg())
	return corpus.Memories(glosses, n, 1), db, pg
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := bytes.Fields(b)
	if len(f) < 3 {
		return "?"
	}
	return string(bytes.Join(f[:3], []byte(" ")))
}

// lines is mems as JSON Lines with the ids m000000…, what an export holds.
func lines(mems []memgate.Write) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for i, m := range mems {
		enc.Encode(map[string]any{"id": fmt.Sprintf("m%06d", i), "text": m.Text, "tags": m.Tags, "metadata": m.Metadata})
	}
	return b.Bytes()
}

// replicaOptions are those of a replica as memgate serve opens it
// (tenants: the file is a cache of the log, so its commits are not synced).
func replicaOptions(db *postgres.DB, ns string) storage.Options {
	return storage.Options{Log: db.Log(memgate.Namespace(ns)), Staleness: time.Second, NoSync: true}
}

func open(t *testing.T, path string, opts storage.Options) *storage.Store {
	t.Helper()
	s, err := storage.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type class struct {
	name    string
	queries []corpus.Query
	tagged  bool
}

// TestReplicaFigures: recall on a replica of 100k memories against bbolt,
// the replica's cold catch-up, and writes through the log.
func TestReplicaFigures(t *testing.T) {
	mems, db, pg := setup(t)
	ctx := context.Background()
	n := len(mems)
	dir := t.TempDir()
	body := lines(mems)
	t.Logf("%d memories, %.1f MB of JSON Lines (one import, one log entry)", n, float64(len(body))/1e6)

	// The same memories in a bbolt store and in the log, each by one import.
	began := time.Now()
	plain := open(t, filepath.Join(dir, "bbolt", storage.FileName), storage.Options{})
	defer plain.Close()
	if _, err := plain.Import(ctx, bytes.NewReader(body), storage.ImportSkip); err != nil {
		t.Fatal(err)
	}
	bboltImport := time.Since(began)
	began = time.Now()
	writer := open(t, filepath.Join(dir, "writer", storage.FileName), replicaOptions(db, "corpus"))
	if _, err := writer.Import(ctx, bytes.NewReader(body), storage.ImportSkip); err != nil {
		t.Fatal(err)
	}
	replicaImport := time.Since(began)
	t.Logf("import of %d: bbolt %v (%.0f /s); into a replica, logged as one entry, %v (%.0f /s)",
		n, bboltImport.Round(time.Millisecond), float64(n)/bboltImport.Seconds(), replicaImport.Round(time.Millisecond), float64(n)/replicaImport.Seconds())
	writer.Close()

	// Cold catch-up: a fresh replica's first search replays the log.
	pg0, _ := pg.CPU()
	began = time.Now()
	reader := open(t, filepath.Join(dir, "reader", storage.FileName), replicaOptions(db, "corpus"))
	opened := time.Since(began)
	if _, err := reader.Search(ctx, memgate.Query{Text: "automobile"}); err != nil {
		t.Fatal(err)
	}
	catchUp := time.Since(began)
	pg1, _ := pg.CPU()
	t.Logf("cold catch-up of %d memories (one entry): open %v, open + first search %v (%.0f memories/s; bbolt's own import %v); PostgreSQL CPU %v",
		n, opened.Round(time.Microsecond), catchUp.Round(time.Millisecond), float64(n)/catchUp.Seconds(), bboltImport.Round(time.Millisecond), (pg1 - pg0).Round(time.Millisecond))
	reader.Close()
	began = time.Now()
	reader = open(t, filepath.Join(dir, "reader", storage.FileName), replicaOptions(db, "corpus"))
	if _, err := reader.Search(ctx, memgate.Query{Text: "automobile"}); err != nil {
		t.Fatal(err)
	}
	t.Logf("the same replica closed cleanly and opened again: open + first search %v (nothing replayed)", time.Since(began).Round(time.Microsecond))
	defer reader.Close()

	// A new replica as memgate serve starts one: from the log's snapshot
	// (the import's entry, over 16 MiB, made the writer send one).
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if st, err := db.Log("corpus").Head(ctx); err == nil && st.Snapshot > 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no snapshot: %+v %v", st, err)
		}
	}
	began = time.Now()
	snapPath := filepath.Join(dir, "from-snapshot", storage.FileName)
	if _, err := storage.WriteSnapshot(ctx, db.Log("corpus"), snapPath); err != nil {
		t.Fatal(err)
	}
	fetched := time.Since(began)
	fromSnap := open(t, snapPath, replicaOptions(db, "corpus"))
	if _, err := fromSnap.Search(ctx, memgate.Query{Text: "automobile"}); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(snapPath)
	t.Logf("a new replica from the snapshot: fetch %v (%.1f MB), fetch + open + first search %v",
		fetched.Round(time.Millisecond), float64(fi.Size())/1e6, time.Since(began).Round(time.Millisecond))
	fromSnap.Close()

	// Recall: the same queries on both, in turns, three rounds (the first
	// two warm the caches); the last is reported.
	const perClass = 1000
	classes := []class{
		{"3 words (known item)", corpus.KnownItem(mems, 3, perClass, 21), false},
		{"1 word", corpus.KnownItem(mems, 1, perClass, 22), false},
		{"3 words + tag filter", corpus.KnownItem(mems, 3, perClass, 23), true},
		{"no hit", corpus.NoHit(perClass, 24), false},
	}
	for round := range 3 {
		for _, cl := range classes {
			var lb, lr []time.Duration
			differ := 0
			for i, q := range cl.queries {
				mq := memgate.Query{Text: q.Text, Limit: 10}
				if cl.tagged {
					mq.Tags = q.Tags
				}
				var rb, rr memgate.Result
				var tb, tr time.Duration
				run := func(s *storage.Store, res *memgate.Result, d *time.Duration) {
					t0 := time.Now()
					r, err := s.Search(ctx, mq)
					*d = time.Since(t0)
					if err != nil {
						t.Fatal(err)
					}
					*res = r
				}
				if i%2 == 0 {
					run(plain, &rb, &tb)
					run(reader, &rr, &tr)
				} else {
					run(reader, &rr, &tr)
					run(plain, &rb, &tb)
				}
				lb, lr = append(lb, tb), append(lr, tr)
				if !sameHits(rb, rr) {
					differ++
				}
			}
			if round == 2 {
				b50, b99 := measure.Percentile(lb, 0.5), measure.Percentile(lb, 0.99)
				r50, r99 := measure.Percentile(lr, 0.5), measure.Percentile(lr, 0.99)
				t.Logf("recall %-22s bbolt p50 %6.0f µs p99 %6.0f µs | replica p50 %6.0f µs p99 %6.0f µs | p50 %.2fx, p99 %.2fx | queries whose hits differ: %d of %d",
					cl.name, b50, b99, r50, r99, r50/b50, r99/b99, differ, len(cl.queries))
			}
		}
	}

	// Writes through the log, one at a time, against durable bbolt writes;
	// then a fresh replica replays them one entry each.
	w := 10000
	if v, err := strconv.Atoi(os.Getenv("MEMGATE_REPLICA_WRITES")); err == nil && v > 0 {
		w = v
	}
	w = min(w, n)
	bw := open(t, filepath.Join(dir, "bbolt-writes", storage.FileName), storage.Options{})
	rw := open(t, filepath.Join(dir, "writes", storage.FileName), replicaOptions(db, "writes"))
	var lb, lr []time.Duration
	pg0, _ = pg.CPU()
	u0, _ := measure.ReadUsage("self")
	for i := range w {
		m := mems[i]
		if i%2 == 0 {
			t0 := time.Now()
			if _, _, err := rw.Put(ctx, m); err != nil {
				t.Fatal(err)
			}
			lr = append(lr, time.Since(t0))
		} else {
			t0 := time.Now()
			if _, _, err := bw.Put(ctx, m); err != nil {
				t.Fatal(err)
			}
			lb = append(lb, time.Since(t0))
		}
	}
	pg1, _ = pg.CPU()
	u1, _ := measure.ReadUsage("self")
	for i := range w {
		if i%2 == 1 { // the other half into the replica, for the replay
			if _, _, err := rw.Put(ctx, mems[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	bw.Close()
	rw.Close()
	t.Logf("sequential writes (%d each, alternated): bbolt durable p50 %.0f µs p99 %.0f µs | replica (a PostgreSQL transaction, the file unsynced) p50 %.0f µs p99 %.0f µs (%.2fx); PostgreSQL CPU %.0f µs and this process's %.0f µs per write of both kinds",
		len(lb), measure.Percentile(lb, 0.5), measure.Percentile(lb, 0.99), measure.Percentile(lr, 0.5), measure.Percentile(lr, 0.99),
		measure.Percentile(lr, 0.5)/measure.Percentile(lb, 0.5), measure.US(pg1-pg0)/float64(w), measure.US(u1.CPU-u0.CPU)/float64(w))

	// Concurrent writers on one namespace: bbolt groups them into shared
	// commits; a replica runs them one after the other, each under the
	// namespace's lock in the log.
	const writers, each = 16, 250
	concurrent := func(s *storage.Store) float64 {
		began := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for g := range writers {
			wg.Go(func() {
				for i := range each {
					m := mems[(g*each+i)%n]
					m.AllowDuplicate = true
					if _, _, err := s.Put(ctx, m); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		return float64(writers*each) / time.Since(began).Seconds()
	}
	bc := open(t, filepath.Join(dir, "bbolt-concurrent", storage.FileName), storage.Options{})
	rc := open(t, filepath.Join(dir, "concurrent", storage.FileName), replicaOptions(db, "concurrent"))
	bRate, rRate := concurrent(bc), concurrent(rc)
	bc.Close()
	rc.Close()
	t.Logf("%d concurrent writers on one namespace, %d writes each: bbolt durable %.0f /s | replica %.0f /s (%.2fx)",
		writers, each, bRate, rRate, rRate/bRate)

	began = time.Now()
	fresh := open(t, filepath.Join(dir, "writes-replay", storage.FileName), replicaOptions(db, "writes"))
	res, err := fresh.Search(ctx, memgate.Query{Text: "automobile"})
	if err != nil {
		t.Fatal(err)
	}
	replay := time.Since(began)
	st, _ := fresh.Stats(ctx)
	fresh.Close()
	t.Logf("cold catch-up of %d entries of one write each: %v (%.0f entries/s, %.0f µs each); %d memories, %d hits",
		w, replay.Round(time.Millisecond), float64(w)/replay.Seconds(), measure.US(replay)/float64(w), st.Count, len(res.Hits))
	if st.Count != int64(w) {
		t.Errorf("the replay holds %d memories, not %d", st.Count, w)
	}
	t.Logf("load average at the end: %s", loadAvg())
}

// sameHits reports whether two results hold the same memories with the
// same scores, in the same order.
func sameHits(a, b memgate.Result) bool {
	if len(a.Hits) != len(b.Hits) {
		return false
	}
	for i := range a.Hits {
		if a.Hits[i].ID != b.Hits[i].ID || a.Hits[i].Score != b.Hits[i].Score {
			return false
		}
	}
	return true
}
