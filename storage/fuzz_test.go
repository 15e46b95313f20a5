package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate"
)

// FuzzImport feeds arbitrary JSON Lines to Import: it must never panic, must
// answer with a typed error, and what it reports imported must be readable
// and findable.
func FuzzImport(f *testing.F) {
	for _, s := range []string{
		`{"memgate_export":1}` + "\n" + `{"id":"a","text":"hello world","tags":["x"],"metadata":{"k":1}}`,
		`{"type":"entity","name":"Ada","entityType":"person","observations":["math"]}`,
		`{"type":"relation","from":"a","to":"b","relationType":"knows"}`,
		`{"text":""}`, `{"text":"a","created_at":"2020-01-01T00:00:00Z"}`, `[1,2]`, `{"text":1}`, "\n\n{}",
		`{"type":"entity","name":"","observations":[]}`, `{"id":"a\u0000b","text":"x"}`,
	} {
		f.Add(s)
	}
	s := openTest(f)
	f.Fuzz(func(t *testing.T, input string) {
		ctx := context.Background()
		rep, err := s.Import(ctx, strings.NewReader(input), ImportOverwrite)
		if err != nil {
			if c := memgate.ErrorCode(err); c != memgate.CodeInvalidArgument && c != memgate.CodeTooLarge {
				t.Fatalf("Import: %v", err)
			}
			return
		}
		if rep.Imported < 0 || rep.Lines < 0 {
			t.Fatalf("report %+v", rep)
		}
	})
}

// damageFixture writes a small store to a file and returns its bytes: some
// memories merged into the postings, some in the tail, a replace, a forget
// and a candidate.
func damageFixture(t testing.TB) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(path, Options{NoSync: true, MergeEvery: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 40 { // the docs bucket spans pages, under a branch page
		w := memgate.Write{ID: fmt.Sprint("m", i), Text: fmt.Sprintf("memory %d about alpha beta gamma, word%d. %s", i, i,
			strings.Repeat(fmt.Sprint("filler", i%7, " "), 30)),
			Title: fmt.Sprint("title ", i), Tags: []string{"t", fmt.Sprint("t", i%3)},
			Metadata: map[string]any{"n": i, "kind": "note"}}
		if _, _, err := s.Put(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Put(ctx, memgate.Write{ID: "m2", Text: "memory 2 replaced, delta"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "m5", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Propose(ctx, memgate.Write{ID: "c1", Text: "a candidate about alpha"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// exerciseDamaged opens the store file at path and runs every kind of call
// on it. Each must answer, and a failure must be the store's own:
// unavailable (or not_found for a memory the damage hid). It returns the
// calls' errors.
func exerciseDamaged(t testing.TB, path string) []error {
	t.Helper()
	ctx := context.Background()
	var (
		errs    []error
		damaged bool
	)
	check := func(call string, err error) {
		t.Helper()
		switch memgate.ErrorCode(err) {
		case "", memgate.CodeNotFound, memgate.CodeUnavailable:
		default:
			t.Errorf("%s: %v", call, err)
		}
		var e *memgate.Error
		if err != nil && !errors.As(err, &e) {
			t.Errorf("%s: %v is not a *memgate.Error", call, err)
		}
		if damaged && call != "Close" && !errors.Is(err, ErrDamaged) {
			t.Errorf("%s after the store was found damaged: err = %v, want the damaged store's", call, err)
		}
		damaged = damaged || errors.Is(err, ErrDamaged)
		errs = append(errs, err)
	}
	s, err := Open(path, Options{NoSync: true, MergeEvery: 4, LockTimeout: time.Second})
	check("Open", err)
	if err != nil {
		return errs
	}
	_, err = s.Get(ctx, "m1")
	check("Get", err)
	_, err = s.Get(ctx, "m7")
	check("Get", err)
	for _, q := range []memgate.Query{{Text: "alpha"}, {Text: "delta word3"}, {Tags: []string{"t1"}},
		{Text: "memory", Filter: map[string]any{"kind": "note"}}} {
		_, err = s.Search(ctx, q)
		check("Search", err)
	}
	for _, order := range []string{memgate.OrderUpdatedDesc, memgate.OrderCreatedAsc, memgate.OrderCreatedDesc} {
		_, err = s.List(ctx, memgate.ListQuery{Order: order, Limit: 3})
		check("List", err)
	}
	_, err = s.List(ctx, memgate.ListQuery{Tags: []string{"t"}, Filter: map[string]any{"n": 3}})
	check("List", err)
	_, err = s.Stats(ctx)
	check("Stats", err)
	_, err = s.Candidates(ctx, "", 10)
	check("Candidates", err)
	_, _, err = s.Export(ctx, io.Discard, "", 0)
	check("Export", err)
	_, err = s.Backup(ctx, io.Discard)
	check("Backup", err)
	_, _, err = s.Put(ctx, memgate.Write{ID: "m1", Text: "a replace after the damage, alpha"})
	check("Put", err)
	for i := range 6 { // enough to merge the tail
		_, _, err = s.Put(ctx, memgate.Write{Text: fmt.Sprint("a new memory after the damage, epsilon ", i)})
		check("Put", err)
	}
	check("Delete", s.Delete(ctx, "m3", nil))
	_, err = s.Approve(ctx, "c1")
	check("Approve", err)
	_, err = s.Search(ctx, memgate.Query{Text: "epsilon alpha"})
	check("Search", err)
	check("Close", s.Close())
	return errs
}

// FuzzDamagedStore damages a real store file, byte flips at offsets and a
// truncation, then opens it and calls it every way: never a crash or a
// hang, only the errors of a damaged store.
func FuzzDamagedStore(f *testing.F) {
	fixture := damageFixture(f)
	for _, seed := range []struct {
		trunc uint32
		ops   []byte
	}{
		{0, nil},
		{0, damageOps(0x10, 0xff)},               // the first meta page's magic
		{0, damageOps(0x10, 0xff, 0x1010, 0xff)}, // both meta pages
		{0, damageOps(0x2000+0x10, 0x01)},        // a page's flags
		{0, damageOps(0x3000+0x18, 0x7f)},
		{uint32(len(fixture) / 2), nil},
		{4096 + 100, nil},
		{0, damageOps(0x4000+0x10, 0x02, 0x5000+0x20, 0x80, 0x6000+0x40, 0x40)},
	} {
		f.Add(seed.trunc, seed.ops)
	}
	f.Fuzz(func(t *testing.T, trunc uint32, ops []byte) {
		b := damage(fixture, trunc, ops)
		path := filepath.Join(t.TempDir(), FileName)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		exerciseDamaged(t, path)
	})
}

// damageOps encodes byte flips for damage: offset, then the bits to flip.
func damageOps(offsetXor ...int) []byte {
	var b []byte
	for i := 0; i+1 < len(offsetXor); i += 2 {
		b = binary.BigEndian.AppendUint32(b, uint32(offsetXor[i]))
		b = append(b, byte(offsetXor[i+1]))
	}
	return b
}

// damage returns a copy of file with the flips of ops applied (five bytes
// each: an offset, taken modulo the size, and the bits to flip), cut to
// trunc bytes when trunc is not 0 (modulo the size).
func damage(file []byte, trunc uint32, ops []byte) []byte {
	b := bytes.Clone(file)
	for ; len(ops) >= 5; ops = ops[5:] {
		off := binary.BigEndian.Uint32(ops) % uint32(len(b))
		b[off] ^= ops[4]
	}
	if trunc != 0 {
		b = b[:trunc%uint32(len(b))]
	}
	return b
}
