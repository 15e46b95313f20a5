package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/internal/pgtest"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/storage/postgres"
	"github.com/memgate/memgate/storage/storetest"
)

// testDB returns a migrated database of the test's own.
func testDB(t *testing.T) (*postgres.DB, string) {
	t.Helper()
	dsn := pgtest.DSN(t)
	return migrated(t, dsn), dsn
}

// migrated migrates the database of dsn and opens it.
func migrated(t *testing.T, dsn string) *postgres.DB {
	t.Helper()
	ctx := context.Background()
	if _, err := postgres.Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	db, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

var nsSeq atomic.Int64

// newNamespace is a namespace no other test uses.
func newNamespace() memgate.Namespace {
	return memgate.Namespace(fmt.Sprintf("t%d-%d", time.Now().UnixNano(), nsSeq.Add(1)))
}

// replicaOf opens a replica of ns's log in a file of its own.
func replicaOf(t *testing.T, db *postgres.DB, ns memgate.Namespace, o storage.Options) *storage.Store {
	t.Helper()
	o.NoSync = true
	o.Log = db.Log(ns)
	o.Binding = string(ns)
	if o.Staleness == 0 {
		o.Staleness = time.Nanosecond // every read looks at the log
	}
	s, err := storage.Open(filepath.Join(t.TempDir(), "memgate.db"), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestContract runs the store's contract on two replicas of one
// namespace, each call going to the other replica than the call before.
func TestContract(t *testing.T) {
	db, _ := testDB(t)
	storetest.Run(t, func(t *testing.T, o storage.Options) storetest.Store {
		ns := newNamespace()
		return storetest.Alternate(replicaOf(t, db, ns, o), replicaOf(t, db, ns, o))
	})
}

// The same writes give a replica pair and a plain bbolt store the same
// memories and the same BM25 scores, to the last bit.
func TestScoresAreBboltScores(t *testing.T) {
	db, _ := testDB(t)
	ctx := context.Background()
	ns := newNamespace()
	a, b := replicaOf(t, db, ns, storage.Options{}), replicaOf(t, db, ns, storage.Options{})
	plain, err := storage.Open(filepath.Join(t.TempDir(), "memgate.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	texts := []string{"the ferry leaves at noon", "a ferry to the island at dawn", "noon is lunch time",
		"the island has one harbour", "Café au lait at the harbour", "ferry ferry ferry tickets"}
	for i, text := range texts {
		w := memgate.Write{ID: fmt.Sprint("m", i), Text: text, Tags: []string{"t"}}
		if _, err := []*storage.Store{a, b}[i%2].Write(ctx, w); err != nil {
			t.Fatal(err)
		}
		if _, err := plain.Write(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Delete(ctx, "m2", nil); err != nil {
		t.Fatal(err)
	}
	if err := plain.Delete(ctx, "m2", nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"ferry", "noon island", "cafe harbour", "tickets"} {
		want, err := plain.Search(ctx, memgate.Query{Text: q})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []*storage.Store{a, b} {
			got, err := r.Search(ctx, memgate.Query{Text: q})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Hits) != len(want.Hits) {
				t.Fatalf("%q: %d hits, bbolt %d", q, len(got.Hits), len(want.Hits))
			}
			for i := range want.Hits {
				g, w := got.Hits[i], want.Hits[i]
				if g.ID != w.ID || g.LexicalScore != w.LexicalScore || g.Version != w.Version {
					t.Fatalf("%q hit %d: %s %v v%d, bbolt %s %v v%d", q, i, g.ID, g.LexicalScore, g.Version, w.ID, w.LexicalScore, w.Version)
				}
			}
		}
	}
}

// Under encryption the database holds no plaintext: a byte scan of
// pg_dump finds none of a memory's text, title, tags, metadata, id or
// terms.
func TestDatabaseHoldsNoPlaintext(t *testing.T) {
	db, dsn := testDB(t)
	ctx := context.Background()
	ns := newNamespace()
	enc := encryption(t, "correct horse battery staple")
	o := storage.Options{Encryption: enc}
	a, b := replicaOf(t, db, ns, o), replicaOf(t, db, ns, o)
	secrets := []string{"zanzibarquokka", "Xylophonetitle", "tagmarmalade", "metakumquat", "idpterodactyl", "sourceokapi"}
	_, err := a.Write(ctx, memgate.Write{ID: secrets[4], Text: "the " + secrets[0] + " sleeps", Title: secrets[1],
		Tags: []string{secrets[2]}, Metadata: map[string]any{"k": secrets[3]},
		Source: &memgate.Source{Kind: "url", Reference: "https://example.com/" + secrets[5], Actor: "agent"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Propose(ctx, memgate.Write{Text: "candidate " + secrets[0]}); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Search(ctx, memgate.Query{Text: secrets[0]}); err != nil || len(r.Hits) != 1 {
		t.Fatalf("search on the other replica: %v %v", r, err)
	}
	dump := pgDump(t, dsn)
	for _, s := range append(secrets, "sleeps", "candidate") {
		for _, form := range []string{s, strings.ToLower(s)} {
			if bytes.Contains(dump, []byte(form)) {
				t.Fatalf("pg_dump holds %q", form)
			}
		}
	}
	// A wrong passphrase opens no replica of it.
	wrong := encryption(t, "another passphrase entirely")
	c := replicaOf(t, db, ns, storage.Options{Encryption: wrong})
	if _, err := c.Get(ctx, secrets[4]); err == nil {
		t.Fatal("a replica with the wrong passphrase read a memory")
	}
	// Nor does a plain one.
	if _, err := replicaOf(t, db, ns, storage.Options{}).Get(ctx, secrets[4]); err == nil {
		t.Fatal("a plain replica read an encrypted namespace")
	}
}

// encryption is passphrase's, at a test's low cost.
func encryption(t *testing.T, passphrase string) *storage.Encryption {
	t.Helper()
	enc, err := storage.NewEncryption(passphrase)
	if err != nil {
		t.Fatal(err)
	}
	enc.KDF = storage.KDFParams{Time: 1, Memory: 64, Threads: 1}
	return enc
}

// pgDump returns pg_dump's output for the test database.
func pgDump(t *testing.T, dsn string) []byte {
	t.Helper()
	bin, err := exec.LookPath("pg_dump")
	if err != nil {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_dump")
		if len(matches) == 0 {
			t.Fatal("no pg_dump: install Debian's postgresql package")
		}
		bin = matches[len(matches)-1]
	}
	out, err := exec.Command(bin, "--dbname", dsn).Output()
	if err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	if !bytes.Contains(out, []byte("memgate_log")) {
		t.Fatal("pg_dump holds no memgate_log")
	}
	return out
}

// Snapshots over PostgreSQL: the log keeps the entries after the snapshot
// before the latest, a new replica starts from the latest, and under
// encryption neither holds plaintext.
func TestSnapshotsOverPostgres(t *testing.T) {
	db, dsn := testDB(t)
	ctx := context.Background()
	ns := newNamespace()
	o := storage.Options{Encryption: encryption(t, "correct horse battery staple"), CompactEvery: 5}
	a := replicaOf(t, db, ns, o)
	log := db.Log(ns)
	// Snapshots travel on their own: write until a second one is in.
	var (
		st      storage.LogState
		written int
		err     error
	)
	for ; written < 500 && st.Snapshot < 15; written++ {
		if _, err := a.Write(ctx, memgate.Write{ID: fmt.Sprint("id", written), Text: fmt.Sprint("the wombatsecret number ", written)}); err != nil {
			t.Fatal(err)
		}
		if st, err = log.Head(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if st.Snapshot < 15 {
		t.Fatalf("no second snapshot in %d writes: %d", written, st.Snapshot)
	}
	var first uint64
	if err := log.Read(ctx, 0, func(seq uint64, _ []byte) error {
		if first == 0 {
			first = seq
		}
		return nil
	}); err != nil || first <= 1 || first > st.Snapshot+1 {
		t.Fatalf("the log starts at %d (%v), its snapshot is at %d", first, err, st.Snapshot)
	}
	path := filepath.Join(t.TempDir(), "memgate.db")
	if ok, err := storage.WriteSnapshot(ctx, log, path); !ok || err != nil {
		t.Fatalf("snapshot: %v %v", ok, err)
	}
	o.NoSync, o.Log, o.Binding, o.Staleness = true, log, string(ns), time.Nanosecond
	c, err := storage.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if st, err := c.Stats(ctx); err != nil || st.Count != int64(written) {
		t.Fatalf("a replica from the snapshot: %+v %v", st, err)
	}
	if r, err := c.Search(ctx, memgate.Query{Text: "wombatsecret 12"}); err != nil || len(r.Hits) == 0 || r.Hits[0].ID != "id12" {
		t.Fatalf("search: %+v %v", r, err)
	}
	dump := pgDump(t, dsn)
	for _, s := range []string{"wombatsecret", "id12", "number"} {
		if bytes.Contains(dump, []byte(s)) {
			t.Fatalf("pg_dump holds %q", s)
		}
	}
}

// Through PgBouncer in transaction mode, where a session's state does not
// survive its transaction: the schema migrates and the contract holds on
// two replicas taking turns.
func TestContractThroughPgBouncer(t *testing.T) {
	db := migrated(t, pgtest.Bouncer(t, pgtest.DSN(t)))
	storetest.Run(t, func(t *testing.T, o storage.Options) storetest.Store {
		ns := newNamespace()
		o.CompactEvery = 7 // snapshots too
		return storetest.Alternate(replicaOf(t, db, ns, o), replicaOf(t, db, ns, o))
	})
}
