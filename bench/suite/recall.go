package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/bench/corpus"
	"github.com/memgate/memgate/bench/driver"
	"github.com/memgate/memgate/bench/measure"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

// recallAt is what one system answered at one N.
type recallAt struct {
	n       int
	class   map[string]*driver.Hist
	success map[string]float64
	mrr     map[string]float64
	noop    *driver.Hist
	// q3Read and noopRead time the same calls to the read of the answer,
	// before the bench client decodes it (a q3 answer is ~10 KB).
	q3Read, noopRead *driver.Hist
	cpuUS            float64
}

// makeQueries draws the queries of each class from mems.
func makeQueries(mems []memgate.Write, per int, seed int64) []query {
	var qs []query
	for _, q := range corpus.KnownItem(mems, 3, per, seed) {
		qs = append(qs, query{q, classQ3})
	}
	for _, q := range corpus.KnownItem(mems, 1, per, seed+1) {
		qs = append(qs, query{q, classQ1})
	}
	for _, q := range corpus.KnownItem(mems, 3, per, seed+2) {
		qs = append(qs, query{q, classTags})
	}
	for _, q := range corpus.NoHit(per, seed+3) {
		qs = append(qs, query{q, classNoHit})
	}
	return qs
}

// recallRound asks every query of qs once (memgate: each followed by one
// noop call) and records latency and rank per class.
func recallRound(sys *system, s *driver.Stdio, qs []query, ids []string, n int) (*recallAt, error) {
	r := &recallAt{n: n, class: map[string]*driver.Hist{}, success: map[string]float64{}, mrr: map[string]float64{}, noop: driver.NewHist(),
		q3Read: driver.NewHist(), noopRead: driver.NewHist()}
	ranks := map[string][]int{}
	empty := 0
	pid := strconv.Itoa(s.Pid())
	u0, _ := measure.ReadUsage(pid)
	for _, q := range qs {
		tool, args := sys.search(q, 10)
		res, d, err := s.CallTool(tool, args)
		if err != nil {
			return nil, fmt.Errorf("%s: %s query: %w", sys.name, q.class, err)
		}
		h := r.class[q.class]
		if h == nil {
			h = driver.NewHist()
			r.class[q.class] = h
		}
		h.Record(d)
		if q.class == classQ3 {
			r.q3Read.Record(s.LastRead)
		}
		hits := sys.hits(res)
		if q.Target >= 0 {
			ranks[q.class] = append(ranks[q.class], corpus.Rank(hits, ids[q.Target]))
		} else if len(hits) == 0 {
			empty++
		}
		if sys.name == "memgate" {
			_, d, err := s.CallTool("noop", map[string]any{})
			if err != nil {
				return nil, err
			}
			r.noop.Record(d)
			r.noopRead.Record(s.LastRead)
		}
	}
	u1, _ := measure.ReadUsage(pid)
	r.cpuUS = measure.US(u1.CPU-u0.CPU) / float64(len(qs))
	for c, rs := range ranks {
		r.success[c], r.mrr[c] = corpus.SuccessRate(5, rs), corpus.MRR(rs)
	}
	if h := r.class[classNoHit]; h != nil {
		r.success[classNoHit] = float64(empty) / float64(h.Count())
	}
	return r, nil
}

// s3 loads each system one memory at a time up to its largest N and, at
// each N of its checkpoints, runs the recall queries. The loads also give
// S1 its figures at larger N, S6 its 100k store and S7 its footprints.
func (e *env) s3() error {
	t := e.newTable("S3: recall latency and quality over stdio, one client")
	e.recall = map[string][]*recallAt{}
	e.loads = map[string]*writeRun{}
	for _, sys := range e.systems() {
		ns := slices.Clone(e.c.sizes[sys.name])
		if len(ns) == 0 {
			continue
		}
		slices.Sort(ns)
		maxN := min(ns[len(ns)-1], len(e.mems))
		per := e.c.queries
		if sys.name == "server-memory" || sys.name == "mcp-memory-libsql" {
			per = e.c.slowQueries
		}
		dir := filepath.Join(e.dir, "s3-"+safe(sys.name))
		os.MkdirAll(dir, 0o700)
		logf("  %s: load %d one by one, recall at %v…", sys.name, maxN, ns)
		e.c.profileNext = sys.name == "memgate"
		s, err := sys.start(dir)
		if err != nil {
			return err
		}
		mems := e.mems[:maxN]
		ids := make([]string, len(mems))
		at := func(n int) error {
			qs := makeQueries(mems[:n], per, e.c.seed+int64(n))
			profile := e.c.profile != "" && sys.name == "memgate" && n == maxN
			if profile {
				s.Signal(syscall.SIGUSR1)
			}
			r, err := recallRound(sys, s, qs, ids, n)
			if profile {
				s.Signal(syscall.SIGUSR2)
			}
			if err != nil {
				return err
			}
			e.recall[sys.name] = append(e.recall[sys.name], r)
			logf("    N=%d: q3 p50 %.0f µs, success@5 %.3f", n, r.class[classQ3].P(0.5), r.success[classQ3])
			return nil
		}
		w2, err := ingest(sys, s, mems, ns, at, ids)
		if err != nil {
			s.Close(10 * time.Second)
			return err
		}
		if sys.name == "memgate" {
			// The HTTP ceiling is ping (the gateway builds its own SDK
			// servers, so the bench cannot add noop there); here both go
			// through one stdio server, to show how far apart they are.
			np, pp, sp := driver.NewHist(), driver.NewHist(), driver.NewHist()
			for range 500 {
				_, d, err := s.CallTool("stats", map[string]any{})
				if err != nil {
					return err
				}
				sp.Record(d)
				_, d, err = s.CallTool("noop", map[string]any{})
				if err != nil {
					return err
				}
				np.Record(d)
				_, d, err = s.Call("ping", map[string]any{})
				if err != nil {
					return err
				}
				pp.Record(d)
			}
			t.row("memgate over stdio: ping / noop tool / stats tool, p50 (the HTTP ceilings are ping and stats)",
				fmt.Sprintf("%.0f µs / %.0f µs / %.0f µs", pp.P(0.5), np.P(0.5), sp.P(0.5)), "", "")
			if res, _, err := s.CallTool("stats", map[string]any{}); err == nil {
				e.figures["s3_memgate_count"] = float64(countOf(res))
			}
		}
		if err := s.Close(120 * time.Second); err != nil {
			return err
		}
		if sys.name == "memgate" {
			floor, err := handlerFloor(dir, mems, 500, e.c.seed+99)
			if err != nil {
				return err
			}
			t.row(fmt.Sprintf("memgate at %d: the handler's share alone, storage.Search in process, q3 p50", maxN), fmt.Sprintf("**%.0f µs**", floor),
				"≤ 150 µs (2x the in-memory BM25 floor)", verdict(floor <= 150))
		}
		w2.disk = diskBytes(sys.files(dir))
		e.loads[sys.name] = w2
		e.figures["disk_per_memory/"+sys.name] = float64(w2.disk) / float64(maxN)
		e.figures["hwm_kb/"+sys.name] = float64(w2.hwmKB)
		e.figures["n/"+sys.name] = float64(maxN)
		if sys.name == "memgate" {
			e.memgateDir = dir
			e.figures["raw_bytes/memgate"] = float64(rawBytes(mems))
		}
	}
	e.s3report(t)
	return nil
}

func (e *env) s3report(t *table) {
	mg := e.recall["memgate"]
	for _, name := range []string{"memgate", "@ai-devkit/memory", "mcp-memory-libsql", "server-memory"} {
		for _, r := range e.recall[name] {
			for _, c := range classes {
				h := r.class[c]
				if h == nil {
					continue
				}
				q := fmt.Sprintf("success@5 %.3f, MRR %.3f", r.success[c], r.mrr[c])
				if c == classNoHit {
					q = fmt.Sprintf("%.0f%% empty", 100*r.success[c])
				}
				t.row(fmt.Sprintf("%s, N = %d, %s", name, r.n, c), fmt.Sprintf("p50 %.0f µs, p99 %.0f µs, %s", h.P(0.5), h.P(0.99), q), "", "")
			}
			t.row(fmt.Sprintf("%s, N = %d, server CPU per query", name, r.n), fmt.Sprintf("%.0f µs", r.cpuUS), "", "")
			e.series["q3_p50/"+name] = append(e.series["q3_p50/"+name], point{float64(r.n), r.class[classQ3].P(0.5) / 1000})
			e.series["q3_p99/"+name] = append(e.series["q3_p99/"+name], point{float64(r.n), r.class[classQ3].P(0.99) / 1000})
		}
	}
	find := func(name string, n int) *recallAt {
		for _, r := range e.recall[name] {
			if r.n == n {
				return r
			}
		}
		return nil
	}
	for _, n := range []int{15000, 100000} {
		a, b := find("memgate", n), find("@ai-devkit/memory", n)
		if a == nil || b == nil {
			continue
		}
		r50 := a.class[classQ3].P(0.5) / b.class[classQ3].P(0.5)
		r99 := a.class[classQ3].P(0.99) / b.class[classQ3].P(0.99)
		t.row(fmt.Sprintf("memgate / ai-devkit, q3 at %d: p50, p99", n), fmt.Sprintf("**%.2fx**, **%.2fx**", r50, r99), "≤ 0.5x both", verdict(r50 <= 0.5 && r99 <= 0.5))
		t.row(fmt.Sprintf("memgate / ai-devkit, q3 at %d, to the read of the answer (before the bench client decodes it): p50, p99", n),
			fmt.Sprintf("%.2fx, %.2fx (%.0f / %.0f µs against %.0f / %.0f µs)", a.q3Read.P(0.5)/b.q3Read.P(0.5), a.q3Read.P(0.99)/b.q3Read.P(0.99),
				a.q3Read.P(0.5), a.q3Read.P(0.99), b.q3Read.P(0.5), b.q3Read.P(0.99)), "", "")
		t.row(fmt.Sprintf("q3 success@5 at %d: memgate, ai-devkit", n), fmt.Sprintf("%.3f, %.3f", a.success[classQ3], b.success[classQ3]),
			"≥ 0.95 and ≥ ai-devkit − 0.01", verdict(a.success[classQ3] >= 0.95 && a.success[classQ3] >= b.success[classQ3]-0.01))
	}
	if a, b := find("memgate", 15000), find("mcp-memory-libsql", 15000); a != nil && b != nil {
		r := b.class[classQ3].P(0.5) / a.class[classQ3].P(0.5)
		t.row("libsql q3 p50 / memgate q3 p50 at 15,000", fmt.Sprintf("**%.0fx**", r), "≥ 20x", verdict(r >= 20))
	}
	if a, b := find("memgate", 5000), find("server-memory", 5000); a != nil && b != nil {
		r := b.class[classQ3].P(0.5) / a.class[classQ3].P(0.5)
		t.row("server-memory q3 p50 / memgate q3 p50 at 5,000", fmt.Sprintf("**%.0fx**", r), "≥ 50x", verdict(r >= 50))
	}
	if len(mg) > 0 {
		last := mg[len(mg)-1]
		d := last.class[classQ3].P(0.5) - last.noop.P(0.5)
		t.row(fmt.Sprintf("memgate at %d: q3 p50 − noop p50 (noop p50 %.0f µs)", last.n, last.noop.P(0.5)), fmt.Sprintf("**%.0f µs**", d), "≤ 200 µs", verdict(d <= 200))
		t.row(fmt.Sprintf("memgate at %d: the same, to the read of the answer (before the bench client decodes it; noop p50 %.0f µs)", last.n, last.noopRead.P(0.5)),
			fmt.Sprintf("%.0f µs", last.q3Read.P(0.5)-last.noopRead.P(0.5)), "", "")
		if last.success[classQ3] > 0 && e.c.sizes["@ai-devkit/memory"] == nil {
			t.row("memgate q3 success@5", fmt.Sprintf("%.3f", last.success[classQ3]), "≥ 0.95", verdict(last.success[classQ3] >= 0.95))
		}
	}
	// S1 rows that need the loads.
	if w, ok := e.loads["memgate"]; ok && e.s1t != nil {
		n := int(e.figures["n/memgate"])
		e.s1t.row(fmt.Sprintf("memgate load to %d: first / last quarter p50", n), fmt.Sprintf("%.0f / %.0f µs (**%.2fx**), %.0f /s", w.q1, w.q4, w.q4/w.q1, w.perSec),
			"last ≤ 1.2x first", verdict(w.q4 <= 1.2*w.q1))
		for _, p := range []struct {
			peer string
			n    int
			goal float64
		}{{"server-memory", 5000, 50}, {"mcp-memory-libsql", 15000, 2}, {"@ai-devkit/memory", 15000, 0}} {
			pw, ok := e.loads[p.peer]
			if !ok || pw.checkpointed[p.n] == 0 || w.checkpointed[p.n] == 0 {
				continue
			}
			r := w.checkpointed[p.n] / pw.checkpointed[p.n]
			goal, met := fmt.Sprintf("≥ %.0fx", p.goal), verdict(r >= p.goal)
			if p.goal == 0 {
				goal, met = "—", ""
			}
			e.s1t.row(fmt.Sprintf("memgate / %s, load to %d (one load each)", p.peer, p.n),
				fmt.Sprintf("%.0f /s against %.0f /s: **%.1fx**", w.checkpointed[p.n], pw.checkpointed[p.n], r), goal, met)
		}
	}
}

// handlerFloor opens memgate's store in this process and times the q3
// queries against storage.Search alone: the handler's share.
func handlerFloor(dir string, mems []memgate.Write, per int, seed int64) (float64, error) {
	st, err := storage.Open(tenants.StoreFile(dir, memgate.DefaultNamespace), storage.Options{})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	h := driver.NewHist()
	for _, q := range corpus.KnownItem(mems, 3, per, seed) {
		start := time.Now()
		if _, err := st.Search(context.Background(), memgate.Query{Text: q.Text, Limit: 10}); err != nil {
			return 0, err
		}
		h.Record(time.Since(start))
	}
	return h.P(0.5), nil
}

// countOf reads memgate's stats result.
func countOf(res []byte) int64 {
	var r struct {
		Count int64 `json:"count"`
	}
	json.Unmarshal(res, &r)
	return r.Count
}
