//go:build unix

package storage

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapPages maps the first size bytes of f for checkPages, which then reads
// pages without a system call each; nil means it cannot, and checkPages
// reads them with pread. The caller runs under protect: a read past the
// end of a file cut short meanwhile faults.
func mapPages(f *os.File, size int64) ([]byte, func()) {
	if size <= 0 || int64(int(size)) != size {
		return nil, func() {}
	}
	// Read in at once where the system can (mmapFlags of a small file:
	// MAP_POPULATE on Linux): one pass instead of a fault per page.
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED|mmapFlags(1))
	if err != nil {
		return nil, func() {} // pread is slower, not wrong
	}
	return data, func() { unix.Munmap(data) }
}
