package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/memgate/memgate"
)

// queued waits until n writes wait in the committer's queue.
func queued(c *committer, n int) {
	for {
		c.mu.Lock()
		l := len(c.queue)
		c.mu.Unlock()
		if l >= n {
			return
		}
		runtime.Gosched()
	}
}

// A write that panics, alone or with others queued behind and beside it,
// fails with an error; the others land, the committer goes on taking
// writes, and Close returns.
func TestPanickingWriteDoesNotWedgeTheCommitter(t *testing.T) {
	ctx := context.Background()
	for _, lead := range []bool{true, false} {
		t.Run(fmt.Sprintf("the panicking write leads: %v", lead), func(t *testing.T) {
			s := openTest(t)
			release := make(chan struct{})
			var wg sync.WaitGroup
			errs := make([]error, 6)
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[0] = s.write.do(func(t *txn) error {
					<-release
					if lead {
						panic("a bug in a write")
					}
					return nil
				})
			}()
			waitLeading(s.write)
			for i := 1; i < len(errs); i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if i == 3 && !lead {
						errs[i] = s.write.do(func(t *txn) error { panic("a bug in a queued write") })
						return
					}
					_, _, errs[i] = s.Put(ctx, memgate.Write{ID: fmt.Sprint("m", i), Text: "queued behind a panic"})
				}()
			}
			queued(s.write, len(errs)-1)
			close(release)
			wg.Wait()
			bad := 3
			if lead {
				bad = 0
			}
			for i, err := range errs {
				switch {
				case i == bad && memgate.ErrorCode(err) != memgate.CodeInternal:
					t.Errorf("panicking write: err = %v, want internal", err)
				case i != bad && i != 0 && err != nil:
					t.Errorf("write %d: %v", i, err)
				}
			}
			for i := 1; i < len(errs); i++ {
				if i == bad {
					continue
				}
				if _, err := s.Get(ctx, fmt.Sprint("m", i)); err != nil {
					t.Errorf("Get m%d: %v", i, err)
				}
			}
			if _, _, err := s.Put(ctx, memgate.Write{ID: "after", Text: "a write after the panic"}); err != nil {
				t.Fatalf("write after the panic: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
		})
	}
}

// wantDamaged checks that err is the error of a damaged store.
func wantDamaged(t testing.TB, what string, err error) bool {
	t.Helper()
	var e *memgate.Error
	if !errors.As(err, &e) || e.Code != memgate.CodeUnavailable || !strings.Contains(e.Message, "damaged") ||
		!strings.Contains(e.Message, "backup") {
		t.Errorf("%s: err = %v, want unavailable: damaged", what, err)
		return false
	}
	return true
}

// A damaged store file, damaged in each way a disk or a person can damage
// it, fails its own calls with unavailable (or, where the damage hid a
// memory, not_found), never crashes the process, and leaves other stores
// alone.
func TestDamagedStoreFailsItsOwnCalls(t *testing.T) {
	fixture := damageFixture(t)
	const page = 4096
	pages := len(fixture) / page
	type damageCase struct {
		name        string
		file        []byte
		wantDamaged bool // the damage is certain to be found
	}
	var cases []damageCase
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 8 {
		b := bytes.Clone(fixture)
		for range 4 << trial % 64 {
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		}
		cases = append(cases, damageCase{name: fmt.Sprint("random flips, trial ", trial), file: b})
	}
	for _, n := range []int{1, 100, page + 100, 2 * page, 3 * page, len(fixture) / 2, len(fixture) - 1} {
		cases = append(cases, damageCase{name: fmt.Sprint("cut to ", n, " bytes"), file: fixture[:n], wantDamaged: n < 2*page})
	}
	for p := range pages {
		b := bytes.Clone(fixture)
		clear(b[p*page : (p+1)*page])
		cases = append(cases, damageCase{name: fmt.Sprint("page ", p, " zeroed"), file: b})
	}
	for p := range pages {
		b := bytes.Clone(fixture)
		for i := p * page; i < (p+1)*page; i++ {
			b[i] = byte(rng.Uint32())
		}
		cases = append(cases, damageCase{name: fmt.Sprint("page ", p, " overwritten with noise"), file: b})
	}
	both := bytes.Clone(fixture)
	clear(both[16:64])
	clear(both[page+16 : page+64])
	cases = append(cases, damageCase{name: "both meta pages corrupt", file: both, wantDamaged: true})
	one := bytes.Clone(fixture)
	one[page+20] ^= 0xff
	cases = append(cases, damageCase{name: "one meta page corrupt", file: one})

	found := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			if err := os.WriteFile(path, c.file, 0o600); err != nil {
				t.Fatal(err)
			}
			errs := exerciseDamaged(t, path)
			if c.wantDamaged && !errors.Is(errs[0], ErrDamaged) {
				t.Errorf("Open: err = %v, want the damaged store's", errs[0])
			}
			for _, err := range errs {
				if errors.Is(err, ErrDamaged) {
					wantDamaged(t, "a damaged store's call", err)
					found++
					break
				}
			}
		})
	}
	// Random damage may miss every page in use, but not across all cases.
	if found < len(cases)/3 {
		t.Errorf("damage found in %d of %d cases", found, len(cases))
	}
	s := openTest(t)
	put(t, s, memgate.Write{ID: "healthy", Text: "another store is unaffected"})
	if _, err := s.Get(context.Background(), "healthy"); err != nil {
		t.Fatal(err)
	}
}

// A damaged store's file is closed when the store closes: the lock is
// released, and a restored file opens in its place.
func TestDamagedStoreReleasesItsFile(t *testing.T) {
	fixture := damageFixture(t)
	path := filepath.Join(t.TempDir(), FileName)
	b := bytes.Clone(fixture)
	clear(b[16:64])
	clear(b[4096+16 : 4096+64])
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{NoSync: true}); !wantDamaged(t, "Open", err) {
		return
	}
	if err := os.WriteFile(path, fixture, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatalf("Open of the restored file: %v", err)
	}
	defer s.Close()
	if _, err := s.Get(context.Background(), "m1"); err != nil {
		t.Fatalf("Get from the restored file: %v", err)
	}
}

// bboltPages finds, in a store file, the pages of each type the page check
// guards (bbolt's layout: see checkPages), and the meta of the last commit.
type bboltPages struct {
	branch, leaf, freelist int // page ids; leaf has a bucket element
	metaOff                int // offset of the current meta
}

func findPages(t *testing.T, b []byte) bboltPages {
	t.Helper()
	const ps = 4096
	var found bboltPages
	var txid uint64
	for id := range 2 {
		m := b[id*ps+pageHeader:]
		if tx := binary.NativeEndian.Uint64(m[metaTxid:]); tx >= txid {
			txid, found.metaOff = tx, id*ps+pageHeader
		}
	}
	found.freelist = int(binary.NativeEndian.Uint64(b[found.metaOff+metaFreelist:]))
	root := int(binary.NativeEndian.Uint64(b[found.metaOff+metaRoot:]))
	found.leaf = root // the root bucket: a leaf of bucket elements
	page := b[root*ps:]
	for i := range int(binary.NativeEndian.Uint16(page[10:])) {
		off := pageHeader + i*elementSize
		e := page[off:]
		pos, ksize := int(binary.NativeEndian.Uint32(e[4:])), int(binary.NativeEndian.Uint32(e[8:]))
		broot := int(binary.NativeEndian.Uint64(page[off+pos+ksize:]))
		if broot != 0 && binary.NativeEndian.Uint16(b[broot*ps+8:]) == branchPage {
			found.branch = broot // a bucket of more than one page: docs
		}
	}
	if binary.NativeEndian.Uint16(b[root*ps+8:]) != leafPage || found.branch == 0 ||
		binary.NativeEndian.Uint16(b[found.freelist*ps+8:]) != freelistPage {
		t.Fatalf("fixture layout not as expected: %+v", found)
	}
	return found
}

// Damage that bbolt does not panic on, but would act on, is found when the
// store opens: a value size of gigabytes (the next write would allocate and
// write that much), a branch page that is its own child (a read would
// recurse until the stack runs out, which kills the process), and a page in
// use that the freelist offers (a write would overwrite it).
func TestOpenFindsDamageBboltWouldActOn(t *testing.T) {
	fixture := damageFixture(t)
	pg := findPages(t, fixture)
	const ps = 4096
	cases := []struct {
		name   string
		damage func(b []byte)
	}{
		{"a value of gigabytes", func(b []byte) {
			e := b[pg.leaf*ps+pageHeader:]
			binary.NativeEndian.PutUint32(e[12:], 1<<31) // vsize of the first element
		}},
		{"a key past its page", func(b []byte) {
			e := b[pg.branch*ps+pageHeader:]
			binary.NativeEndian.PutUint32(e[4:], ps) // ksize of the first element
		}},
		{"a branch page that is its own child", func(b []byte) {
			e := b[pg.branch*ps+pageHeader:]
			binary.NativeEndian.PutUint64(e[8:], uint64(pg.branch))
		}},
		{"a child past the end of the data", func(b []byte) {
			e := b[pg.branch*ps+pageHeader:]
			binary.NativeEndian.PutUint64(e[8:], 1<<40)
		}},
		{"a page in use on the freelist", func(b []byte) {
			p := b[pg.freelist*ps:]
			n := binary.NativeEndian.Uint16(p[10:])
			binary.NativeEndian.PutUint64(p[pageHeader+8*int(n):], uint64(pg.branch))
			binary.NativeEndian.PutUint16(p[10:], n+1)
		}},
		{"a root page of the wrong type", func(b []byte) {
			binary.NativeEndian.PutUint16(b[pg.leaf*ps+8:], freelistPage)
		}},
		{"an overflow past the end of the data", func(b []byte) {
			binary.NativeEndian.PutUint32(b[pg.branch*ps+12:], 1<<20)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := bytes.Clone(fixture)
			c.damage(b)
			path := filepath.Join(t.TempDir(), FileName)
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(path, Options{NoSync: true})
			if err == nil {
				s.Close()
			}
			wantDamaged(t, "Open", err)
		})
	}
	// The undamaged fixture passes the same check.
	path := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path, fixture, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatalf("Open of the undamaged file: %v", err)
	}
	s.Close()
}

// BenchmarkOpenChecked opens a store of 50,000 memories (about 24 MB) and
// closes it: the cost of the page check at open, against BenchmarkOpenClose.
func BenchmarkOpenChecked(b *testing.B) {
	s, _ := benchStore(b, 50000, false)
	path := s.Path()
	s.Close()
	b.ReportAllocs()
	for b.Loop() {
		s, err := Open(path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// A file cut short while its store is open fails a backup as damage.
func TestBackupOfAFileCutShortIsDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path, damageFixture(t), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := os.Truncate(path, 3*4096); err != nil {
		t.Fatal(err)
	}
	_, err = s.Backup(context.Background(), io.Discard)
	wantDamaged(t, "Backup", err)
	_, err = s.Get(context.Background(), "m1")
	wantDamaged(t, "Get after the damage was found", err)
}

// fullDisk fails every write after the first limit bytes as a full disk
// does.
type fullDisk struct{ limit int }

func (d *fullDisk) Write(p []byte) (int, error) {
	if len(p) > d.limit {
		n := d.limit
		d.limit = 0
		return n, syscall.ENOSPC
	}
	d.limit -= len(p)
	return len(p), nil
}

// A backup whose copy meets a full disk says so, wherever in the file it
// does (bbolt words the failures of its first pages' writes anew), and is
// unavailable, not internal.
func TestBackupOntoAFullDiskSaysSo(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), FileName), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Put(context.Background(), memgate.Write{ID: "a", Text: "some text"}); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{0, 4096, 3 * 4096} { // the first meta page, the second, a data page
		_, err := s.Backup(context.Background(), &fullDisk{limit: limit})
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("full after %d bytes: %v, want ENOSPC in its chain", limit, err)
		}
		if err := StoreError("test", err); memgate.ErrorCode(err) != memgate.CodeUnavailable || !strings.Contains(err.Error(), "disk is full") {
			t.Fatalf("full after %d bytes: %v (%s)", limit, err, memgate.ErrorCode(err))
		}
	}
	if _, err := s.Get(context.Background(), "a"); err != nil {
		t.Fatalf("the store after the failed backups: %v", err)
	}
}

// waitLeading returns once a write leads c's next commit.
func waitLeading(c *committer) {
	for {
		c.mu.Lock()
		leading := c.leading
		c.mu.Unlock()
		if leading {
			return
		}
		runtime.Gosched()
	}
}
