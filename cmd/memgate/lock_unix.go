//go:build unix

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// openLock is os.OpenFile; a variable for tests.
var openLock = os.OpenFile

// lockHTTP takes the data folder's HTTP lock, without waiting.
func lockHTTP(dataDir string) (func(), error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	path := filepath.Join(dataDir, httpLockFile)
	f, err := openLock(path, os.O_RDWR|os.O_CREATE, 0o600)
	if errors.Is(err, syscall.EROFS) {
		// A read-only data folder is served: its stores answer reads, and
		// writes fail unavailable, saying why. The lock is taken on the file
		// if it is there (flock needs no write access); if it is not, no
		// server could have made it, and on the folder itself, which every
		// server of a folder read-only to all of them locks alike.
		if f, err = openLock(path, os.O_RDONLY, 0); errors.Is(err, fs.ErrNotExist) {
			f, err = openLock(dataDir, os.O_RDONLY, 0)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("--data-dir: the HTTP lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, usageError{errServedOverHTTP}
		}
		return nil, fmt.Errorf("--data-dir: the HTTP lock: %w", err)
	}
	return func() { f.Close() }, nil
}

// lockedByAnother reports whether f is a file another process holds locked,
// as bbolt holds the store it has open.
func lockedByAnother(f *os.File) bool {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// processAlive reports whether a process of pid runs (or may: one of
// another user's, which cannot be signalled, counts as running). A zombie,
// killed and not yet reaped by its parent, runs no more.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil {
		return errors.Is(err, syscall.EPERM)
	}
	// /proc/PID/stat: "PID (comm) S ...", comm possibly holding ") ".
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if i := bytes.LastIndexByte(stat, ')'); err == nil && i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}
