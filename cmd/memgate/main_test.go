package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/syncbuf"
	"github.com/memgate/memgate/storage"
)

// The test binary plays two other parts when its environment asks it to.
const (
	// mainEnv set to 1 makes it memgate itself (verify starts "itself").
	mainEnv = "CMDTEST_MEMGATE_MAIN"
	// lockEnv names a store file it opens and holds until stdin closes,
	// as another memgate process would.
	lockEnv = "CMDTEST_MEMGATE_LOCK"
	// brokenEnv set to 1 makes it a memgate that fails at once.
	brokenEnv = "CMDTEST_MEMGATE_BROKEN"
)

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		main()
		return
	}
	if os.Getenv(brokenEnv) == "1" {
		fmt.Fprintln(os.Stderr, "memgate: internal: broken on purpose")
		os.Exit(1)
	}
	if path := os.Getenv(lockEnv); path != "" {
		s, err := storage.Open(path, storage.Options{})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("ready")
		bufio.NewReader(os.Stdin).ReadString('\n')
		s.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// syncBuffer is a stderr that a server may write from several goroutines.
type syncBuffer = syncbuf.Buffer

// env is an environment for getenv: nothing from the process's.
type env map[string]string

func (e env) get(k string) string { return e[k] }

// result is what one run printed and its exit status.
type result struct {
	stdout, stderr string
	code           int
	err            error
}

// mg runs the command line args in-process with the environment e
// (HOME pointing nowhere useful unless e says otherwise) and stdin.
func mg(t *testing.T, e env, stdin string, args ...string) result {
	t.Helper()
	return memgateCtx(t.Context(), t, e, stdin, args...)
}

func memgateCtx(ctx context.Context, t *testing.T, e env, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr syncBuffer
	err := run(ctx, args, e.get, strings.NewReader(stdin), &stdout, &stderr)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: exitCode(err), err: err}
}

// ok checks a run succeeded with nothing on stderr and returns its stdout
// decoded as one JSON object.
func (r result) ok(t *testing.T) map[string]any {
	t.Helper()
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q, stdout %q", r.code, r.stderr, r.stdout)
	}
	return decode(t, r.stdout)
}

// fails checks a run failed with status code and one stderr line holding
// want.
func (r result) fails(t *testing.T, code int, want string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d; stderr %q", r.code, code, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "memgate: ") || !strings.Contains(lines[0], want) {
		t.Fatalf("stderr %q, want one line with %q", r.stderr, want)
	}
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if strings.Count(strings.TrimSpace(s), "\n") != 0 {
		t.Fatalf("stdout is not one line: %q", s)
	}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("stdout %q is not a JSON object: %v", s, err)
	}
	return m
}

// dig follows a path of keys through decoded JSON.
func dig(v any, path ...string) any {
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// store is a data folder for one test, with the flag that names it.
func store(t *testing.T) []string { return []string{"--data-dir", t.TempDir()} }

func args(base []string, more ...string) []string {
	return append(append([]string{}, more...), base...)
}

// readAll drains r in the background; the returned function waits for the
// end and returns what was read.
func readAll(r io.Reader) func() string {
	done := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	return func() string { return <-done }
}
