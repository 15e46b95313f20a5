package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// defaultGOGC is the collector's target when GOGC is not set. A server's
// live heap is small (the open stores' caches, ~20 MB) and every call makes
// short-lived garbage (the MCP SDK's decoders above all): at Go's default of
// 100 the collector runs every few hundred calls and takes a quarter of the
// CPU. At 400 it runs a quarter as often, for a peak heap of about five
// times the live one; the container's memory limit, when there is one,
// bounds it (memoryLimit).
const defaultGOGC = 400

// memoryLimitShare is the part of the container's memory limit the Go heap
// may use before the collector works harder to stay under it; the rest is
// the mmap'd store files' pages, stacks and the runtime's own.
const memoryLimitShare = 0.8

// setGCPolicy applies serve's collector policy: GOGC and GOMEMLIMIT, when
// set, are the runtime's and are left alone; otherwise GOGC is
// defaultGOGC and the memory limit a share of the cgroup's, if any.
func setGCPolicy(getenv func(string) string, cgroupRoot string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGOGC)
	}
	if getenv("GOMEMLIMIT") == "" {
		if limit := cgroupMemoryLimit(cgroupRoot); limit > 0 {
			debug.SetMemoryLimit(int64(float64(limit) * memoryLimitShare))
		}
	}
}

// cgroupMemoryLimit is the memory limit of the process's cgroup under root
// (/sys/fs/cgroup): cgroup v2's memory.max, or v1's
// memory/memory.limit_in_bytes; 0 when there is none or it cannot be read.
func cgroupMemoryLimit(root string) int64 {
	for _, name := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		// v1 writes a page-rounded maximum of int64 for "no limit".
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0
		}
		return n
	}
	return 0
}
