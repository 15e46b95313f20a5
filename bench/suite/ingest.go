package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/bench/driver"
	"github.com/memgate/memgate/bench/measure"
	"github.com/memgate/memgate/storage"
)

// peers returns the systems to compare: memgate, then every peer that is
// installed (none on a smoke run).
func (e *env) systems() []*system {
	out := []*system{memgateSystem(e.c)}
	if e.c.smoke || e.c.memgateOnly {
		return out
	}
	if _, err := exec.LookPath(e.c.node); err != nil {
		return out
	}
	for _, s := range []struct {
		sys  *system
		file string
	}{
		{officialSystem(e.c), "node_modules/@modelcontextprotocol/server-memory/dist/index.js"},
		{libsqlSystem(e.c), "libsql/node_modules/mcp-memory-libsql/dist/index.js"},
		{aidevkitSystem(e.c), "aidevkit/node_modules/@ai-devkit/memory/dist/index.js"},
	} {
		if installed(filepath.Join(e.c.peers, s.file)) && (s.sys.name != "@ai-devkit/memory" || aidevkitBuilt(e.c.peers)) {
			out = append(out, s.sys)
		}
	}
	return out
}

func aidevkitBuilt(peers string) bool {
	return installed(filepath.Join(peers, "aidevkit/node_modules/better-sqlite3/build/Release/better_sqlite3.node"))
}

// writeRun is one sequential ingest into one system.
type writeRun struct {
	perSec       float64
	lat          *driver.Hist
	q1, q4       float64 // p50 of the first and last quarter, µs
	cpuUS        float64 // server CPU per write
	hwmKB        int64
	disk         int64
	ids          []string
	errors       int
	checkpointed map[int]float64 // N → writes/s to N
}

// ingest writes mems one by one into s (already started) and times each.
// At every N in checkpoints (and at the end) it calls at(N).
// ids, if not nil, receives the identities as they come.
func ingest(sys *system, s *driver.Stdio, mems []memgate.Write, checkpoints []int, at func(n int) error, ids []string) (*writeRun, error) {
	if ids == nil {
		ids = make([]string, len(mems))
	}
	w := &writeRun{lat: driver.NewHist(), ids: ids, checkpointed: map[int]float64{}}
	lat := make([]time.Duration, len(mems))
	pid := strconv.Itoa(s.Pid())
	u0, _ := measure.ReadUsage(pid)
	var busy time.Duration
	var cpu time.Duration
	for i, m := range mems {
		tool, args := sys.write(i, m)
		res, d, err := s.CallTool(tool, args)
		if err != nil {
			return nil, fmt.Errorf("%s: write %d: %w", sys.name, i, err)
		}
		lat[i], busy = d, busy+d
		w.lat.Record(d)
		w.ids[i] = sys.id(i, res)
		if n := i + 1; slices.Contains(checkpoints, n) {
			u, _ := measure.ReadUsage(pid)
			cpu = u.CPU - u0.CPU
			w.checkpointed[n] = float64(n) / busy.Seconds()
			if at != nil {
				if err := at(n); err != nil {
					return nil, err
				}
			}
		}
	}
	u1, _ := measure.ReadUsage(pid)
	if cpu == 0 {
		cpu = u1.CPU - u0.CPU
	}
	w.perSec = float64(len(mems)) / busy.Seconds()
	q := len(lat) / 4
	w.q1, w.q4 = measure.Percentile(lat[:q], 0.5), measure.Percentile(lat[len(lat)-q:], 0.5)
	w.cpuUS = measure.US(cpu) / float64(len(mems))
	w.hwmKB = u1.HWMKB
	return w, nil
}

// s1 runs the sequential ingest rounds: every system, one after another,
// each round in a fresh folder, -rounds times.
func (e *env) s1() error {
	t := e.newTable("S1: sequential ingest over stdio")
	e.s1t = t
	mems := e.mems[:min(e.c.writes, len(e.mems))]
	syss := e.systems()
	runs := map[string][]*writeRun{}
	var bbolt, inproc []float64
	for round := range e.c.rounds {
		bbolt = append(bbolt, measure.BboltRate(e.dir, 2000))
		r, err := putInProcess(filepath.Join(e.dir, fmt.Sprint("s1-inproc-", round)), mems)
		if err != nil {
			return err
		}
		inproc = append(inproc, r)
		msg := fmt.Sprintf("  round %d: bbolt %.0f tx/s, memgate's store in process %.0f /s", round+1, bbolt[round], r)
		for _, sys := range syss {
			dir := filepath.Join(e.dir, fmt.Sprintf("s1-%s-%d", safe(sys.name), round))
			os.MkdirAll(dir, 0o700)
			s, err := sys.start(dir)
			if err != nil {
				return err
			}
			w, err := ingest(sys, s, mems, nil, nil, nil)
			if err != nil {
				s.Close(10 * time.Second)
				return err
			}
			if err := s.Close(60 * time.Second); err != nil {
				return err
			}
			w.disk = diskBytes(sys.files(dir))
			os.RemoveAll(dir)
			runs[sys.name] = append(runs[sys.name], w)
			msg += fmt.Sprintf(", %s %.0f /s", sys.name, w.perSec)
		}
		logf("%s", msg)
	}
	fsync := (e.figures["fsync_start"] + measure.FsyncFloor(e.dir)) / 2
	bb := medianOf(bbolt)
	mg := median(runs["memgate"])
	t.row("bbolt, one 800 B put per commit (median of the rounds)", fmt.Sprintf("%.0f tx/s (rounds: %s)", bb, rates(bbolt)), "baseline", "")
	for _, sys := range syss {
		w := median(runs[sys.name])
		t.row(fmt.Sprintf("%s, %d sequential writes — %s", sys.name, len(mems), sys.durability),
			fmt.Sprintf("%.0f /s, p50 %.0f µs, p99 %.0f µs, first/last quarter p50 %.0f / %.0f µs, %.0f µs server CPU/write, VmHWM %.0f MB, %.0f B/memory on disk",
				w.perSec, w.lat.P(0.5), w.lat.P(0.99), w.q1, w.q4, w.cpuUS, float64(w.hwmKB)/1024, float64(w.disk)/float64(len(mems))),
			"", "")
	}
	ratio := mg.perSec / bb
	t.row("memgate durable writes / bbolt's one-put commits", fmt.Sprintf("**%.2fx**", ratio), "≥ 0.8x", verdict(ratio >= 0.8))
	ip := medianOf(inproc)
	t.row("the same writes to memgate's store in this process (storage.Put, durable, no MCP) / bbolt", fmt.Sprintf("%.0f /s (rounds: %s): **%.2fx**", ip, rates(inproc), ip/bb), "—", "")
	bound := 1.25 * 2 * fsync
	t.row("memgate write p50 against 1.25 × (2 × fsync p50)", fmt.Sprintf("%.0f µs against %.0f µs (fsync p50 %.0f µs)", mg.lat.P(0.5), bound, fsync),
		"p50 ≤ 1.25 × 2 × fsync", verdict(mg.lat.P(0.5) <= bound))
	e.figures["s1_memgate_per_sec"] = mg.perSec
	for _, sys := range syss[1:] {
		var rs []float64
		for i, w := range runs[sys.name] {
			rs = append(rs, runs["memgate"][i].perSec/w.perSec)
		}
		r := medianOf(rs)
		goal, met := "", ""
		switch sys.name {
		case "server-memory":
			goal, met = "≥ 10x at 1k", verdict(r >= 10)
		case "@ai-devkit/memory":
			goal, met = "≥ 1.5x against a relaxed mode with its guarantee", "n/a: memgate has no relaxed mode"
		}
		t.row(fmt.Sprintf("memgate / %s at %d (median of per-round ratios)", sys.name, len(mems)), fmt.Sprintf("**%.2fx** (rounds: %s)", r, ratiosString(rs)), goal, met)
		e.figures["s1_ratio_"+safe(sys.name)] = r
	}
	return nil
}

// putInProcess writes mems one by one, durably, into a store opened in this
// process: the storage engine's rate without MCP, beside bbolt's.
func putInProcess(dir string, mems []memgate.Write) (float64, error) {
	defer os.RemoveAll(dir)
	st, err := storage.Open(filepath.Join(dir, storage.FileName), storage.Options{})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	start := time.Now()
	for _, m := range mems {
		if _, _, err := st.Put(context.Background(), m); err != nil {
			return 0, err
		}
	}
	return float64(len(mems)) / time.Since(start).Seconds(), nil
}

func median(ws []*writeRun) *writeRun {
	s := slices.Clone(ws)
	slices.SortFunc(s, func(a, b *writeRun) int {
		switch {
		case a.perSec < b.perSec:
			return -1
		case a.perSec > b.perSec:
			return 1
		}
		return 0
	})
	return s[len(s)/2]
}

func rates(xs []float64) string {
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%.0f", x)
	}
	return s
}

func safe(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	return string(b)
}

var _ = json.Valid
