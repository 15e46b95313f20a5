package check

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// buildah is the buildah command with the storage the checks keep their
// images in: a folder of their own (MEMGATE_BUILDAH_ROOT, by default
// $XDG_CACHE_HOME/memgate-buildah or ~/.cache/memgate-buildah), so that
// nothing of the machine's own containers is touched, and the stand-in base
// image and the build's layers are made once per machine.
type buildah struct {
	flags []string // --root, --runroot, --storage-driver
}

var (
	buildahOnce sync.Once
	buildahCmd  *buildah
	buildahErr  error
)

// needBuildah returns the buildah to use, or ends the test: it fails under
// CI=true and is skipped elsewhere, saying how to install what is missing.
func needBuildah(t *testing.T) *buildah {
	t.Helper()
	buildahOnce.Do(func() { buildahCmd, buildahErr = findBuildah() })
	if buildahErr != nil {
		missing(t, buildahErr.Error())
	}
	return buildahCmd
}

// missing ends a test whose real part is missing: a failure in CI, a skip
// elsewhere.
func missing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("cannot run under CI=true: %s", why)
	}
	t.Skipf("%s", why)
}

func findBuildah() (*buildah, error) {
	const install = "make deploy-check installs it (apt-get install --no-install-recommends buildah busybox-static)"
	if runtime.GOOS != "linux" {
		return nil, errors.New("the image check builds and runs the image with buildah, which needs Linux")
	}
	if _, err := exec.LookPath("buildah"); err != nil {
		return nil, errors.New("buildah is not installed: " + install)
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		return nil, errors.New("busybox-static is not installed (the stand-in Go image's shell): " + install)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the image check runs buildah as root (buildah mount, chroot isolation); run it as root")
	}
	root := os.Getenv("MEMGATE_BUILDAH_ROOT")
	if root == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("no folder for buildah's storage (set MEMGATE_BUILDAH_ROOT): %w", err)
		}
		root = filepath.Join(cache, "memgate-buildah")
	}
	// overlay where the kernel lets root mount it; else vfs, which copies
	// every layer whole but works anywhere. Each has a storage of its own.
	var tried []string
	for _, driver := range []string{"overlay", "vfs"} {
		if d := os.Getenv("MEMGATE_BUILDAH_DRIVER"); d != "" && d != driver {
			continue
		}
		b := &buildah{flags: []string{
			"--root", filepath.Join(root, driver, "storage"),
			"--runroot", filepath.Join(root, driver, "run"),
			"--storage-driver", driver,
		}}
		if err := b.probe(); err != nil {
			tried = append(tried, driver+": "+err.Error())
			continue
		}
		return b, nil
	}
	return nil, fmt.Errorf("buildah cannot mount a container here (%s)", strings.Join(tried, "; "))
}

// probe makes and mounts an empty container, and removes it.
func (b *buildah) probe() error {
	c, err := b.out("from", "--pull=never", "scratch")
	if err != nil {
		return err
	}
	defer b.out("rm", c)
	_, err = b.out("mount", c)
	return err
}

// command returns the buildah command of args.
func (b *buildah) command(args ...string) *exec.Cmd {
	cmd := exec.Command("buildah", append(append([]string{}, b.flags...), args...)...)
	cmd.Env = append(os.Environ(), "BUILDAH_ISOLATION=chroot")
	return cmd
}

// out runs buildah args and returns its stdout, trimmed.
func (b *buildah) out(args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := b.command(args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("buildah %s: %v: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// must runs buildah args and ends the test if it fails.
func (b *buildah) must(t *testing.T, args ...string) string {
	t.Helper()
	out, err := b.out(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
