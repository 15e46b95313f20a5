package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/search"
)

var _ sealer = (*encSealer)(nil)

// testKDF keeps key derivation fast in tests; stores record it, so each
// open derives with it too.
var testKDF = KDFParams{Time: 1, Memory: 64, Threads: 1}

func encryption(t testing.TB, passphrase string) *Encryption {
	t.Helper()
	e, err := NewEncryption(passphrase)
	if err != nil {
		t.Fatal(err)
	}
	e.KDF = testKDF
	return e
}

// encrypted is an openTest option: encrypt with passphrase.
func encrypted(t testing.TB, passphrase string) func(*Options) {
	e := encryption(t, passphrase)
	return func(o *Options) { o.Encryption = e }
}

// The distinctive word, in the forms a careless store could write.
const secretWord = "Quixotrambulation"

// needles returns every form of secretWord (and of the other contents) that
// must appear in no file: as written, folded, and as the analyser's terms.
func needles() []string {
	base := []string{secretWord, strings.ToLower(secretWord), "quixotrambulat", "Zephyrglint", "zephyrglint", "wobblecrest", "Wobblecrest"}
	for _, s := range []string{secretWord + "ing " + secretWord + "s Zephyrglints Wobblecrests"} {
		base = append(base, search.Terms(s)...)
	}
	return base
}

// fillSecret writes memories carrying the secret word as text, title, tag,
// metadata key and value, and id; replaces some, forgets others, enough
// to merge the index a few times; and proposes a candidate.
func fillSecret(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	for i := range 60 {
		w := memgate.Write{
			ID:       fmt.Sprintf("%s-%d", secretWord, i),
			Text:     fmt.Sprintf("The %sing of %ss number %d near the Zephyrglint", secretWord, secretWord, i),
			Title:    secretWord + " Wobblecrest",
			Tags:     []string{strings.ToLower(secretWord), "zephyrglint"},
			Metadata: map[string]any{secretWord: "Wobblecrest " + secretWord},
		}
		put(t, s, w)
	}
	for i := range 60 {
		id := fmt.Sprintf("%s-%d", secretWord, i)
		switch i % 3 {
		case 0:
			if err := s.Delete(ctx, id, nil); err != nil {
				t.Fatal(err)
			}
		case 1:
			put(t, s, memgate.Write{ID: id, Text: "replaced by " + secretWord + "ed words", Tags: []string{"zephyrglint"}})
		}
	}
	if _, err := s.Propose(ctx, memgate.Write{ID: secretWord + "-candidate", Text: secretWord + " proposed"}); err != nil {
		t.Fatal(err)
	}
}

// findNeedles returns the needles found in any file under dir, every byte
// of it (free pages included), with the file's name.
func findNeedles(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, n := range needles() {
			if bytes.Contains(b, []byte(n)) || bytes.Contains(bytes.ToLower(b), []byte(strings.ToLower(n))) {
				found = append(found, filepath.Base(path)+": "+n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func TestEncryptedStoreWritesNoContent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "stores", "default", FileName)
	opts := Options{MergeEvery: 16, Encryption: encryption(t, "correct horse battery staple")}
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	fillSecret(t, s)
	var backup bytes.Buffer
	if _, err := s.Backup(context.Background(), &backup); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "backup.db"), backup.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkFile(t, path)
	if found := findNeedles(t, dir); len(found) > 0 {
		t.Fatalf("plaintext in the encrypted store's files: %v", found)
	}
	// The store still answers, through the passphrase.
	s, err = Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Search(context.Background(), memgate.Query{Text: strings.ToLower(secretWord), Tags: []string{"zephyrglint"},
		Filter: map[string]any{secretWord: "Wobblecrest " + secretWord}, Limit: 100})
	if err != nil || len(res.Hits) != 20 {
		t.Fatalf("search: %d hits, %v; want the 20 memories neither replaced nor forgotten", len(res.Hits), err)
	}
	if _, err := s.Get(context.Background(), secretWord+"-1"); err != nil {
		t.Fatalf("get by id: %v", err)
	}
}

// The same scan finds the word in a plain store: the check can fail.
func TestPlainStoreScanFindsContent(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(filepath.Join(dir, FileName), Options{MergeEvery: 16, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	fillSecret(t, s)
	s.Close()
	if found := findNeedles(t, dir); len(found) == 0 {
		t.Fatal("the scan finds nothing in a plain store; it would miss a leak")
	}
}

func TestOpenRefusesTheWrongKeyOrMode(t *testing.T) {
	dir := t.TempDir()
	encPath := filepath.Join(dir, "enc", FileName)
	plainPath := filepath.Join(dir, "plain", FileName)
	for path, e := range map[string]*Encryption{encPath: encryption(t, "the right passphrase"), plainPath: nil} {
		s, err := Open(path, Options{NoSync: true, Encryption: e})
		if err != nil {
			t.Fatal(err)
		}
		put(t, s, memgate.Write{ID: "a", Text: "alpha"})
		s.Close()
	}
	cases := []struct {
		name string
		path string
		enc  *Encryption
		want error
	}{
		{"a wrong passphrase fails the open", encPath, encryption(t, "the wrong passphrase"), ErrWrongPassphrase},
		{"an encrypted store opened plain fails", encPath, nil, ErrEncrypted},
		{"a plain store opened with a passphrase fails", plainPath, encryption(t, "the right passphrase"), ErrNotEncrypted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(c.path, Options{NoSync: true, Encryption: c.enc})
			if err == nil {
				s.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if strings.Contains(err.Error(), "passphrase\"") || strings.Contains(err.Error(), "right passphrase") || strings.Contains(err.Error(), "wrong passphrase\"") {
				t.Fatalf("the error shows the passphrase: %v", err)
			}
		})
	}
	// Nothing was written by the failed opens: each store opens as before.
	for path, e := range map[string]*Encryption{encPath: encryption(t, "the right passphrase"), plainPath: nil} {
		s, err := Open(path, Options{NoSync: true, Encryption: e})
		if err != nil {
			t.Fatal(err)
		}
		if m, err := s.Get(context.Background(), "a"); err != nil || m.Text != "alpha" {
			t.Fatalf("get = %q, %v", m.Text, err)
		}
		s.Close()
	}
}

func TestEncryptionNeverPrintsThePassphrase(t *testing.T) {
	e := encryption(t, "hunter2-but-longer")
	for _, s := range []string{fmt.Sprint(e), fmt.Sprintf("%+v", Options{Encryption: e}), fmt.Sprintf("%#v", e)} {
		if strings.Contains(s, "hunter2") {
			t.Fatalf("printed: %s", s)
		}
	}
	if _, err := NewEncryption(""); err == nil {
		t.Fatal("an empty passphrase was accepted")
	}
}

// tamper changes the raw value of one key of bucket in the closed file at
// path with fn.
func tamper(t *testing.T, path string, bucket []byte, pick func(k []byte) bool, fn func(b *bolt.Bucket, k, v []byte) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if pick(k) {
				return fn(b, bytes.Clone(k), bytes.Clone(v))
			}
		}
		return errors.New("no key to tamper with")
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestTamperedValuesAreErrorsNotData(t *testing.T) {
	ctx := context.Background()
	flip := func(b *bolt.Bucket, k, v []byte) error {
		v[len(v)-5] ^= 1
		return b.Put(k, v)
	}
	cases := []struct {
		name   string
		bucket []byte
		pick   func(k []byte) bool
		change func(b *bolt.Bucket, k, v []byte) error
		read   func(s *Store) error
	}{
		{"a flipped bit in a record fails get", bucketDocs, func(k []byte) bool { return true }, flip,
			func(s *Store) error { _, err := s.Get(ctx, "m0"); return err }},
		{"a record moved to another document fails list", bucketDocs, func(k []byte) bool { return true },
			func(b *bolt.Bucket, k, v []byte) error {
				c := b.Cursor()
				k2, _ := c.Last()
				return b.Put(bytes.Clone(k2), v)
			},
			func(s *Store) error { _, err := s.List(ctx, memgate.ListQuery{Limit: 100}); return err }},
		{"a flipped bit in an id's document number fails get", bucketIDs, func(k []byte) bool { return true }, flip,
			func(s *Store) error {
				for i := range 20 {
					if _, err := s.Get(ctx, fmt.Sprint("m", i)); err != nil {
						return err
					}
				}
				return nil
			}},
		{"a flipped bit in a posting chunk fails search", bucketPostings, func(k []byte) bool { return true }, flip,
			func(s *Store) error {
				for _, w := range []string{"alpha", "beta", "gamma", "delta"} {
					if _, err := s.Search(ctx, memgate.Query{Text: w}); err != nil {
						return err
					}
				}
				_, err := s.Search(ctx, memgate.Query{Tags: []string{"t"}})
				return err
			}},
		{"a creation value moved to another creation key fails the created order", bucketCreated, func(k []byte) bool { return true },
			func(b *bolt.Bucket, k, v []byte) error {
				k2, _ := b.Cursor().Last()
				return b.Put(bytes.Clone(k2), v)
			},
			func(s *Store) error {
				_, err := s.List(ctx, memgate.ListQuery{Order: memgate.OrderCreatedDesc, Limit: 100})
				return err
			}},
		{"an id's document number moved to another id fails get", bucketIDs, func(k []byte) bool { return true },
			func(b *bolt.Bucket, k, v []byte) error {
				k2, _ := b.Cursor().Last()
				return b.Put(bytes.Clone(k2), v)
			},
			func(s *Store) error {
				for i := range 20 {
					if _, err := s.Get(ctx, fmt.Sprint("m", i)); err != nil {
						return err
					}
				}
				return nil
			}},
		{"a cut creation value fails the created order", bucketCreated, func(k []byte) bool { return true },
			func(b *bolt.Bucket, k, v []byte) error { return b.Put(k, v[:10]) },
			func(s *Store) error {
				_, err := s.List(ctx, memgate.ListQuery{Order: memgate.OrderCreatedAsc, Limit: 100})
				return err
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			opts := Options{NoSync: true, MergeEvery: 5, Encryption: encryption(t, "a passphrase for tampering")}
			s, err := Open(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 20 {
				put(t, s, memgate.Write{ID: fmt.Sprint("m", i), Text: "alpha beta gamma delta", Tags: []string{"t"}})
			}
			s.Close()
			tamper(t, path, c.bucket, c.pick, c.change)
			s, err = Open(path, opts)
			if err != nil {
				if errors.Is(err, ErrTampered) {
					return // the tail's rebuild at open read it
				}
				t.Fatal(err)
			}
			defer s.Close()
			err = c.read(s)
			if !errors.Is(err, ErrTampered) {
				t.Fatalf("err = %v, want ErrTampered", err)
			}
			if !errors.Is(err, ErrDamaged) || memgate.ErrorCode(err) != memgate.CodeUnavailable {
				t.Fatalf("err = %v, want unavailable: damaged", err)
			}
		})
	}
}

func TestEncryptedIndexMatchesStore(t *testing.T) {
	for _, every := range []int{1, 7} {
		t.Run(fmt.Sprint("merge every ", every), func(t *testing.T) {
			indexMatchesStore(t, openTest(t, encrypted(t, "index passphrase"), func(o *Options) { o.MergeEvery = every }))
		})
	}
}

// A plain and an encrypted store given the same writes answer every read
// the same: search (scores too), tag and filter narrowing, every list order
// and its pages, compare-and-set, export.
func TestEncryptedStoreAnswersAsPlain(t *testing.T) {
	ctx := context.Background()
	clock := func() func() time.Time {
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		tick := 0
		return func() time.Time { tick++; return base.Add(time.Duration(tick) * time.Second) }
	}
	plain := openTest(t, func(o *Options) { o.Now = clock(); o.MergeEvery = 9 })
	enc := openTest(t, encrypted(t, "parity passphrase"), func(o *Options) { o.Now = clock(); o.MergeEvery = 9 })
	words := []string{"river", "stone", "cloud", "ember", "frost", "grove", "deploy", "staging"}
	both := func(fn func(s *Store) (any, error)) {
		t.Helper()
		a, aerr := fn(plain)
		b, berr := fn(enc)
		if !reflect.DeepEqual(a, b) || memgate.ErrorCode(aerr) != memgate.ErrorCode(berr) {
			t.Fatalf("plain and encrypted differ:\n plain %v %v\n enc   %v %v", a, aerr, b, berr)
		}
	}
	for i := range 120 {
		w := memgate.Write{
			ID:       fmt.Sprint("m", i%50),
			Text:     fmt.Sprintf("%s %s %s note %d", words[i%8], words[(i*3)%8], words[(i*5)%8], i),
			Tags:     []string{words[i%3]},
			Metadata: map[string]any{"n": float64(i % 4)},
		}
		both(func(s *Store) (any, error) { m, created, err := s.Put(ctx, w); return []any{m, created}, err })
		if i%11 == 0 {
			both(func(s *Store) (any, error) { return nil, s.Delete(ctx, fmt.Sprint("m", (i+7)%50), nil) })
		}
	}
	// Compare-and-set: a stale version, the right one, create-only.
	both(func(s *Store) (any, error) {
		_, _, err := s.Put(ctx, memgate.Write{ID: "m1", Text: "x", IfVersion: ptr(int64(1))})
		return nil, err
	})
	both(func(s *Store) (any, error) {
		m, err := s.Get(ctx, "m2")
		if err != nil {
			return nil, err
		}
		m, _, err = s.Put(ctx, memgate.Write{ID: "m2", Text: "river again", IfVersion: ptr(m.Version)})
		return m, err
	})
	both(func(s *Store) (any, error) {
		_, _, err := s.Put(ctx, memgate.Write{ID: "m3", Text: "x", IfVersion: ptr(int64(0))})
		return nil, err
	})
	for _, q := range []memgate.Query{
		{Text: "river stone", Limit: 100},
		{Text: "ember", Tags: []string{"cloud"}, Limit: 100},
		{Text: "frost grove", Tags: []string{"river", "stone"}, TagsMode: memgate.TagsAny, Limit: 100},
		{Text: "note", Filter: map[string]any{"n": 2}, Limit: 100},
		{Tags: []string{"stone"}, Limit: 100},
		{Text: "nothing matches this"},
	} {
		both(func(s *Store) (any, error) { return s.Search(ctx, q) })
	}
	for _, order := range []string{memgate.OrderUpdatedDesc, memgate.OrderCreatedAsc, memgate.OrderCreatedDesc} {
		both(func(s *Store) (any, error) {
			var pages []memgate.Page
			cursor := ""
			for {
				p, err := s.List(ctx, memgate.ListQuery{Order: order, Limit: 7, Cursor: cursor, Tags: []string{"river"}})
				if err != nil {
					return nil, err
				}
				pages = append(pages, p)
				if cursor = p.NextCursor; cursor == "" {
					return pages, nil
				}
			}
		})
	}
	both(func(s *Store) (any, error) {
		var buf bytes.Buffer
		_, _, err := s.Export(ctx, &buf, "", 0)
		return buf.String(), err
	})
	both(func(s *Store) (any, error) {
		st, err := s.Stats(ctx)
		return st.Count, err
	})
}

// The KDF record and sealed values come from a file that may be damaged or
// hostile: no input makes them panic, and only a value sealed under the key
// opens.
func FuzzOpenSealed(f *testing.F) {
	master := bytes.Repeat([]byte{7}, 32)
	s, err := newEncSealer(master, bytes.Repeat([]byte{2}, saltSize))
	if err != nil {
		f.Fatal(err)
	}
	salt := bytes.Repeat([]byte{1}, saltSize)
	f.Add(s.seal(bucketDocs, []byte("k"), []byte("value")), encodeKDF(kdfRecord{format: kdfLegacy, params: testKDF, salt: salt}))
	f.Add([]byte{}, encodeKDF(kdfRecord{format: kdfFormat, params: testKDF, salt: salt, storeSalt: salt}))
	f.Add([]byte{}, []byte{1, 1, 1})
	f.Fuzz(func(t *testing.T, sealed, kdf []byte) {
		if r, err := decodeKDF(kdf); err == nil {
			if !r.params.valid() || len(r.salt) < saltSize || r.format == kdfFormat && len(r.storeSalt) < saltSize ||
				!bytes.Equal(encodeKDF(r), kdf) {
				t.Fatalf("decodeKDF accepted %+v from %x", r, kdf)
			}
		}
		plain, err := s.open(bucketDocs, []byte("k"), sealed)
		if err == nil && !bytes.Equal(plain, []byte("value")) {
			t.Fatalf("opened forged value %q", plain)
		}
		if err != nil && !errors.Is(err, ErrTampered) {
			t.Fatalf("err = %v", err)
		}
	})
}

// One Encryption serves many stores opened at once, as a pool opens them:
// each its own salt and keys, none mixed up.
func TestOneEncryptionManyStores(t *testing.T) {
	e := encryption(t, "shared by the pool")
	dir := t.TempDir()
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			path := filepath.Join(dir, fmt.Sprint("ns", i), FileName)
			for range 2 { // create, then reopen with the kept keys
				s, err := Open(path, Options{NoSync: true, Encryption: e})
				if err != nil {
					errs <- err
					return
				}
				if _, _, err := s.Put(context.Background(), memgate.Write{ID: "k", Text: fmt.Sprint("store ", i)}); err != nil {
					errs <- err
					return
				}
				m, err := s.Get(context.Background(), "k")
				s.Close()
				if err == nil && m.Text != fmt.Sprint("store ", i) {
					err = fmt.Errorf("store %d reads %q", i, m.Text)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Distinct salts: the same id hashes differently in each store.
	seen := map[string]bool{}
	for i := range n {
		db, err := bolt.Open(filepath.Join(dir, fmt.Sprint("ns", i), FileName), 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		db.View(func(tx *bolt.Tx) error {
			k, _ := tx.Bucket(bucketIDs).Cursor().First()
			seen[string(k)] = true
			return nil
		})
		db.Close()
	}
	if len(seen) != n {
		t.Fatalf("%d distinct id keys in %d stores", len(seen), n)
	}
}

// rawGet returns a copy of the raw value of key in bucket of the closed
// file at path; nil when it is absent.
func rawGet(t *testing.T, path string, bucket, key []byte) []byte {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v []byte
	db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucket); b != nil {
			v = bytes.Clone(b.Get(key))
		}
		return nil
	})
	return v
}

// rawPut sets (or, with v nil, deletes) key in bucket of the closed file.
func rawPut(t *testing.T, path string, bucket, key, v []byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if v == nil {
			return b.Delete(key)
		}
		return b.Put(key, v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A store that holds data but lost a record of its layout or its keys is
// refused, and the open writes nothing: putting the record back makes it
// whole again.
func TestOpenNeverRewritesTheKeysOfAStoreWithData(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		key     []byte
		enc     bool
		message string
	}{
		{"encrypted store without its schema", metaSchema, true, "encryption record is missing"},
		{"encrypted store without its KDF record", metaKDF, true, "encryption record is missing"},
		{"encrypted store without its key check", metaKeyCheck, true, "encryption record is missing"},
		{"plain store without its schema", metaSchema, false, "schema record is missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			opts := Options{NoSync: true}
			if c.enc {
				opts.Encryption = encryption(t, "a passphrase that must keep working")
			}
			s, err := Open(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			put(t, s, memgate.Write{ID: "a", Text: "alpha"})
			s.Close()
			saved := rawGet(t, path, bucketMeta, c.key)
			if saved == nil {
				t.Fatal("the record is not there to remove")
			}
			rawPut(t, path, bucketMeta, c.key, nil)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range []*Encryption{opts.Encryption, nil, encryption(t, "another passphrase")} {
				s, err = Open(path, Options{NoSync: true, Encryption: e})
				if err == nil {
					s.Close()
					t.Fatal("opened")
				}
				if memgate.ErrorCode(err) != memgate.CodeUnavailable || !strings.Contains(err.Error(), c.message) {
					t.Fatalf("err = %v (code %s), want unavailable %q", err, memgate.ErrorCode(err), c.message)
				}
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Fatal("a refused open changed the file")
			}
			rawPut(t, path, bucketMeta, c.key, saved)
			s, err = Open(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if m, err := s.Get(ctx, "a"); err != nil || m.Text != "alpha" {
				t.Fatalf("get = %q, %v", m.Text, err)
			}
		})
	}
}

// Every plaintext number that steers reads is sealed in an encrypted store:
// changing or removing one is an error at open or at the read, never a
// wrong answer.
func TestTamperedCountersAreErrorsNotAnswers(t *testing.T) {
	ctx := context.Background()
	sealedValue := func(key []byte) func(t *testing.T, db *bolt.DB) {
		return func(t *testing.T, db *bolt.DB) {
			// A value sealed for another key: authentic, but not this one's.
			db.Update(func(tx *bolt.Tx) error {
				meta := tx.Bucket(bucketMeta)
				return meta.Put(key, bytes.Clone(meta.Get(metaCount)))
			})
		}
	}
	setPlain := func(key []byte, v uint64) func(t *testing.T, db *bolt.DB) {
		return func(t *testing.T, db *bolt.DB) {
			db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(key, u64(v)) })
		}
	}
	remove := func(key []byte) func(t *testing.T, db *bolt.DB) {
		return func(t *testing.T, db *bolt.DB) {
			db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(key) })
		}
	}
	stats := func(s *Store) error { _, err := s.Stats(ctx); return err }
	search := func(s *Store) error { _, err := s.Search(ctx, memgate.Query{Text: "alpha"}); return err }
	cases := []struct {
		name   string
		change func(t *testing.T, db *bolt.DB)
		read   func(s *Store) error
	}{
		{"the docs sequence moved back", func(t *testing.T, db *bolt.DB) {
			db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketDocs).SetSequence(3) })
		}, nil},
		{"the docs sequence moved on", func(t *testing.T, db *bolt.DB) {
			db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketDocs).SetSequence(1000) })
		}, nil},
		{"the sealed sequence removed", remove(metaSeq), nil},
		{"the merged mark raised", setPlain(metaMerged, 15), nil},
		{"the merged mark removed", remove(metaMerged), nil},
		{"the merged mark given the count's value", sealedValue(metaMerged), nil},
		{"the count changed", setPlain(metaCount, 3), stats},
		{"the count removed", remove(metaCount), search},
		{"the bytes changed", setPlain(metaBytes, 1), stats},
		{"the total length changed", setPlain(metaTotalLen, 1), search},
		{"the total length given the count's value", sealedValue(metaTotalLen), search},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			opts := Options{NoSync: true, MergeEvery: 5, Encryption: encryption(t, "a passphrase for counters")}
			s, err := Open(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 12 {
				put(t, s, memgate.Write{ID: fmt.Sprint("m", i), Text: "alpha beta gamma delta"})
			}
			s.Close()
			db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			c.change(t, db)
			db.Close()
			s, err = Open(path, opts)
			if c.read == nil {
				if err == nil {
					s.Close()
					t.Fatal("opened")
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				err = c.read(s)
			}
			if !errors.Is(err, ErrTampered) || !errors.Is(err, ErrDamaged) || memgate.ErrorCode(err) != memgate.CodeUnavailable {
				t.Fatalf("err = %v, want unavailable: damaged, from ErrTampered", err)
			}
		})
	}
}

// A record that authenticates is still checked against the id that led to
// it: a document number pointing at another memory's record is an error,
// in a plain store too, never the other memory.
func TestGetNeverAnswersWithAnotherMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b := put(t, s, memgate.Write{ID: "b", Text: "bravo"})
	d := put(t, s, memgate.Write{ID: "d", Text: "delta"})
	s.Close()
	key := plainSealer{}.key(kindID, "b")
	if got := rawGet(t, path, bucketIDs, key); docRefOrZero(got) != uint64(b.Version) {
		t.Fatalf("ids[b] = %x, want document %d", got, b.Version)
	}
	rawPut(t, path, bucketIDs, key, binary.AppendUvarint(nil, uint64(d.Version)))
	s, err = Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := s.Get(context.Background(), "b")
	if !errors.Is(err, ErrTampered) {
		t.Fatalf("get b = %q, %v; want ErrTampered", m.Text, err)
	}
	// The store is marked damaged from then on: a write fails too.
	if _, _, err := s.Put(context.Background(), memgate.Write{ID: "b", Text: "again"}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("put b: %v; want ErrDamaged", err)
	}
}

func docRefOrZero(v []byte) uint64 {
	doc, _ := docRef(v)
	return doc
}

// A store bound to a namespace opens as that namespace only; one copied
// into another's folder is refused, and RekeyAs moves it on purpose.
func TestEncryptedStoreIsBoundToItsNamespace(t *testing.T) {
	ctx := context.Background()
	e := encryption(t, "one passphrase for all tenants")
	path := filepath.Join(t.TempDir(), "alice", FileName)
	s, err := Open(path, Options{NoSync: true, Encryption: e, Binding: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, memgate.Write{ID: "a", Text: "alice's memory"})
	s.Close()
	for _, other := range []string{"bob", "", "alicE", "alice "} {
		s, err := Open(path, Options{NoSync: true, Encryption: e, Binding: other})
		if err == nil {
			s.Close()
			t.Fatalf("opened as %q", other)
		}
		if !errors.Is(err, ErrOtherNamespace) || memgate.ErrorCode(err) != memgate.CodeUnavailable {
			t.Fatalf("as %q: err = %v, want ErrOtherNamespace", other, err)
		}
		if strings.Contains(err.Error(), "alice") {
			t.Fatalf("the error names the namespace: %v", err)
		}
	}
	if err := RekeyAs(ctx, path, Options{Encryption: e, Binding: "alice"}, e, "bob"); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(path, Options{NoSync: true, Encryption: e, Binding: "alice"}); !errors.Is(err, ErrOtherNamespace) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("moved store opened as its old namespace: %v", err)
	}
	s, err = Open(path, Options{NoSync: true, Encryption: e, Binding: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if m, err := s.Get(ctx, "a"); err != nil || m.Text != "alice's memory" {
		t.Fatalf("get = %q, %v", m.Text, err)
	}
}

// createLegacy lays out an empty store at path as memgate wrote them
// before KDF format 2: its own Argon2id salt, plaintext counters, no
// binding.
func createLegacy(t *testing.T, path string, e *Encryption) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	salt := make([]byte, saltSize)
	for i := range salt {
		salt[i] = byte(i + len(path))
	}
	rec := encodeKDF(kdfRecord{format: kdfLegacy, params: testKDF, salt: salt})
	s, err := e.sealer(rec)
	if err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		return createBuckets(tx, rec, s.seal(bucketMeta, metaKeyCheck, keyCheckText), s)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Stores of KDF format 1 keep working: they open under any binding, keep
// plaintext counters, and a rekey moves them to format 2, bound.
func TestLegacyStoresOpenAndRekeyBindsThem(t *testing.T) {
	ctx := context.Background()
	e := encryption(t, "the passphrase of an old store")
	path := filepath.Join(t.TempDir(), "old", FileName)
	createLegacy(t, path, e)
	for i, binding := range []string{"old", "anything", ""} {
		s, err := Open(path, Options{NoSync: true, Encryption: e, Binding: binding})
		if err != nil {
			t.Fatalf("as %q: %v", binding, err)
		}
		put(t, s, memgate.Write{ID: fmt.Sprint("m", i), Text: "alpha " + secretWord})
		s.Close()
	}
	if v := rawGet(t, path, bucketMeta, metaCount); !bytes.Equal(v, u64(3)) {
		t.Fatalf("legacy count on disk = %x, want plaintext 3", v)
	}
	if rawGet(t, path, bucketMeta, metaKDF)[0] != kdfLegacy {
		t.Fatal("opening changed the store's format")
	}
	if err := Rekey(ctx, path, Options{Encryption: e, Binding: "old"}, e); err != nil {
		t.Fatal(err)
	}
	if rec, err := decodeKDF(rawGet(t, path, bucketMeta, metaKDF)); err != nil || rec.format != kdfFormat {
		t.Fatalf("after rekey: format %d, %v", rec.format, err)
	}
	if v := rawGet(t, path, bucketMeta, metaCount); len(v) == 8 {
		t.Fatalf("count still plaintext after rekey: %x", v)
	}
	if _, err := Open(path, Options{NoSync: true, Encryption: e, Binding: "anything"}); !errors.Is(err, ErrOtherNamespace) {
		t.Fatalf("rekeyed store opened as another namespace: %v", err)
	}
	s, err := Open(path, Options{NoSync: true, Encryption: e, Binding: "old"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Stats(ctx)
	if err != nil || st.Count != 3 {
		t.Fatalf("stats = %+v, %v", st, err)
	}
	res, err := s.Search(ctx, memgate.Query{Text: secretWord})
	if err != nil || len(res.Hits) != 3 {
		t.Fatalf("search = %d hits, %v", len(res.Hits), err)
	}
}

// One Encryption runs Argon2id once for every store of a data folder, new
// or reopened: each store's keys come from the master key and its own salt.
func TestOneDerivationServesEveryStore(t *testing.T) {
	dir := t.TempDir()
	saltFile := filepath.Join(dir, "kdf-salt")
	runs := func(f func()) int64 {
		before := argonRuns.Load()
		f()
		return argonRuns.Load() - before
	}
	openAll := func(e *Encryption) {
		for i := range 6 {
			s, err := Open(filepath.Join(dir, fmt.Sprint("ns", i), FileName), Options{NoSync: true, Encryption: e, Binding: fmt.Sprint("ns", i)})
			if err != nil {
				t.Fatal(err)
			}
			put(t, s, memgate.Write{ID: fmt.Sprint("k", i), Text: "text"})
			s.Close()
		}
	}
	e := encryption(t, "one master for the folder")
	e.UseSaltFile(saltFile)
	if n := runs(func() { openAll(e); openAll(e) }); n != 1 {
		t.Fatalf("%d derivations for 6 stores opened twice, want 1", n)
	}
	// Another process (a new Encryption) with the same salt file: one more.
	e2 := encryption(t, "one master for the folder")
	e2.UseSaltFile(saltFile)
	if n := runs(func() { openAll(e2) }); n != 1 {
		t.Fatalf("%d derivations in a second process, want 1", n)
	}
	// Without the salt file the stores still open: the salt is in each.
	e3 := encryption(t, "one master for the folder")
	if n := runs(func() { openAll(e3) }); n != 1 {
		t.Fatalf("%d derivations without the salt file, want 1", n)
	}
	// A wrong passphrase still fails, after its own one derivation.
	_, err := Open(filepath.Join(dir, "ns0", FileName), Options{NoSync: true, Encryption: encryption(t, "not the master"), Binding: "ns0"})
	if !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("err = %v, want ErrWrongPassphrase", err)
	}
	// A legacy store pays its own derivation, once per Encryption.
	legacy := filepath.Join(dir, "legacy", FileName)
	createLegacy(t, legacy, encryption(t, "one master for the folder"))
	e4 := encryption(t, "one master for the folder")
	if n := runs(func() {
		for range 3 {
			s, err := Open(legacy, Options{NoSync: true, Encryption: e4})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
		}
	}); n != 1 {
		t.Fatalf("%d derivations for a legacy store opened 3 times, want 1", n)
	}
	b, err := os.ReadFile(saltFile)
	if err != nil || len(b) != len(saltMagic)+saltSize {
		t.Fatalf("salt file: %d bytes, %v", len(b), err)
	}
	// A damaged salt file fails the creation of a store, not its reading.
	os.WriteFile(saltFile, []byte("garbage"), 0o600)
	e5 := encryption(t, "one master for the folder")
	e5.UseSaltFile(saltFile)
	if _, err := Open(filepath.Join(dir, "new", FileName), Options{NoSync: true, Encryption: e5}); memgate.ErrorCode(err) != memgate.CodeInternal {
		t.Fatalf("create with a damaged salt file: %v", err)
	}
	s, err := Open(filepath.Join(dir, "ns1", FileName), Options{NoSync: true, Encryption: e5, Binding: "ns1"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// getU64 reads a plaintext counter of b (a plain store's); 0 when it is
// absent.
func getU64(b *bolt.Bucket, key []byte) uint64 {
	v, _ := plainSealer{}.openU64(key, b.Get(key))
	return v
}
