package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/storage"
)

// toolCode calls tool with args and returns the result's error code, ""
// for a success.
func toolCode(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) string {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "protocol: " + err.Error()
	}
	if !res.IsError {
		return ""
	}
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	json.Unmarshal(b, &m)
	code, _ := dig(m, "error", "code").(string)
	return code
}

// holdsOpen reports whether process pid holds path open.
func holdsOpen(t *testing.T, pid int, path string) bool {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		t.Skip("no /proc/PID/fd")
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && target == path {
			return true
		}
	}
	return false
}

// The real binary: 16 tenants over HTTP, one of whose stores is damaged
// on disk while the server runs; the others keep working, the damaged one
// fails with unavailable, and SIGTERM still exits 0.
func TestDamagedStoreAndSIGTERM(t *testing.T) {
	const tenantsN = 16
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "serve", "--transport", "http", "--bind", "127.0.0.1:0", "--data-dir", dir,
		"--namespace-arg", "--store-idle-timeout", "50ms", "--log", "warn")
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	stdout, _ := cmd.StdoutPipe()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	const prefix = "memgate listening on "
	if err != nil || !strings.HasPrefix(line, prefix) {
		t.Fatalf("listening line %q (%v); stderr %q", line, err, stderr.String())
	}
	url := strings.TrimSpace(strings.TrimPrefix(line, prefix))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // a bound on a hang, not a measure
	defer cancel()

	sessions := make([]*mcp.ClientSession, tenantsN)
	for i := range sessions {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "faults-test", Version: "1"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		sessions[i] = cs
		ns := fmt.Sprintf("tenant-%02d", i)
		for j := range 20 {
			if code := toolCode(ctx, cs, "remember", map[string]any{"namespace": ns, "id": fmt.Sprintf("m%d", j),
				"text": fmt.Sprintf("memory %d of %s: the ferry leaves at noon", j, ns)}); code != "" {
				t.Fatalf("seeding %s: %s", ns, code)
			}
		}
	}
	victim := filepath.Join(dir, "stores", "tenant-00", storage.FileName)
	for range 1000 {
		if !holdsOpen(t, cmd.Process.Pid, victim) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if holdsOpen(t, cmd.Process.Pid, victim) {
		t.Fatal("the idle store was never closed")
	}
	fi, err := os.Stat(victim)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(victim, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	const metaPages = 2 * 4096
	if _, err := f.WriteAt(make([]byte, fi.Size()-metaPages), metaPages); err != nil {
		t.Fatal(err)
	}
	f.Close()

	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for i := 1; i < tenantsN; i++ {
		wg.Go(func() {
			ns := fmt.Sprintf("tenant-%02d", i)
			for r := range 5 {
				for _, c := range []struct {
					tool string
					args map[string]any
				}{
					{"search", map[string]any{"namespace": ns, "query": "ferry"}},
					{"get", map[string]any{"namespace": ns, "id": "m1"}},
					{"remember", map[string]any{"namespace": ns, "id": fmt.Sprintf("r%d", r), "text": "the ferry is late"}},
				} {
					if code := toolCode(ctx, sessions[i], c.tool, c.args); code != "" {
						mu.Lock()
						failures = append(failures, ns+" "+c.tool+": "+code)
						mu.Unlock()
					}
				}
			}
		})
	}
	for _, tool := range []string{"get", "search", "stats", "remember", "get"} {
		args := map[string]any{"namespace": "tenant-00", "id": "m1", "query": "ferry", "text": "x"}
		switch tool {
		case "get":
			delete(args, "query")
			delete(args, "text")
		case "search":
			delete(args, "id")
			delete(args, "text")
		case "stats":
			args = map[string]any{"namespace": "tenant-00"}
		case "remember":
			delete(args, "id")
			delete(args, "query")
		}
		if code := toolCode(ctx, sessions[0], tool, args); code != "unavailable" {
			t.Errorf("damaged tenant's %s: %q, want unavailable", tool, code)
		}
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Errorf("%d calls of other tenants failed, first: %v", len(failures), failures[:min(len(failures), 5)])
	}
	for _, cs := range sessions {
		cs.Close()
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("after SIGTERM: %v; stderr %q", err, stderr.String())
		}
	case <-ctx.Done():
		t.Fatalf("SIGTERM did not stop the server; stderr %q", stderr.String())
	}
	if s := stderr.String(); strings.Contains(s, "ferry") {
		t.Fatalf("stderr holds memory text: %q", s)
	}
}
