// Package measure holds what every benchmark harness of memgate measures
// the same way: percentiles and medians, the disk's fsync floor, and a
// process's CPU time and peak memory from /proc.
package measure

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// WorkDir returns dir, created if needed, or, when dir is "", a new
// temporary folder named after prefix; done removes a temporary folder.
func WorkDir(dir, prefix string) (path string, done func(), err error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o700)
	}
	d, err := os.MkdirTemp("", prefix+"-*")
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}

// US is d in microseconds.
func US(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// Median is the median of xs (the upper one of an even count); 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// Percentile is the p-quantile of d in µs (nearest rank below); 0 for none.
func Percentile(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return US(s[int(p*float64(len(s)-1))])
}

// FsyncFloor is the p50, in µs, of a 4 KiB overwrite followed by fdatasync
// in dir: the cost of one durable write on this disk, right now.
func FsyncFloor(dir string) float64 {
	f, err := os.CreateTemp(dir, "fsync-*")
	if err != nil {
		return 0
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	var d []time.Duration
	for range 300 {
		start := time.Now()
		f.WriteAt(buf, 0)
		unix.Fdatasync(int(f.Fd()))
		d = append(d, time.Since(start))
	}
	return Percentile(d, 0.5)
}

// BboltRate is bbolt's own rate of durable commits of one 800 B put each
// (sequential keys), n of them, in a fresh file in dir: what
// `bbolt bench --batch-size 1 --value-size 800` measures.
func BboltRate(dir string, n int) float64 {
	path := filepath.Join(dir, "bbolt-rate.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return 0
	}
	defer os.Remove(path)
	defer db.Close()
	val := bytes.Repeat([]byte("v"), 800)
	start := time.Now()
	for i := range n {
		db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put(fmt.Appendf(nil, "%016d", i), val)
		})
	}
	return float64(n) / time.Since(start).Seconds()
}

// DropCache evicts every file under dir from the page cache
// (posix_fadvise DONTNEED, no root needed), for cold-start figures.
func DropCache(dir string) error {
	return filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
}

// Usage is what /proc says about a process: CPU time (user + system) and
// peak resident memory.
type Usage struct {
	CPU   time.Duration
	HWMKB int64 // VmHWM: the peak
	RSSKB int64 // VmRSS: now
}

// clockTick is USER_HZ, 100 on every Linux this runs on.
const clockTick = 100

// ReadUsage reads /proc/PID/stat (utime, stime) and /proc/PID/status
// (VmHWM); pid "self" is this process.
func ReadUsage(pid string) (Usage, error) {
	var u Usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%s/stat", pid))
	if err != nil {
		return u, err
	}
	// The command name, field 2, may hold spaces: count from after its ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return u, errors.New("unreadable /proc stat")
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return u, errors.New("short /proc stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return u, err
	}
	u.CPU = time.Duration(utime+stime) * time.Second / clockTick
	status, err := os.ReadFile(fmt.Sprintf("/proc/%s/status", pid))
	if err != nil {
		return u, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			if fs := strings.Fields(rest); len(fs) > 0 {
				u.HWMKB, _ = strconv.ParseInt(fs[0], 10, 64)
			}
		}
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if fs := strings.Fields(rest); len(fs) > 0 {
				u.RSSKB, _ = strconv.ParseInt(fs[0], 10, 64)
			}
		}
	}
	return u, nil
}
