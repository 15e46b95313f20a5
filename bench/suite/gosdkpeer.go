package suite

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/memgate/memgate/bench/driver"
)

// goSDKMemory is the go-sdk's own memory server example (the official
// server's design in Go, with streamable HTTP), built from the module
// cache: the one peer that speaks HTTP.
const goSDKMemory = "github.com/modelcontextprotocol/go-sdk/examples/server/memory"

// startGoSDKPeer starts the example on a free loopback port with its
// knowledge base in file.
func (e *env) startGoSDKPeer(file string) (*driver.Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	// It prints nothing when bound: a wrapper shell prints the line the
	// driver waits for once the port answers.
	script := fmt.Sprintf(`%s -http %s -memory %s & pid=$!
trap 'kill $pid' TERM INT
for i in $(seq 100); do
  if (exec 3<>/dev/tcp/127.0.0.1/%s) 2>/dev/null; then echo "peer listening on http://%s/mcp"; break; fi
  sleep 0.05
done
wait $pid`, e.c.goSDKPeer, addr, file, addr[strings.LastIndexByte(addr, ':')+1:], addr)
	return driver.StartServer("go-sdk-memory", []string{"bash", "-c", script}, nil, 15*time.Second)
}

// goSDKPeerRuns measures the example beside S4: a read-only load of 64
// sessions on 1,000 entities, and 64 sessions writing at once.
func (e *env) goSDKPeerRuns(t *table, memgateMix *loadResult) error {
	if e.c.goSDKPeer == "" {
		return nil
	}
	dir := filepath.Join(e.dir, "s4-gosdk")
	os.MkdirAll(dir, 0o700)
	defer os.RemoveAll(dir)
	n := min(1000, len(e.mems))
	srv, err := e.startGoSDKPeer(filepath.Join(dir, "kb.json"))
	if err != nil {
		return err
	}
	defer srv.Kill()
	client := driver.NewHTTPClient(e.c.sessions)
	s, err := driver.Open(ctxBG(), client, srv.URL, "2025-11-25")
	if err != nil {
		return err
	}
	for i, m := range e.mems[:n] {
		tool, args := graphWrite(i, m)
		if _, _, err := s.CallTool(ctxBG(), tool, args); err != nil {
			return fmt.Errorf("go-sdk memory example: write %d: %w", i, err)
		}
	}
	mems := e.mems[:n]
	r, err := load(srv.URL, "2025-11-25", e.c.sessions, max(e.c.duration/3, time.Second), 0, 1, srv.Pid(), func(r *rand.Rand, _ int) op {
		q := makeQueries(mems[r.IntN(n):][:1], 1, r.Int64())
		text := "entity"
		if len(q) > 0 {
			text = q[0].Text
		}
		return op{kind: "search", tool: "search_nodes", args: map[string]any{"query": text}}
	})
	if err != nil {
		return err
	}
	srv.Stop(10 * time.Second)
	t.row(fmt.Sprintf("go-sdk memory example (no fsync, file truncated in place), %d sessions, read-only search_nodes on %d entities", e.c.sessions, n),
		fmt.Sprintf("%.0f /s, p50 %.1f ms, p99 %.1f ms, %d errors", r.perSec, r.all.P(0.5)/1000, r.all.P(0.99)/1000, r.errors), "", "")
	tr, pr := memgateMix.perSec/r.perSec, memgateMix.all.P(0.5)/r.all.P(0.5)
	t.row(fmt.Sprintf("memgate's mix on %d memories against it: throughput, p50", e.c.spaces*e.c.perSpace),
		fmt.Sprintf("**%.1fx**, **%.2fx**", tr, pr), "≥ 10x, ≤ 0.1x", verdict(tr >= 10 && pr <= 0.1))

	// 64 writers at once on a fresh file.
	file := filepath.Join(dir, "kb-writers.json")
	srv, err = e.startGoSDKPeer(file)
	if err != nil {
		return err
	}
	per := 20
	w, err := load(srv.URL, "2025-11-25", e.c.sessions, 0, per, 1, srv.Pid(), func(r *rand.Rand, worker int) op {
		i := worker*1000 + r.IntN(1000)
		tool, args := graphWrite(i, e.mems[i%len(e.mems)])
		return op{kind: "remember", tool: tool, args: args.(map[string]any)}
	})
	srv.Stop(10 * time.Second)
	if err != nil {
		return err
	}
	b, _ := os.ReadFile(file)
	var items []struct {
		Type string `json:"type"`
	}
	kept := "the file does not parse"
	if json.Unmarshal(b, &items) == nil {
		n := 0
		for _, it := range items {
			if it.Type == "entity" {
				n++
			}
		}
		kept = fmt.Sprintf("%d entities in the file", n)
	}
	t.row(fmt.Sprintf("go-sdk memory example, %d sessions writing %d entities each at once", e.c.sessions, per),
		fmt.Sprintf("%d acknowledged, %d errors; %s", w.ops, w.errors, kept), "", "")
	return nil
}
