package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/memgate/memgate"
)

// smallFS mounts a tmpfs of size bytes for the test and returns its folder.
// It needs root; elsewhere the test is skipped, except under CI=true, where
// it fails, so that CI cannot pass without running it.
func smallFS(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test mounts a small filesystem and needs root (run the storage tests as root)")
		}
		t.Skip("needs root to mount a small filesystem; run as root: go test -run 'TestFullDisk|TestReadOnlyFilesystem' ./storage")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount tmpfs: %v: %s", err, out)
		}
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount: %v: %s", err, out)
		}
	})
	return dir
}

// fill writes a file in dir until the filesystem is full, and returns it.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, n := range []int{1 << 16, 4096, 512, 1} {
		buf := make([]byte, n)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill: %v", err)
				}
				break
			}
		}
	}
	return path
}

// wantCondition fails the test unless err is unavailable and names the
// condition of the disk.
func wantCondition(t *testing.T, err error, condition string) {
	t.Helper()
	var e *memgate.Error
	if !errors.As(err, &e) || e.Code != memgate.CodeUnavailable || !strings.Contains(e.Message, condition) {
		t.Fatalf("error = %v, want unavailable naming %q", err, condition)
	}
}

// readAll checks that every read of the store works and sees n memories.
func readAll(t *testing.T, s *Store, n int) { readSome(t, s, n, n) }

// readSome checks that every read of the store works, on memories m0000 to
// the one before ids, and that the store holds count memories.
func readSome(t *testing.T, s *Store, ids, count int) {
	t.Helper()
	ctx := context.Background()
	n := count
	for _, doc := range []int{0, ids / 2, ids - 1} {
		id := fmt.Sprintf("m%04d", doc)
		if _, err := s.Get(ctx, id); err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		res, err := s.Search(ctx, memgate.Query{Text: word(doc, 3)})
		if err != nil {
			t.Fatalf("search: %v", err)
		}
		if len(res.Hits) != 1 || res.Hits[0].ID != id {
			t.Fatalf("search for a word of %s: %d hits", id, len(res.Hits))
		}
	}
	page, err := s.List(ctx, memgate.ListQuery{Limit: 5})
	if err != nil || len(page.Memories) != 5 {
		t.Fatalf("list: %d memories, %v", len(page.Memories), err)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Count != int64(n) {
		t.Fatalf("stats: %d memories, %v; want %d", st.Count, err, n)
	}
	var exp bytes.Buffer
	got, _, err := s.Export(ctx, &exp, "", 0)
	if err != nil || got != n {
		t.Fatalf("export: %d memories, %v; want %d", got, err, n)
	}
	// A backup goes elsewhere than the store's disk.
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := s.BackupFile(ctx, backup); err != nil {
		t.Fatalf("backup: %v", err)
	}
	b, err := Open(backup, Options{NoSync: true})
	if err != nil {
		t.Fatalf("open the backup: %v", err)
	}
	defer b.Close()
	if st, err := b.Stats(ctx); err != nil || st.Count != int64(n) {
		t.Fatalf("backup: %d memories, %v; want %d", st.Count, err, n)
	}
}

// A store whose disk is full opens, answers every read, export and backup,
// refuses writes with unavailable naming the condition, and takes writes
// again once space is freed — also when the disk filled up in the middle of
// a merge, which Open then cannot finish.
func TestFullDisk(t *testing.T) {
	ctx := context.Background()
	dir := smallFS(t, "8m")
	path := filepath.Join(dir, "stores", "default", FileName)
	oldSlice, oldRetry := mergeSlice, mergeRetry
	defer func() { mergeSlice, mergeFault, mergeRetry = oldSlice, nil, oldRetry }()
	mergeSlice, mergeRetry = 256, 0

	opts := Options{NoSync: true, MergeEvery: 1 << 20}
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		put(t, s, memgate.Write{ID: fmt.Sprintf("m%04d", i), Text: distinctWords(i, 12)}) // 3,600 terms: the close merges them
	}
	// The merge at close stops after its first slice: a merge left
	// unfinished, as when the disk fills up under it.
	mergeFault = func(slice int) error {
		if slice == 1 {
			return errors.New("cut short")
		}
		return nil
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	mergeFault = nil
	filler := fill(t, dir)

	s, err = Open(path, opts)
	if err != nil {
		t.Fatalf("open on a full disk: %v", err)
	}
	if !s.index.unmerged {
		t.Fatal("the merge left unfinished was finished on a full disk; the test proves nothing")
	}
	readAll(t, s, n)
	_, _, err = s.Put(ctx, memgate.Write{ID: "new", Text: "a write on a full disk"})
	wantCondition(t, err, "the disk is full")
	wantCondition(t, s.Delete(ctx, "m0001", nil), "the disk is full")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// And again: a full disk never makes the store unreadable.
	if s, err = Open(path, opts); err != nil {
		t.Fatalf("second open on a full disk: %v", err)
	}
	readAll(t, s, n)

	// A new store cannot be made on the full disk, and its failed start
	// leaves nothing that would keep it from being made later.
	// Room for part of its first pages is the worst case.
	if fi, err := os.Stat(filler); err != nil || os.Truncate(filler, fi.Size()-8192) != nil {
		t.Fatal("cannot free 8 KiB")
	}
	other := filepath.Join(dir, "stores", "other", FileName)
	_, err = Open(other, opts)
	wantCondition(t, err, "the disk is full")
	if fi, err := os.Stat(other); err == nil && fi.Size() > 0 {
		t.Fatalf("a failed start left a file of %d bytes", fi.Size())
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	o, err := Open(other, opts)
	if err != nil {
		t.Fatalf("open a new store once space is freed: %v", err)
	}
	put(t, o, memgate.Write{ID: "first", Text: "the first memory of a store made after the disk was full"})
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	put(t, s, memgate.Write{ID: fmt.Sprintf("m%04d", n), Text: distinctWords(n, 40)})
	if s.index.unmerged {
		t.Fatal("writes resumed but the merge is still unfinished")
	}
	// Writes that fill the disk themselves, with no merge pending.
	filler = fill(t, dir)
	var failed error
	for i := n + 1; i < n+200 && failed == nil; i++ {
		_, _, failed = s.Put(ctx, memgate.Write{ID: fmt.Sprintf("m%04d", i), Text: distinctWords(i, 40)})
	}
	wantCondition(t, failed, "the disk is full")
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	m := put(t, s, memgate.Write{ID: "after", Text: "space was freed"})
	if m.ID != "after" {
		t.Fatalf("put returned %q", m.ID)
	}
	count, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkFile(t, path)
	if s, err = Open(path, opts); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	readSome(t, s, n, int(count.Count))
}

// A store on a read-only filesystem opens read-only: reads, export and
// backup work, writes are unavailable naming the condition.
func TestReadOnlyFilesystem(t *testing.T) {
	ctx := context.Background()
	dir := smallFS(t, "8m")
	path := filepath.Join(dir, "stores", "default", FileName)
	opts := Options{NoSync: true, MergeEvery: 64}
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	for i := range n {
		put(t, s, memgate.Write{ID: fmt.Sprintf("m%04d", i), Text: distinctWords(i, 10)})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	remount := func(mode string) {
		t.Helper()
		if out, err := exec.Command("mount", "-o", "remount,"+mode, dir).CombinedOutput(); err != nil {
			t.Fatalf("remount %s: %v: %s", mode, err, out)
		}
	}
	remount("ro")
	defer remount("rw")
	if s, err = Open(path, opts); err != nil {
		t.Fatalf("open on a read-only filesystem: %v", err)
	}
	readAll(t, s, n)
	_, _, err = s.Put(ctx, memgate.Write{ID: "new", Text: "a write on a read-only filesystem"})
	wantCondition(t, err, "the filesystem is read-only")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A store that does not exist yet cannot be made there.
	_, err = Open(filepath.Join(dir, "stores", "other", FileName), opts)
	wantCondition(t, err, "the filesystem is read-only")

	remount("rw")
	if s, err = Open(path, opts); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put(t, s, memgate.Write{ID: "new", Text: "writes work again"})
}
