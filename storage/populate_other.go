//go:build !linux

package storage

import "os"

// mmapFlags are the flags bbolt maps a file with: none beyond its own.
func mmapFlags(int64) int { return 0 }

// warm leaves the page cache to the system.
func warm(*os.File, []byte, int64) {}
