//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package pgtest

import (
	"errors"
	"os"
	"syscall"
)

// flock takes f's lock, shared or exclusive, waiting for it; on a file
// that holds one already it converts it.
func flock(f *os.File, exclusive bool) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
