//go:build !linux

package storage

// mmapFlags are the flags bbolt maps a file with: none beyond its own.
func mmapFlags(int64) int { return 0 }
