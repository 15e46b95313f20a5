package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/internal/pgtest"
	"github.com/memgate/memgate/storage/postgres"
)

// replica is one `memgate serve --store postgres` process.
type replica struct {
	url    string
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan error
}

// startReplica starts a memgate process serving HTTP over dsn's database,
// with a data folder of its own.
func startReplica(t *testing.T, dsn string, more ...string) *replica {
	t.Helper()
	args := append([]string{"serve", "--transport", "http", "--bind", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--store", "postgres", "--migrate", "--replica-staleness", "200ms", "--namespace-arg", "--log", "warn"}, more...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), mainEnv+"=1", postgres.DSNVariable+"="+dsn)
	stdout, _ := cmd.StdoutPipe()
	r := &replica{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	cmd.Stderr = r.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-r.exited
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	const prefix = "memgate listening on "
	if err != nil || !strings.HasPrefix(line, prefix) {
		t.Fatalf("listening line %q (%v); stderr %q", line, err, r.stderr.String())
	}
	r.url = strings.TrimSpace(strings.TrimPrefix(line, prefix))
	return r
}

// callTool calls tool and returns its structured result and error code ("" for
// a success).
func callTool(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, string) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, "protocol: " + err.Error()
	}
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	json.Unmarshal(b, &m)
	if !res.IsError {
		return m, ""
	}
	code, _ := dig(m, "error", "code").(string)
	return m, code
}

// Two processes over one database: a write on one is found by the other
// within the staleness, forgets and edits too, and compare-and-set across
// them has exactly one winner a round.
func TestReplicasServeOneDatabase(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := startReplica(t, dsn), startReplica(t, dsn)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // a bound on a hang, not a measure
	defer cancel()
	ca, cb := newSession(t, a.url), newSession(t, b.url)

	if _, code := callTool(ctx, ca, "remember", map[string]any{"id": "car", "text": "Bought a new automobile last spring"}); code != "" {
		t.Fatal(code)
	}
	seen := func(cs *mcp.ClientSession, query string, want int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			m, code := callTool(ctx, cs, "search", map[string]any{"query": query})
			if hits, _ := m["hits"].([]any); code == "" && len(hits) == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("search %q never had %d hits: %v %s", query, want, m, code)
			}
		}
	}
	seen(cb, "automobile", 1)
	if _, code := callTool(ctx, cb, "forget", map[string]any{"id": "car"}); code != "" {
		t.Fatal(code)
	}
	seen(ca, "automobile", 0)
	if _, code := callTool(ctx, ca, "get", map[string]any{"id": "car"}); code != "not_found" {
		t.Fatalf("get after a forget on the other replica: %q", code)
	}

	m, code := callTool(ctx, ca, "remember", map[string]any{"id": "k", "text": "round 0"})
	if code != "" {
		t.Fatal(code)
	}
	version := dig(m, "memory", "version").(float64)
	for round := 1; round <= 20; round++ {
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i, cs := range []*mcp.ClientSession{ca, cb} {
			wg.Go(func() {
				_, code := callTool(ctx, cs, "remember", map[string]any{"id": "k", "text": fmt.Sprintf("round %d by %d", round, i),
					"if_version": version})
				switch code {
				case "":
					wins.Add(1)
				case "version_conflict":
				default:
					t.Errorf("round %d: %s", round, code)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d winners", round, wins.Load())
		}
		ma, _ := callTool(ctx, ca, "get", map[string]any{"id": "k"})
		mb, _ := callTool(ctx, cb, "get", map[string]any{"id": "k"})
		va, vb := dig(ma, "memory", "version"), dig(mb, "memory", "version")
		if va != vb || dig(ma, "memory", "text") != dig(mb, "memory", "text") || va == version {
			t.Fatalf("round %d: %v / %v", round, ma, mb)
		}
		version = va.(float64)
	}
}

// 64 writers over two processes, one of them killed with SIGKILL mid-run:
// the survivor serves throughout, a replica started meanwhile catches up,
// and every acknowledged write is there.
func TestReplicaKilledLosesNoAcknowledgedWrite(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := startReplica(t, dsn), startReplica(t, dsn)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const writers, perWriter = 64, 40
	var (
		mu       sync.Mutex
		acked    []string
		survivor atomic.Int64 // failures on the survivor
		killed   = make(chan struct{})
		wg       sync.WaitGroup
	)
	for w := range writers {
		target := a
		if w%2 == 1 {
			target = b
		}
		wg.Go(func() {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "replica-test", Version: "1"}, nil).
				Connect(ctx, &mcp.StreamableClientTransport{Endpoint: target.url, DisableStandaloneSSE: true}, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer cs.Close()
			for i := range perWriter {
				id := fmt.Sprintf("w%02d-%03d", w, i)
				_, code := callTool(ctx, cs, "remember", map[string]any{"id": id, "namespace": "shared",
					"text": fmt.Sprintf("writer %d wrote memory %d about the ferry", w, i)})
				switch {
				case code == "":
					mu.Lock()
					acked = append(acked, id)
					mu.Unlock()
				case target == b:
					survivor.Add(1)
					t.Errorf("the survivor failed %s: %s", id, code)
				default:
					select {
					case <-killed:
						return // the killed process's writers stop
					default:
						t.Errorf("%s failed before the kill: %s", id, code)
					}
				}
			}
		})
	}
	// Kill one process once a third of the writes are in; start another.
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= writers*perWriter/3 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(killed)
	a.cmd.Process.Kill()
	c := startReplica(t, dsn)
	wg.Wait()

	for _, r := range []*replica{b, c} {
		cs := newSession(t, r.url)
		st, code := callTool(ctx, cs, "stats", map[string]any{"namespace": "shared"})
		if code != "" {
			t.Fatal(code)
		}
		// A write the killed process committed but never acknowledged may
		// be there too.
		if n := int(st["count"].(float64)); n < len(acked) {
			t.Fatalf("%d memories, %d acknowledged", n, len(acked))
		}
		for _, id := range acked {
			if _, code := callTool(ctx, cs, "get", map[string]any{"namespace": "shared", "id": id}); code != "" {
				t.Fatalf("acknowledged %s: %s", id, code)
			}
		}
	}
	if len(acked) < writers*perWriter/2 {
		t.Fatalf("only %d writes acknowledged", len(acked))
	}
}

// PostgreSQL restarted under load: calls fail with unavailable while it is
// down, succeed again once it is back, and nothing acknowledged is lost.
func TestPostgresRestartUnderLoad(t *testing.T) {
	dsn := pgtest.DSN(t)
	a := startReplica(t, dsn)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cs := newSession(t, a.url)
	var (
		acked []string
		codes = map[string]int{}
		stop  = make(chan struct{})
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf("m%05d", i)
			_, code := callTool(ctx, cs, "remember", map[string]any{"id": id, "text": "written while the database restarts"})
			codes[code]++
			if code == "" {
				acked = append(acked, id)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	pgtest.Restart(t)
	// Writes succeed again after the restart.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, code := callTool(ctx, cs, "remember", map[string]any{"text": "after the restart"}); code == "" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("writes never recovered: %s", code)
		}
	}
	close(stop)
	<-done
	for code, n := range codes {
		if code != "" && code != "unavailable" {
			t.Errorf("%d calls failed with %q, not unavailable", n, code)
		}
	}
	for _, id := range acked {
		if _, code := callTool(ctx, cs, "get", map[string]any{"id": id}); code != "" {
			t.Fatalf("acknowledged %s: %s", id, code)
		}
	}
	t.Logf("%d writes acknowledged, outcomes %v", len(acked), codes)
}
