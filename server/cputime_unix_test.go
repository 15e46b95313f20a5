//go:build unix

package server_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the process has used, user and system, every
// goroutine's: what a benchmark's background work (an exporter, a
// receiver) costs as well as its loop.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
