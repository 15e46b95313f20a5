package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
)

// openTest opens a store in a temporary folder and, when the test ends,
// closes it and checks the file's consistency.
func openTest(t testing.TB, opts ...func(*Options)) *Store {
	t.Helper()
	o := Options{NoSync: true}
	for _, f := range opts {
		f(&o)
	}
	path := filepath.Join(t.TempDir(), "stores", "default", FileName)
	s, err := Open(path, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		checkFile(t, path)
	})
	return s
}

// checkFile runs bbolt's own consistency check on a closed store file.
func checkFile(t testing.TB, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Errorf("reopen for check: %v", err)
		return
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	})
	if err != nil {
		t.Errorf("consistency check: %v", err)
	}
}

func put(t testing.TB, s *Store, w memgate.Write) memgate.Memory {
	t.Helper()
	m, _, err := s.Put(context.Background(), w)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	return m
}

func ptr[T any](v T) *T { return &v }

// wantCode fails the test unless err carries code (and, when field is not
// empty, names that field).
func wantCode(t testing.TB, err error, code memgate.Code, field string) {
	t.Helper()
	var e *memgate.Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v, want a *memgate.Error with code %s", err, code)
	}
	if e.Code != code {
		t.Fatalf("code = %s (%s), want %s", e.Code, e.Message, code)
	}
	if field != "" && e.Details["field"] != field {
		t.Fatalf("details.field = %v, want %s", e.Details["field"], field)
	}
}

func TestLimits(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	tags := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "t" + strings.Repeat("x", i)
		}
		return out
	}
	meta := func(n int) map[string]any {
		out := map[string]any{}
		for i := range n {
			out["k"+strings.Repeat("x", i)] = i
		}
		return out
	}
	cases := []struct {
		name  string
		w     memgate.Write
		code  memgate.Code
		field string
	}{
		{"text at the size limit passes", memgate.Write{Text: strings.Repeat("a", memgate.DefaultMaxTextBytes)}, "", ""},
		{"text one byte over the limit is too large", memgate.Write{Text: strings.Repeat("a", memgate.DefaultMaxTextBytes+1)}, memgate.CodeTooLarge, "text"},
		{"empty text is refused", memgate.Write{Text: ""}, memgate.CodeInvalidArgument, "text"},
		{"white-space-only text is refused", memgate.Write{Text: " \n\t "}, memgate.CodeInvalidArgument, "text"},
		{"empty text passes with allow_empty", memgate.Write{Text: "", AllowEmpty: true}, "", ""},
		{"invalid UTF-8 text is refused", memgate.Write{Text: "a\xffb"}, memgate.CodeInvalidArgument, "text"},
		{"id of 256 bytes passes", memgate.Write{ID: strings.Repeat("i", 256), Text: "x"}, "", ""},
		{"id of 257 bytes is refused", memgate.Write{ID: strings.Repeat("i", 257), Text: "x"}, memgate.CodeInvalidArgument, "id"},
		{"id with a control character is refused", memgate.Write{ID: "a\nb", Text: "x"}, memgate.CodeInvalidArgument, "id"},
		{"id with NUL is refused", memgate.Write{ID: "a\x00b", Text: "x"}, memgate.CodeInvalidArgument, "id"},
		{"title of 256 characters passes", memgate.Write{Title: strings.Repeat("é", 256), Text: "x"}, "", ""},
		{"title of 257 characters is refused", memgate.Write{Title: strings.Repeat("é", 257), Text: "x"}, memgate.CodeInvalidArgument, "title"},
		{"32 tags pass", memgate.Write{Tags: tags(32), Text: "x"}, "", ""},
		{"33 tags are refused", memgate.Write{Tags: tags(33), Text: "x"}, memgate.CodeInvalidArgument, "tags"},
		{"33 tags with one duplicate pass", memgate.Write{Tags: append(tags(32), "t"), Text: "x"}, "", ""},
		{"tag of 64 characters passes", memgate.Write{Tags: []string{strings.Repeat("ü", 64)}, Text: "x"}, "", ""},
		{"tag of 65 characters is refused", memgate.Write{Tags: []string{strings.Repeat("ü", 65)}, Text: "x"}, memgate.CodeInvalidArgument, "tags"},
		{"empty tag is refused", memgate.Write{Tags: []string{""}, Text: "x"}, memgate.CodeInvalidArgument, "tags"},
		{"tag with a space is refused", memgate.Write{Tags: []string{"a b"}, Text: "x"}, memgate.CodeInvalidArgument, "tags"},
		{"tag with every allowed punctuation passes", memgate.Write{Tags: []string{"a_b-c.d:e/f"}, Text: "x"}, "", ""},
		{"32 metadata keys pass", memgate.Write{Metadata: meta(32), Text: "x"}, "", ""},
		{"33 metadata keys are refused", memgate.Write{Metadata: meta(33), Text: "x"}, memgate.CodeInvalidArgument, "metadata"},
		{"metadata key of 64 characters passes", memgate.Write{Metadata: map[string]any{strings.Repeat("k", 64): 1}, Text: "x"}, "", ""},
		{"metadata key of 65 characters is refused", memgate.Write{Metadata: map[string]any{strings.Repeat("k", 65): 1}, Text: "x"}, memgate.CodeInvalidArgument, "metadata"},
		{"metadata key with a space is refused", memgate.Write{Metadata: map[string]any{"a b": 1}, Text: "x"}, memgate.CodeInvalidArgument, "metadata"},
		{"nested metadata is refused", memgate.Write{Metadata: map[string]any{"a": map[string]any{}}, Text: "x"}, memgate.CodeInvalidArgument, "metadata"},
		{"metadata array is refused", memgate.Write{Metadata: map[string]any{"a": []any{1}}, Text: "x"}, memgate.CodeInvalidArgument, "metadata"},
		{"metadata of 8 KiB passes", memgate.Write{Metadata: map[string]any{"k": strings.Repeat("v", 8192-8)}, Text: "x"}, "", ""},
		{"metadata of 8 KiB plus one byte is refused", memgate.Write{Metadata: map[string]any{"k": strings.Repeat("v", 8192-7)}, Text: "x"}, memgate.CodeInvalidArgument, "metadata"},
		{"negative if_version is refused", memgate.Write{Text: "x", IfVersion: ptr(int64(-1))}, memgate.CodeInvalidArgument, "if_version"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, _, err := s.Put(ctx, tc.w)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("Put: %v", err)
				}
				got, err := s.Get(ctx, m.ID)
				if err != nil || got.Text != tc.w.Text {
					t.Fatalf("Get after Put: %v, text equal %v", err, got.Text == tc.w.Text)
				}
				return
			}
			wantCode(t, err, tc.code, tc.field)
		})
	}
}

func TestRoundTripIsExact(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	texts := []string{
		"  leading and trailing white space  \n",
		"\ttabs\tand\r\nCRLF\r\n",
		"emoji 🧠💾 and a family 👨‍👩‍👧",
		"中文文本和日本語のテキスト、한국어",
		"combining marks: e\u0301 a\u0308 n\u0303",
		"right-to-left: שלום עולם مرحبا",
		"zero width\u200bjoiner\u200d",
		"x",
	}
	for _, text := range texts {
		m := put(t, s, memgate.Write{Text: text, Title: "t", Tags: []string{"a", "b", "a"}, Metadata: map[string]any{"n": 1.5, "s": "v", "b": true, "z": nil}})
		got, err := s.Get(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Text != text || got.Bytes != len(text) {
			t.Errorf("text %q came back as %q (bytes %d)", text, got.Text, got.Bytes)
		}
		if strings.Join(got.Tags, ",") != "a,b" {
			t.Errorf("tags = %v, want [a b] (duplicates dropped, order kept)", got.Tags)
		}
		if got.Metadata["n"] != 1.5 || got.Metadata["s"] != "v" || got.Metadata["b"] != true || got.Metadata["z"] != nil || len(got.Metadata) != 4 {
			t.Errorf("metadata = %v", got.Metadata)
		}
		if got.Version != m.Version || !got.CreatedAt.Equal(m.CreatedAt) || got.CreatedAt.Location().String() != "UTC" {
			t.Errorf("got %+v, put returned %+v", got, m)
		}
	}
}

func TestNewMemoryHasDefaults(t *testing.T) {
	s := openTest(t)
	m := put(t, s, memgate.Write{Text: "hello"})
	if m.Tags == nil || m.Metadata == nil {
		t.Fatalf("tags %v and metadata %v must be empty, not nil", m.Tags, m.Metadata)
	}
	if len(m.ID) != 36 || m.ID[14] != '7' {
		t.Fatalf("generated id %q is not a UUIDv7", m.ID)
	}
	n := put(t, s, memgate.Write{Text: "world"})
	if n.ID <= m.ID {
		t.Fatalf("UUIDv7 ids must sort by creation: %q then %q", m.ID, n.ID)
	}
}

func TestReplaceKeepsCreatedAtAndVersionNeverRepeats(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	seen := map[int64]bool{}
	a, created, err := s.Put(ctx, memgate.Write{ID: "a", Text: "one"})
	if err != nil || !created {
		t.Fatalf("first put: created=%v err=%v", created, err)
	}
	seen[a.Version] = true
	b, created, err := s.Put(ctx, memgate.Write{ID: "a", Text: "two"})
	if err != nil || created {
		t.Fatalf("replace: created=%v err=%v", created, err)
	}
	if !b.CreatedAt.Equal(a.CreatedAt) || b.Version <= a.Version {
		t.Fatalf("replace: created %v→%v, version %d→%d", a.CreatedAt, b.CreatedAt, a.Version, b.Version)
	}
	seen[b.Version] = true
	if err := s.Delete(ctx, "a", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "a"); memgate.ErrorCode(err) != memgate.CodeNotFound {
		t.Fatalf("get after forget: %v", err)
	}
	c := put(t, s, memgate.Write{ID: "a", Text: "three"})
	if seen[c.Version] || c.Version <= b.Version {
		t.Fatalf("re-created memory reused version %d", c.Version)
	}
}

func TestCompareAndSet(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	_, _, err := s.Put(ctx, memgate.Write{ID: "k", Text: "v", IfVersion: ptr(int64(5))})
	wantCode(t, err, memgate.CodeVersionConflict, "")
	a, _, err := s.Put(ctx, memgate.Write{ID: "k", Text: "v1", IfVersion: ptr(int64(0))})
	if err != nil {
		t.Fatalf("create-only on a new id: %v", err)
	}
	_, _, err = s.Put(ctx, memgate.Write{ID: "k", Text: "v2", IfVersion: ptr(int64(0))})
	wantCode(t, err, memgate.CodeVersionConflict, "")
	if got := err.(*memgate.Error).Details["current_version"]; got != uint64(a.Version) {
		t.Fatalf("current_version = %v, want %d", got, a.Version)
	}
	b, _, err := s.Put(ctx, memgate.Write{ID: "k", Text: "v2", IfVersion: &a.Version})
	if err != nil {
		t.Fatalf("put with the current version: %v", err)
	}
	err = s.Delete(ctx, "k", &a.Version)
	wantCode(t, err, memgate.CodeVersionConflict, "")
	if err := s.Delete(ctx, "k", &b.Version); err != nil {
		t.Fatalf("forget with the current version: %v", err)
	}
	wantCode(t, s.Delete(ctx, "k", nil), memgate.CodeNotFound, "")
	wantCode(t, s.Delete(ctx, "k", ptr(int64(0))), memgate.CodeInvalidArgument, "if_version")
}

func TestSecondOpenIsStoreLocked(t *testing.T) {
	s := openTest(t)
	_, err := Open(s.Path(), Options{})
	wantCode(t, err, memgate.CodeStoreLocked, "")
}

func TestClosedStoreRefusesWrites(t *testing.T) {
	s := openTest(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.Put(context.Background(), memgate.Write{Text: "x"})
	wantCode(t, err, memgate.CodeUnavailable, "")
}

func TestCancelledContextWritesNothing(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := s.Put(ctx, memgate.Write{ID: "x", Text: "x"})
	wantCode(t, err, memgate.CodeUnavailable, "")
	if _, err := s.Get(context.Background(), "x"); memgate.ErrorCode(err) != memgate.CodeNotFound {
		t.Fatalf("a cancelled write was stored: %v", err)
	}
}

// A store file cut to nothing is damage, not a new store: memgate makes a
// new store's file whole or not at all.
func TestAnEmptyStoreFileIsDamaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Put(context.Background(), memgate.Write{ID: "p1", Text: "precious"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{}); memgate.ErrorCode(err) != memgate.CodeUnavailable || !errors.Is(err, ErrDamaged) {
		t.Fatalf("open of an empty file: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Size() != 0 {
		t.Fatalf("the empty file was written: %d bytes", fi.Size())
	}
	matches, _ := filepath.Glob(path + ".new-*")
	if len(matches) != 0 {
		t.Fatalf("left behind: %v", matches)
	}
}
