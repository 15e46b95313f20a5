package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestCgroupMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		name, file, content string
		want                int64
	}{
		{"a v2 limit is read", "memory.max", "536870912\n", 536870912},
		{"v2 without a limit is none", "memory.max", "max\n", 0},
		{"a v1 limit is read", "memory/memory.limit_in_bytes", "268435456\n", 268435456},
		{"v1 without a limit is none", "memory/memory.limit_in_bytes", "9223372036854771712\n", 0},
		{"garbage is none", "memory.max", "lots\n", 0},
		{"no cgroup files is none", "", "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			if c.file != "" {
				os.MkdirAll(filepath.Dir(filepath.Join(root, c.file)), 0o755)
				if err := os.WriteFile(filepath.Join(root, c.file), []byte(c.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := cgroupMemoryLimit(root); got != c.want {
				t.Fatalf("got %d, want %d", got, c.want)
			}
		})
	}
}

func TestSetGCPolicy(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "memory.max"), []byte("1000000000\n"), 0o644)

	debug.SetGCPercent(100)
	debug.SetMemoryLimit(1 << 62)
	setGCPolicy(func(string) string { return "" }, root)
	if got := debug.SetGCPercent(100); got != defaultGOGC {
		t.Errorf("GOGC unset: %d, want %d", got, defaultGOGC)
	}
	if got := debug.SetMemoryLimit(1 << 62); got != 800000000 {
		t.Errorf("GOMEMLIMIT unset under a cgroup limit of 1 GB: %d, want 800000000", got)
	}

	env := map[string]string{"GOGC": "150", "GOMEMLIMIT": "64MiB"}
	setGCPolicy(func(k string) string { return env[k] }, root)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC set: the policy changed it to %d", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<62 {
		t.Errorf("GOMEMLIMIT set: the policy changed it to %d", got)
	}
}
