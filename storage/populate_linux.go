package storage

import "golang.org/x/sys/unix"

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
