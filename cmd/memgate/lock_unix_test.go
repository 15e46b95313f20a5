//go:build unix

package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// On a read-only data folder the HTTP lock is taken on the lock file if
// it is there, and not needed if it is not: the server starts, and its
// stores answer reads (writes fail unavailable, saying why).
func TestHTTPLockOnAReadOnlyDataFolder(t *testing.T) {
	readOnly := func(path string, flag int, perm fs.FileMode) (*os.File, error) {
		if flag&(os.O_RDWR|os.O_WRONLY|os.O_CREATE) != 0 {
			return nil, &os.PathError{Op: "open", Path: path, Err: syscall.EROFS}
		}
		return os.OpenFile(path, flag, perm)
	}
	was := openLock
	defer func() { openLock = was }()

	// No lock file: the folder itself is locked, so a second server of
	// the read-only folder is refused too.
	dir := t.TempDir()
	openLock = readOnly
	unlock, err := lockHTTP(dir)
	if err != nil {
		t.Fatalf("a read-only data folder without a lock file: %v", err)
	}
	if _, err := lockHTTP(dir); !errors.As(err, new(usageError)) {
		t.Fatalf("a second server of a read-only data folder without a lock file: %v, want the one-line refusal", err)
	}
	unlock()
	if unlock, err = lockHTTP(dir); err != nil {
		t.Fatalf("the read-only folder's lock, let go: %v", err)
	}
	unlock()

	// A lock file another server holds: refused as on a writable folder.
	openLock = was
	held, err := lockHTTP(dir)
	if err != nil {
		t.Fatal(err)
	}
	openLock = readOnly
	if _, err := lockHTTP(dir); !errors.As(err, new(usageError)) {
		t.Fatalf("a read-only data folder another server holds: %v, want the one-line refusal", err)
	}
	held()
	// Free again: taken through the read-only file.
	unlock, err = lockHTTP(dir)
	if err != nil {
		t.Fatalf("a read-only data folder whose lock file is free: %v", err)
	}
	unlock()
	if _, err := os.Stat(filepath.Join(dir, httpLockFile)); err != nil {
		t.Fatal(err)
	}
}

// A backup folder left by a process that no longer runs is swept when a
// server starts; one of a running process stays.
func TestStaleBackupFoldersAreSwept(t *testing.T) {
	stores := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(stores, backupDirPrefix+strconv.Itoa(dead.Process.Pid)+"-123")
	mine := filepath.Join(stores, backupDirPrefix+strconv.Itoa(os.Getpid())+"-456")
	other := filepath.Join(stores, "team-a")
	// A process killed and not yet reaped (a zombie) is gone too.
	zombie := exec.Command("sleep", "60")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	defer zombie.Wait()
	zombie.Process.Kill()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here to tell a zombie by")
	}
	for i := 0; i < 500 && processAlive(zombie.Process.Pid); i++ {
		time.Sleep(10 * time.Millisecond) // until the kill lands
	}
	unreaped := filepath.Join(stores, backupDirPrefix+strconv.Itoa(zombie.Process.Pid)+"-789")
	for _, d := range []string{gone, mine, other, unreaped} {
		if err := os.MkdirAll(filepath.Join(d, "x"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sweepBackupDirs(stores)
	for _, d := range []string{gone, unreaped} {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the folder of a process that ended (%s): %v", filepath.Base(d), err)
		}
	}
	for _, d := range []string{mine, other} {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("%s was swept: %v", filepath.Base(d), err)
		}
	}
}
