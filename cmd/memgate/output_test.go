package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/memgate/memgate"
)

// A copy that meets a full disk fails unavailable, saying so, whichever
// step met it, and leaves neither the file nor a temporary one behind.
func TestOutputOntoAFullDiskSaysSo(t *testing.T) {
	dir := t.TempDir()
	out, err := openOutput(t.TempDir(), filepath.Join(dir, "copy.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	full := &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}
	for _, fail := range []error{full, memgate.Wrap("storage.Backup", full)} {
		err := out.write(func(*os.File) error { return fail })
		if memgate.ErrorCode(err) != memgate.CodeUnavailable || !strings.Contains(err.Error(), "disk is full") {
			t.Errorf("%v: %v (%s)", fail, err, memgate.ErrorCode(err))
		}
	}
	other := errors.New("another failure")
	if err := out.write(func(*os.File) error { return other }); !errors.Is(err, other) {
		t.Errorf("another failure became %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(dir, "copy.db")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the copy: %v", err)
	}
}
