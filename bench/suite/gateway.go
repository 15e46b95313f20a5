package suite

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/bench/driver"
	"github.com/memgate/memgate/bench/measure"
)

// s4 is the HTTP gateway load: sessions over namespaces of preloaded
// memories, 90% search / 10% remember, against a ping through the same
// gateway in the same process, interleaved round by round; then the same
// without sessions (2026-07-28), a write-only run, and a sweep of the
// number of sessions for the plot. Every acknowledged write is counted in
// the stores after a graceful stop.
func (e *env) s4() error {
	c := e.c
	t := e.newTable(fmt.Sprintf("S4: the HTTP gateway under load — %d sessions, %d namespaces × %d memories, 90%% search / 10%% remember",
		c.sessions, c.spaces, c.perSpace))
	data := filepath.Join(e.dir, "s4")
	logf("  preloading %d × %d…", c.spaces, c.perSpace)
	mems, err := preload(data, c.spaces, c.perSpace, e.mems)
	if err != nil {
		return err
	}
	srv, err := e.startHTTP(data)
	if err != nil {
		return err
	}
	defer srv.Kill()
	idle, _ := measure.ReadUsage(fmt.Sprint(srv.Pid()))
	acked := make([]int64, c.spaces)
	add := func(r *loadResult) {
		for i, n := range r.acked {
			acked[i] += n
		}
	}
	mixFn := mixLimit(mems, e.mems, 10, c.searchLimit, uniformNS(c.spaces))
	// Warm-up: every store open, the SDK's caches filled.
	r, err := load(srv.URL, "2025-11-25", c.sessions, min(c.duration/10, 5*time.Second), 0, c.spaces, srv.Pid(), mixFn)
	if err != nil {
		return err
	}
	add(r)
	var mixes, pings, statss []*loadResult
	var ratios, p99s, sratios, sp99s []float64
	for round := range c.rounds {
		m, err := load(srv.URL, "2025-11-25", c.sessions, c.duration, 0, c.spaces, srv.Pid(), mixFn)
		if err != nil {
			return err
		}
		add(m)
		p, err := load(srv.URL, "2025-11-25", c.sessions, max(c.duration/3, time.Second), 0, c.spaces, srv.Pid(), pingOp)
		if err != nil {
			return err
		}
		st, err := load(srv.URL, "2025-11-25", c.sessions, max(c.duration/3, time.Second), 0, c.spaces, srv.Pid(), statsOp(c.spaces))
		if err != nil {
			return err
		}
		mixes, pings, statss = append(mixes, m), append(pings, p), append(statss, st)
		ratios = append(ratios, m.perSec/p.perSec)
		p99s = append(p99s, m.all.P(0.99)/p.all.P(0.99))
		sratios = append(sratios, m.perSec/st.perSec)
		sp99s = append(sp99s, m.all.P(0.99)/st.all.P(0.99))
		logf("  round %d: mix %.0f ops/s (p99 %.1f ms, %d errors), ping %.0f/s (p99 %.1f ms)", round+1,
			m.perSec, m.all.P(0.99)/1000, m.errors, p.perSec, p.all.P(0.99)/1000)
	}
	m, p, st := medianLoad(mixes), medianLoad(pings), medianLoad(statss)
	var errs int64
	for _, x := range mixes {
		errs += x.errors
	}
	t.row("ping through the same gateway (the trivial request, same process)",
		fmt.Sprintf("%.0f /s, p50 %.1f ms, p99 %.1f ms, %.0f µs server CPU/call", p.perSec, p.all.P(0.5)/1000, p.all.P(0.99)/1000, p.cpuUS), "baseline", "")
	t.row("stats through the same gateway (memgate's cheapest tool: one lease, one read transaction; the tool ceiling)",
		fmt.Sprintf("%.0f /s, p50 %.1f ms, p99 %.1f ms, %.0f µs server CPU/call", st.perSec, st.all.P(0.5)/1000, st.all.P(0.99)/1000, st.cpuUS), "baseline", "")
	t.row("mix: search", fmt.Sprintf("p50 %.1f ms, p99 %.1f ms", m.hist["search"].P(0.5)/1000, m.hist["search"].P(0.99)/1000), "", "")
	if h := m.hist["remember"]; h != nil {
		t.row("mix: remember (durable)", fmt.Sprintf("p50 %.1f ms, p99 %.1f ms", h.P(0.5)/1000, h.P(0.99)/1000), "", "")
	}
	ratio, sratio := medianOf(ratios), medianOf(sratios)
	t.row("mix throughput / stats throughput", fmt.Sprintf("%.0f /s against %.0f /s: **%.2fx** (rounds: %s)", m.perSec, st.perSec, sratio, ratiosString(sratios)),
		"≥ 0.7x", verdict(sratio >= 0.7))
	t.row("mix throughput / ping throughput", fmt.Sprintf("%.0f /s against %.0f /s: **%.2fx** (rounds: %s)", m.perSec, p.perSec, ratio, ratiosString(ratios)),
		"≥ 0.7x", verdict(ratio >= 0.7))
	p99, sp99 := medianOf(p99s), medianOf(sp99s)
	t.row("mix p99 / stats p99", fmt.Sprintf("%.1f ms against %.1f ms: **%.2fx** (rounds: %s)", m.all.P(0.99)/1000, st.all.P(0.99)/1000, sp99, ratiosString(sp99s)),
		"≤ 2x", verdict(sp99 <= 2))
	t.row("mix p99 / ping p99", fmt.Sprintf("%.1f ms against %.1f ms: **%.2fx** (rounds: %s)", m.all.P(0.99)/1000, p.all.P(0.99)/1000, p99, ratiosString(p99s)),
		"≤ 2x", verdict(p99 <= 2))
	t.check("errors in the mix rounds", fmt.Sprintf("%d of %d calls%s", errs, m.ops*int64(len(mixes)), sample(mixes)), "0", errs == 0)
	t.row("CPU per call, server / load generator: mix; stats; ping", fmt.Sprintf("%.0f / %.0f µs; %.0f / %.0f µs; %.0f / %.0f µs",
		m.cpuUS, m.clientCPUUS, st.cpuUS, st.clientCPUUS, p.cpuUS, p.clientCPUUS), "", "")
	t.row("VmHWM idle → under load", fmt.Sprintf("%.1f MB → %.1f MB", mb(idle.HWMKB), mb(m.hwmKB)), "", "")
	e.figures["s4_ratio"], e.figures["s4_p99_ratio"] = ratio, p99
	e.figures["hwm_kb/memgate-http-load"] = float64(m.hwmKB)
	e.figures["hwm_kb/memgate-http-idle"] = float64(idle.HWMKB)

	// Without sessions.
	sm, err := load(srv.URL, driver.Stateless, c.sessions, c.duration/2, 0, c.spaces, srv.Pid(), mixFn)
	if err != nil {
		return err
	}
	add(sm)
	sp, err := load(srv.URL, driver.Stateless, c.sessions, max(c.duration/4, time.Second), 0, c.spaces, srv.Pid(), pingOp)
	if err != nil {
		return err
	}
	t.row("without sessions (2026-07-28): mix / server/discover (its trivial request; it has no ping)", fmt.Sprintf("%.0f /s against %.0f /s: **%.2fx**; p99 %.1f / %.1f ms",
		sm.perSec, sp.perSec, sm.perSec/sp.perSec, sm.all.P(0.99)/1000, sp.all.P(0.99)/1000), "≥ 0.7x", verdict(sm.perSec >= 0.7*sp.perSec))
	t.check("without sessions: errors", fmt.Sprintf("%d%s", sm.errors+sp.errors, sample([]*loadResult{sm, sp})), "0", sm.errors+sp.errors == 0)

	// Write-only: every session remembers, durably.
	wo, err := load(srv.URL, "2025-11-25", c.sessions, c.duration/3, 0, c.spaces, srv.Pid(), mix(mems, e.mems, 100, uniformNS(c.spaces)))
	if err != nil {
		return err
	}
	add(wo)
	e.figures["s4_write_only_per_sec"] = wo.perSec
	t.row(fmt.Sprintf("write-only, %d sessions: remember / stats", c.sessions), fmt.Sprintf("%.0f /s against %.0f /s: **%.2fx**, p50 %.1f ms, p99 %.1f ms, %.0f µs server CPU/write",
		wo.perSec, st.perSec, wo.perSec/st.perSec, wo.all.P(0.5)/1000, wo.all.P(0.99)/1000, wo.cpuUS), "≥ 0.7x", verdict(wo.perSec >= 0.7*st.perSec))
	t.check("write-only: errors", fmt.Sprintf("%d%s", wo.errors, sample([]*loadResult{wo})), "0", wo.errors == 0)

	// Sessions sweep, for the throughput plot.
	for _, n := range []int{1, 4, 16, 64} {
		if n > c.sessions {
			break
		}
		d := max(c.duration/12, time.Second)
		a, err := load(srv.URL, "2025-11-25", n, d, 0, c.spaces, srv.Pid(), mixFn)
		if err != nil {
			return err
		}
		add(a)
		b, err := load(srv.URL, "2025-11-25", n, d, 0, c.spaces, srv.Pid(), pingOp)
		if err != nil {
			return err
		}
		e.series["tput_mix"] = append(e.series["tput_mix"], point{float64(n), a.perSec})
		st, err := load(srv.URL, "2025-11-25", n, d, 0, c.spaces, srv.Pid(), statsOp(c.spaces))
		if err != nil {
			return err
		}
		e.series["tput_ping"] = append(e.series["tput_ping"], point{float64(n), b.perSec})
		e.series["tput_stats"] = append(e.series["tput_stats"], point{float64(n), st.perSec})
		e.series["p99_mix"] = append(e.series["p99_mix"], point{float64(n), a.all.P(0.99) / 1000})
	}

	stopErr := srv.Stop(60 * time.Second)
	if err := e.goSDKPeerRuns(t, m); err != nil {
		return err
	}
	t.check("graceful stop (SIGTERM)", exitText(stopErr), "exit 0", stopErr == nil)
	counts, err := e.countStores(data, c.spaces)
	if err != nil {
		return err
	}
	want := int64(c.spaces*c.perSpace) + sum(acked)
	lost := max(want-sum(counts), 0)
	t.check("acknowledged writes lost (count of every store after the stop)", fmt.Sprintf("%d (preloaded %d + acknowledged %d; counted %d)", lost, c.spaces*c.perSpace, sum(acked), sum(counts)),
		"0", lost == 0)
	e.figures["s4_lost"] = float64(lost)
	os.RemoveAll(data)
	return nil
}

func exitText(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

func sample(rs []*loadResult) string {
	for _, r := range rs {
		if r.errSample != "" {
			return " (first: " + r.errSample + ")"
		}
	}
	return ""
}

func medianLoad(rs []*loadResult) *loadResult {
	best := rs[0]
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = r.perSec
	}
	m := medianOf(xs)
	for _, r := range rs {
		if r.perSec == m {
			best = r
		}
	}
	return best
}

// killDuringLoad is S8's crash check: a write-heavy load killed with
// SIGKILL in its middle, then every acknowledged write looked for.
func (e *env) killDuringLoad(t *table) error {
	data := filepath.Join(e.dir, "s8-kill")
	spaces := 4
	mems, err := preload(data, spaces, 100, e.mems)
	if err != nil {
		return err
	}
	srv, err := e.startHTTP(data)
	if err != nil {
		return err
	}
	d := 6 * time.Second
	if e.c.smoke {
		d = 2 * time.Second
	}
	time.AfterFunc(d/2, func() { srv.Signal(syscall.SIGKILL) })
	r, err := load(srv.URL, "2025-11-25", min(64, e.c.sessions), d, 0, spaces, srv.Pid(), mix(mems, e.mems, 50, uniformNS(spaces)))
	srv.Kill()
	if err != nil {
		return err
	}
	counts, err := e.countStores(data, spaces)
	if err != nil {
		return err
	}
	want := int64(spaces*100) + sum(r.acked)
	lost := max(want-sum(counts), 0)
	t.check("kill -9 in the middle of a 50% write load over HTTP, then a restart", fmt.Sprintf("%d acknowledged writes lost (%d acknowledged before the kill; counted %d of at least %d)", lost, sum(r.acked), sum(counts), want),
		"0 lost", lost == 0)
	os.RemoveAll(data)
	return nil
}

var _ = rand.IntN

// s4base is S4's mix against an earlier build (-baseline) in the same run:
// both servers on copies of the same preloaded namespaces, both with the
// noop tool, their mix rounds interleaved with a noop load on memgate's,
// so that a change to the MCP layer is judged against the tree before it
// and against a trivial tool through the same gateway.
func (e *env) s4base() error {
	c := e.c
	if c.baselineBin == "" {
		return fmt.Errorf("S4base needs -baseline")
	}
	t := e.newTable(fmt.Sprintf("S4 against the tree before — %d sessions, %d namespaces × %d memories, 90%% search / 10%% remember, %s per round",
		c.sessions, c.spaces, c.perSpace, c.duration))
	dirs := map[string]string{"memgate": filepath.Join(e.dir, "s4-new"), "baseline": filepath.Join(e.dir, "s4-base")}
	var mems [][]memgate.Write
	for _, d := range dirs {
		var err error
		if mems, err = preload(d, c.spaces, c.perSpace, e.mems); err != nil {
			return err
		}
	}
	bin := c.memgateBin
	srv, err := e.startHTTP(dirs["memgate"], "--noop")
	if err != nil {
		return err
	}
	defer srv.Kill()
	e.c.memgateBin = c.baselineBin
	base, err := e.startHTTP(dirs["baseline"], "--noop")
	e.c.memgateBin = bin
	if err != nil {
		return err
	}
	defer base.Kill()
	acked := make([]int64, c.spaces)
	add := func(r *loadResult) {
		for i, n := range r.acked {
			acked[i] += n
		}
	}
	mixFn := mixLimit(mems, e.mems, 10, c.searchLimit, uniformNS(c.spaces))
	noop := func(*rand.Rand, int) op { return op{kind: "noop", tool: "noop", args: map[string]any{}} }
	warm := min(c.duration/10, 5*time.Second)
	w, err := load(srv.URL, "2025-11-25", c.sessions, warm, 0, c.spaces, srv.Pid(), mixFn)
	if err != nil {
		return err
	}
	add(w)
	if _, err := load(base.URL, "2025-11-25", c.sessions, warm, 0, c.spaces, base.Pid(), mixFn); err != nil {
		return err
	}
	var news, bases, noops []*loadResult
	var tput, p99s []float64
	for round := range c.rounds {
		m, err := load(srv.URL, "2025-11-25", c.sessions, c.duration, 0, c.spaces, srv.Pid(), mixFn)
		if err != nil {
			return err
		}
		add(m)
		b, err := load(base.URL, "2025-11-25", c.sessions, c.duration, 0, c.spaces, base.Pid(), mixFn)
		if err != nil {
			return err
		}
		n, err := load(srv.URL, "2025-11-25", c.sessions, max(c.duration/3, time.Second), 0, c.spaces, srv.Pid(), noop)
		if err != nil {
			return err
		}
		news, bases, noops = append(news, m), append(bases, b), append(noops, n)
		tput = append(tput, m.perSec/b.perSec)
		p99s = append(p99s, m.all.P(0.99)/n.all.P(0.99))
		logf("  round %d: mix %.0f ops/s (p99 %.1f ms, %d errors), the tree before %.0f ops/s (p99 %.1f ms), noop %.0f/s (p99 %.1f ms)", round+1,
			m.perSec, m.all.P(0.99)/1000, m.errors, b.perSec, b.all.P(0.99)/1000, n.perSec, n.all.P(0.99)/1000)
	}
	m, b, n := medianLoad(news), medianLoad(bases), medianLoad(noops)
	t.row("noop through the same gateway (the trivial tool, same process)",
		fmt.Sprintf("%.0f /s, p50 %.1f ms, p99 %.1f ms, %.0f µs server CPU/call", n.perSec, n.all.P(0.5)/1000, n.all.P(0.99)/1000, n.cpuUS), "baseline", "")
	t.row("the tree before: mix", fmt.Sprintf("%.0f /s, p50 %.1f ms, p99 %.1f ms, %.0f µs server CPU/call, VmHWM %.1f MB",
		b.perSec, b.all.P(0.5)/1000, b.all.P(0.99)/1000, b.cpuUS, mb(b.hwmKB)), "baseline", "")
	t.row("memgate: mix", fmt.Sprintf("%.0f /s, p50 %.1f ms, p99 %.1f ms, %.0f µs server CPU/call, VmHWM %.1f MB",
		m.perSec, m.all.P(0.5)/1000, m.all.P(0.99)/1000, m.cpuUS, mb(m.hwmKB)), "", "")
	r, p := medianOf(tput), medianOf(p99s)
	t.row("mix throughput / the tree before's", fmt.Sprintf("**%.2fx** (rounds: %s)", r, ratiosString(tput)), "≥ 1.5x", verdict(r >= 1.5))
	t.row("mix p99 / noop p99", fmt.Sprintf("%.1f ms against %.1f ms: **%.2fx** (rounds: %s)", m.all.P(0.99)/1000, n.all.P(0.99)/1000, p, ratiosString(p99s)),
		"≤ 2x", verdict(p <= 2))
	var errCount int64
	for _, x := range append(news, noops...) {
		errCount += x.errors
	}
	t.check("errors (memgate's mix and noop rounds)", fmt.Sprintf("%d%s", errCount, sample(append(news, noops...))), "0", errCount == 0)
	stopErr := srv.Stop(60 * time.Second)
	t.check("graceful stop (SIGTERM)", exitText(stopErr), "exit 0", stopErr == nil)
	counts, err := e.countStores(dirs["memgate"], c.spaces)
	if err != nil {
		return err
	}
	want := int64(c.spaces*c.perSpace) + sum(acked)
	lost := max(want-sum(counts), 0)
	t.check("acknowledged writes lost (count of every store after the stop)", fmt.Sprintf("%d (preloaded %d + acknowledged %d; counted %d)", lost, c.spaces*c.perSpace, sum(acked), sum(counts)),
		"0", lost == 0)
	e.figures["s4base_ratio"], e.figures["s4base_p99_noop"] = r, p
	for _, d := range dirs {
		os.RemoveAll(d)
	}
	return nil
}
