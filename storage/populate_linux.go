package storage

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// populateLimit is the largest file whose pages are read in when it is
// mapped. A small store's first search otherwise takes a page fault, and a
// random read from a cold disk, per page it touches; reading a few MiB in
// one sequential pass costs less than that, and a large store's open stays
// a mapping only.
const populateLimit = 4 << 20

// mmapFlags are the flags bbolt maps a file of size bytes with.
func mmapFlags(size int64) int {
	if size > 0 && size <= populateLimit {
		return unix.MAP_POPULATE
	}
	return 0
}

// warm reads the first size bytes of f into the page cache in large
// sequential reads when most of them are not there (mincore of data, bbolt's
// map of f, when there is one). bbolt maps a file for random access
// (MADV_RANDOM), so the page check at open, which visits every page in tree
// order, would otherwise read a cold file one page per fault: 650 ms for a
// 43 MB store on a disk that reads it whole in 50.
func warm(f *os.File, data []byte, size int64) {
	if len(data) > 0 {
		ps := os.Getpagesize()
		vec := make([]byte, (len(data)+ps-1)/ps)
		_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)),
			uintptr(unsafe.Pointer(&vec[0])))
		if errno == 0 {
			missing := 0
			for _, v := range vec {
				missing += int(v&1) ^ 1
			}
			if missing*8 < len(vec) {
				return // mostly in memory already: a copy would cost more
			}
		}
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		if _, err := f.ReadAt(buf, off); err != nil {
			return // the check that follows reports what is wrong
		}
	}
}
