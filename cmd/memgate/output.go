package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

// output is the file a copy (backup, export --out) replaces: the folder it
// is in, opened once and checked, and its name there. Every step after the
// check goes through the open folder, so a link swapped into the path
// meanwhile cannot send the copy, or its temporary file, anywhere else.
type output struct {
	dir  *os.Root
	name string
	path string // as given, for messages
}

// outputChecked, when set by a test, runs between the checks and the copy.
var outputChecked func()

// openOutput opens path's folder and refuses, before anything is read, a
// file that the copy must not replace, as it replaces it by renaming a new
// file over it: one in the data folder's stores (a store replaced under
// the server holding it would lose what it acknowledged), one a process
// holds as its store, and one that is not a regular file (a device, a
// folder, a link).
func openOutput(dataDir, path string) (*output, error) {
	dir, err := os.OpenRoot(filepath.Dir(path))
	if errors.Is(err, fs.ErrNotExist) {
		// The caller's mistake, not the store's.
		return nil, fmt.Errorf("%s: no such folder; create it, or write the copy elsewhere", filepath.Dir(path))
	}
	if err != nil {
		return nil, err
	}
	o := &output{dir: dir, name: filepath.Base(path), path: path}
	if err := o.checkFolder(dataDir); err != nil {
		dir.Close()
		return nil, err
	}
	if err := o.checkFile(); err != nil {
		dir.Close()
		return nil, err
	}
	if outputChecked != nil {
		outputChecked()
	}
	return o, nil
}

func (o *output) Close() error { return o.dir.Close() }

// checkFolder refuses a folder in the data folder's stores. Where the open
// folder is, links resolved, is its path's resolution at a moment it was
// still the same folder (a folder has one name).
func (o *output) checkFolder(dataDir string) error {
	opened, err := o.dir.Stat(".")
	if err != nil {
		return err
	}
	folder, err := filepath.Abs(filepath.Dir(o.path))
	if err == nil {
		folder, err = filepath.EvalSymlinks(folder)
	}
	var named fs.FileInfo
	if err == nil {
		named, err = os.Stat(folder)
	}
	if err != nil || !os.SameFile(opened, named) {
		return usageError{fmt.Errorf("the folder of %s changed while it was checked", o.path)}
	}
	if inside(tenants.StoresDir(dataDir), folder) {
		return usageError{fmt.Errorf("%s is in the data folder's stores; write the copy elsewhere", o.path)}
	}
	return nil
}

// checkFile refuses a name that is a link or not a regular file, or a
// store a process holds.
func (o *output) checkFile() error {
	fi, err := o.dir.Lstat(o.name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		return usageError{fmt.Errorf("%s is a link, not a regular file; the copy replaces the file it names, so name the file itself", o.path)}
	case !fi.Mode().IsRegular():
		return usageError{fmt.Errorf("%s is not a regular file; the copy replaces the file it names", o.path)}
	}
	if f, err := o.dir.Open(o.name); err == nil {
		held := lockedByAnother(f)
		f.Close()
		if held {
			return usageError{fmt.Errorf("%s is a store a running process holds; write the copy elsewhere", o.path)}
		}
	}
	return nil
}

// write writes the file through fn: into a temporary file beside it,
// synced, then renamed over it, so the file is either as it was or whole.
// The name is checked once more just before the rename. A full disk or a
// read-only filesystem is unavailable, saying so.
func (o *output) write(fn func(f *os.File) error) error {
	err := o.writeTemp(fn)
	if e := storage.StoreError("cmd.output", err); memgate.ErrorCode(e) == memgate.CodeUnavailable {
		return e
	}
	return err
}

func (o *output) writeTemp(fn func(f *os.File) error) error {
	tmp := ".memgate-" + rand.Text()
	f, err := o.dir.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer o.dir.Remove(tmp)
	err = fn(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = o.checkFile()
	}
	if err == nil {
		err = o.dir.Rename(tmp, o.name)
	}
	return err
}

// writeTo is write with fn given a plain writer.
func (o *output) writeTo(fn func(w io.Writer) error) error {
	return o.write(func(f *os.File) error { return fn(f) })
}

// inside reports whether folder is dir or within it, links resolved.
func inside(dir, folder string) bool {
	real := func(p string) string {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return p
	}
	rel, err := filepath.Rel(real(dir), real(folder))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
