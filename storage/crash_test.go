package storage

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memgate/memgate"
)

// The crash test runs the test binary again as a writer child (see
// TestMain): it writes from several goroutines and prints the id of every
// write once Put has acknowledged it. The parent kills it with SIGKILL
// mid-run, reopens the store, and requires every acknowledged id.

const (
	crashChildEnv = "MEMGATE_CRASH_CHILD" // store path
	crashModeEnv  = "MEMGATE_CRASH_MODE"  // "honest" or "early-ack"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path, os.Getenv(crashModeEnv))
		return
	}
	os.Exit(m.Run())
}

func crashChild(path, mode string) {
	if mode == "rebuild" {
		rebuildChild(path)
		return
	}
	s, err := Open(path, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	ack := func(id string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(out, id)
		out.Flush()
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				if mode == "early-ack" {
					// A broken writer: it acknowledges before the commit.
					ack(id)
					time.Sleep(time.Millisecond)
				}
				if _, _, err := s.Put(context.Background(), memgate.Write{ID: id, Text: "crash test memory " + id}); err != nil {
					fmt.Fprintln(os.Stderr, "child put:", err)
					os.Exit(2)
				}
				if mode != "early-ack" {
					ack(id)
				}
			}
		})
	}
	wg.Wait()
}

// runCrash starts a child writer, kills it after it has acknowledged at
// least `after` writes, and returns the acknowledged ids that are missing
// after a reopen.
func runCrash(t *testing.T, mode string, after int) (acked int, missing []string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileName)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path, crashModeEnv+"="+mode)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var ids []string
	sc := bufio.NewScanner(stdout)
	deadline := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	for sc.Scan() {
		ids = append(ids, sc.Text())
		if len(ids) == after {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	// Lines already written before the kill are acknowledgements too.
	for sc.Scan() {
		ids = append(ids, sc.Text())
	}
	cmd.Wait()
	if len(ids) < after {
		t.Fatalf("child acknowledged only %d writes before it ended", len(ids))
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	for _, id := range ids {
		if _, err := s.Get(context.Background(), id); err != nil {
			missing = append(missing, id)
		}
	}
	return len(ids), missing
}

func TestCrashLosesNoAcknowledgedWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	for round := range 3 {
		acked, missing := runCrash(t, "honest", 300+round*100)
		if len(missing) > 0 {
			t.Fatalf("round %d: %d of %d acknowledged writes lost after SIGKILL, e.g. %v", round, len(missing), acked, missing[:min(5, len(missing))])
		}
		t.Logf("round %d: %d acknowledged writes, all present", round, acked)
	}
}

// The harness itself must catch a writer that acknowledges before it commits.
func TestCrashHarnessCatchesEarlyAcknowledgement(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	acked, missing := runCrash(t, "early-ack", 200)
	if len(missing) == 0 {
		t.Fatalf("the harness saw no loss from a writer that acknowledges before committing (%d acks)", acked)
	}
	t.Logf("early acknowledgement: %d of %d acknowledged writes missing, as expected", len(missing), acked)
}
