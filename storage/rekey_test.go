package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/memgate/memgate"
)

// rekeyFixture makes an encrypted store under oldPass with memories whose
// index is partly merged and partly in the tail, and a candidate; it
// returns the file and what a reader should see.
func rekeyFixture(t *testing.T, oldPass string) (string, memgate.Result, memgate.Page) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stores", "default", FileName)
	s, err := Open(path, Options{NoSync: true, MergeEvery: 40, Encryption: encryption(t, oldPass), TrashRetention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for i := range 2500 { // past rekeyBatch, so the copy takes several transactions
		put(t, s, memgate.Write{ID: fmt.Sprint("m", i%1200), Text: fmt.Sprintf("harbor lantern %d %s", i, letterWord(i)),
			Tags: []string{fmt.Sprint("t", i%5)}, Metadata: map[string]any{"k": float64(i % 3)}})
	}
	if err := s.Delete(ctx, "m7", nil); err != nil { // into the trash
		t.Fatal(err)
	}
	put(t, s, memgate.Write{ID: "later", Text: "a memory that expires, from a chat", TTL: time.Hour,
		Source: &memgate.Source{Kind: "conversation", Reference: "thread", Actor: "ana"}})
	if _, err := s.Propose(ctx, memgate.Write{ID: "cand", Text: "waiting"}); err != nil {
		t.Fatal(err)
	}
	return path, answers(t, s), mustList(t, s)
}

func answers(t *testing.T, s *Store) memgate.Result {
	t.Helper()
	res, err := s.Search(context.Background(), memgate.Query{Text: "harbor lantern", Tags: []string{"t3"}, Filter: map[string]any{"k": 1}, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) == 0 {
		t.Fatal("the fixture's search finds nothing")
	}
	return res
}

func mustList(t *testing.T, s *Store) memgate.Page {
	t.Helper()
	p, err := s.List(context.Background(), memgate.ListQuery{Order: memgate.OrderCreatedDesc, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// wantWhole opens path with e and checks it answers as before.
func wantWhole(t *testing.T, path string, e *Encryption, res memgate.Result, page memgate.Page) {
	t.Helper()
	s, err := Open(path, Options{NoSync: true, MergeEvery: 40, Encryption: e})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer s.Close()
	same := func(a, b any) bool { return reflect.DeepEqual(a, b) }
	if got := answers(t, s); !same(got, res) {
		t.Fatalf("search differs:\n got  %v\n want %v", got.Hits[:1], res.Hits[:1])
	}
	if got := mustList(t, s); !same(got, page) {
		t.Fatalf("list differs:\n got  %v\n want %v", got.Memories[:2], page.Memories[:2])
	}
	c, err := s.Candidates(context.Background(), "", 10)
	if err != nil || len(c.Memories) != 1 || c.Memories[0].ID != "cand" {
		t.Fatalf("candidates = %v, %v", c.Memories, err)
	}
	if _, err := s.Get(context.Background(), "m7"); memgate.ErrorCode(err) != memgate.CodeNotFound {
		t.Fatalf("forgotten memory: %v", err)
	}
	// The lifecycle's indexes and the trash came along.
	later, err := s.Get(context.Background(), "later")
	if err != nil || later.ExpiresAt == nil || later.Source == nil || later.Source.Kind != "conversation" {
		t.Fatalf("the expiring memory: %+v %v", later, err)
	}
	if w, err := s.Write(context.Background(), memgate.Write{Text: later.Text}); err != nil || !w.Deduplicated {
		t.Fatalf("a duplicate after the rekey: %+v %v", w, err)
	}
	if tr, err := s.Trash(context.Background(), "", 10); err != nil || len(tr.Memories) != 1 || tr.Memories[0].Memory.ID != "m7" {
		t.Fatalf("the trash after the rekey: %+v %v", tr, err)
	}
	if n, _, err := s.Sweep(context.Background(), time.Hour); err != nil || n != 0 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	// Writes go on, with versions after the old ones.
	m, _, err := s.Put(context.Background(), memgate.Write{ID: "m1", Text: "after"})
	if err != nil || m.Version <= 2500 {
		t.Fatalf("put after: version %d, %v", m.Version, err)
	}
	s.Close()
	checkFile(t, path)
}

func TestRekey(t *testing.T) {
	path, res, page := rekeyFixture(t, "old passphrase")
	oldE, newE := encryption(t, "old passphrase"), encryption(t, "new passphrase")
	if err := Rekey(context.Background(), path, Options{Encryption: oldE}, newE); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + rekeySuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the new file is left beside: %v", err)
	}
	if _, err := Open(path, Options{Encryption: encryption(t, "old passphrase")}); !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("the old passphrase: %v, want ErrWrongPassphrase", err)
	}
	wantWhole(t, path, newE, res, page)
}

func TestRekeyRefusesTheWrongPassphraseAndPlainStores(t *testing.T) {
	path, _, _ := rekeyFixture(t, "old passphrase")
	err := Rekey(context.Background(), path, Options{Encryption: encryption(t, "not it")}, encryption(t, "new"))
	if !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("err = %v", err)
	}
	plain := filepath.Join(t.TempDir(), FileName)
	s, _ := Open(plain, Options{NoSync: true})
	s.Close()
	err = Rekey(context.Background(), plain, Options{Encryption: encryption(t, "old")}, encryption(t, "new"))
	if !errors.Is(err, ErrNotEncrypted) {
		t.Fatalf("err = %v", err)
	}
}

// A crash at any step of a rekey leaves the old store whole (before the
// rename) or the new one (after); a rekey after the crash completes.
func TestRekeyCrashLeavesOneStoreWhole(t *testing.T) {
	errCrash := errors.New("crash")
	for _, step := range []string{rekeyStepCopying, rekeyStepSynced, rekeyStepRenamed} {
		t.Run("a crash when "+step, func(t *testing.T) {
			path, res, page := rekeyFixture(t, "old passphrase")
			oldE, newE := encryption(t, "old passphrase"), encryption(t, "new passphrase")
			rekeyFault = func(s string) error {
				if s == step {
					return errCrash
				}
				return nil
			}
			err := Rekey(context.Background(), path, Options{Encryption: oldE}, newE)
			rekeyFault = nil
			if !errors.Is(err, errCrash) {
				t.Fatalf("err = %v, want the crash", err)
			}
			if step == rekeyStepRenamed {
				wantWhole(t, path, newE, res, page)
				return
			}
			if _, err := os.Stat(path + rekeySuffix); err != nil {
				t.Fatalf("the crash left no new file beside: %v", err)
			}
			wantWhole(t, path, oldE, res, page)
			res, page = answersOf(t, path, oldE)
			if err := Rekey(context.Background(), path, Options{Encryption: oldE}, newE); err != nil {
				t.Fatalf("rekey after the crash: %v", err)
			}
			wantWhole(t, path, newE, res, page)
		})
	}
}

func answersOf(t *testing.T, path string, e *Encryption) (memgate.Result, memgate.Page) {
	t.Helper()
	s, err := Open(path, Options{NoSync: true, MergeEvery: 40, Encryption: e})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return answers(t, s), mustList(t, s)
}

// A rekey holds the store's lock throughout: an open store refuses it.
func TestRekeyOfAnOpenStoreIsStoreLocked(t *testing.T) {
	path, _, _ := rekeyFixture(t, "old passphrase")
	s, err := Open(path, Options{NoSync: true, Encryption: encryption(t, "old passphrase")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = Rekey(context.Background(), path, Options{LockTimeout: 50e6, Encryption: encryption(t, "old passphrase")}, encryption(t, "new"))
	if memgate.ErrorCode(err) != memgate.CodeStoreLocked {
		t.Fatalf("err = %v, want store_locked", err)
	}
}

// Rekey from a plain store encrypts it: same answers, no plaintext left.
func TestRekeyEncryptsAPlainStore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	s, err := Open(path, Options{NoSync: true, MergeEvery: 16})
	if err != nil {
		t.Fatal(err)
	}
	fillSecret(t, s)
	res, err := s.Search(context.Background(), memgate.Query{Text: secretWord, Tags: []string{"zephyrglint"}, Limit: 100})
	if err != nil || len(res.Hits) == 0 {
		t.Fatalf("search: %v %v", res.Hits, err)
	}
	s.Close()
	e := encryption(t, "now encrypted")
	if err := Rekey(context.Background(), path, Options{}, e); err != nil {
		t.Fatal(err)
	}
	if found := findNeedles(t, dir); len(found) > 0 {
		t.Fatalf("plaintext after encrypting: %v", found)
	}
	s, err = Open(path, Options{NoSync: true, Encryption: e})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Search(context.Background(), memgate.Query{Text: secretWord, Tags: []string{"zephyrglint"}, Limit: 100})
	if err != nil || fmt.Sprint(got) != fmt.Sprint(res) {
		t.Fatalf("search after encrypting differs: %v", err)
	}
}

// A process that waits for the store's lock during a rekey gets the new
// file once the rekey lets go, not the old one it was renamed over.
func TestOpenWaitingOnARekeyGetsTheNewFile(t *testing.T) {
	path, _, _ := rekeyFixture(t, "old passphrase")
	oldE, newE := encryption(t, "old passphrase"), encryption(t, "new passphrase")
	opened := make(chan error, 1)
	var waiter *Store
	rekeyFault = func(step string) error {
		if step == rekeyStepSynced {
			go func() {
				s, err := Open(path, Options{NoSync: true, LockTimeout: 10 * time.Second, Encryption: newE})
				waiter = s
				opened <- err
			}()
			time.Sleep(200 * time.Millisecond) // it now waits on the old file's lock
		}
		return nil
	}
	defer func() { rekeyFault = nil }()
	if err := Rekey(context.Background(), path, Options{Encryption: oldE}, newE); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("the waiting open: %v", err)
	}
	put(t, waiter, memgate.Write{ID: "late", Text: "written by the waiter"})
	waiter.Close()
	s, err := Open(path, Options{NoSync: true, Encryption: newE})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Get(context.Background(), "late"); err != nil {
		t.Fatalf("the waiter's write is lost: %v", err)
	}
}
