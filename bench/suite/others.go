package suite

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/bench/driver"
	"github.com/memgate/memgate/bench/measure"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

// s2 is the bulk ingest: `memgate import` of a JSON Lines file, the whole
// process timed, then the disk against the raw text.
func (e *env) s2() error {
	t := e.newTable("S2: bulk ingest")
	n := min(100000, len(e.mems))
	if e.c.smoke {
		n = min(2000, n)
	}
	mems := e.mems[:n]
	file := filepath.Join(e.dir, "s2.jsonl")
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	enc := json.NewEncoder(bw)
	for _, m := range mems {
		enc.Encode(map[string]any{"text": m.Text, "tags": m.Tags, "metadata": m.Metadata})
	}
	bw.Flush()
	f.Close()
	defer os.Remove(file)
	var rates []float64
	var disk int64
	for round := range e.c.rounds {
		data := filepath.Join(e.dir, fmt.Sprint("s2-", round))
		start := time.Now()
		out, err := exec.Command(e.c.memgateBin, "import", file, "--data-dir", data).Output()
		if err != nil {
			return fmt.Errorf("memgate import: %w", err)
		}
		rates = append(rates, float64(n)/time.Since(start).Seconds())
		var rep struct {
			Imported int `json:"imported"`
		}
		json.Unmarshal(out, &rep)
		if rep.Imported != n {
			return fmt.Errorf("memgate import: %d of %d imported", rep.Imported, n)
		}
		disk = diskBytes([]string{data})
		os.RemoveAll(data)
	}
	rate := medianOf(rates)
	raw := rawBytes(mems)
	t.row(fmt.Sprintf("`memgate import` of %d memories (one process, start to exit; 1,000 per commit)", n),
		fmt.Sprintf("**%.0f memories/s** (rounds: %s), %.1f s for all", rate, rates2(rates), float64(n)/rate), "≥ 10,000/s", verdict(rate >= 10000))
	t.row("disk after the import / raw text", fmt.Sprintf("**%.2fx** (%.0f B per memory of %.0f B)", float64(disk)/float64(raw), float64(disk)/float64(n), float64(raw)/float64(n)),
		"≤ 2x", verdict(float64(disk) <= 2*float64(raw)))
	if w, ok := e.loads["@ai-devkit/memory"]; ok {
		r := rate / w.perSec
		t.row("import / ai-devkit's sequential ingest rate (S3 load)", fmt.Sprintf("%.0f against %.0f /s: **%.1fx**", rate, w.perSec, r), "≥ 8x", verdict(r >= 8))
	}
	if w := e.figures["s4_write_only_per_sec"]; w > 0 {
		t.row(fmt.Sprintf("%d parallel writers over HTTP (S4 write-only run)", e.c.sessions), fmt.Sprintf("%.0f memories/s", w), "≥ 10,000/s", verdict(w >= 10000))
	}
	e.figures["s2_import_per_sec"] = rate
	return nil
}

func rates2(xs []float64) string { return rates(xs) }

// s5 is namespace churn over HTTP: many small namespaces, more than
// --max-stores, leased by 64 sessions in a 90/10 mix, with three ways of
// choosing a namespace, against the same with every store open.
func (e *env) s5() error {
	spaces, per, maxStores := 1000, 100, 16
	d := 20 * time.Second
	if e.c.smoke {
		spaces, per, d = 50, 20, time.Second
	}
	t := e.newTable(fmt.Sprintf("S5: store eviction over HTTP — %d namespaces × %d memories, --max-stores %d, %d sessions, 90/10 mix",
		spaces, per, maxStores, e.c.sessions))
	data := filepath.Join(e.dir, "s5")
	logf("  preloading %d × %d…", spaces, per)
	mems, err := preload(data, spaces, per, e.mems)
	if err != nil {
		return err
	}
	run := func(label string, flags []string, ns func(*rand.Rand, int) int, warm bool) (*loadResult, error) {
		srv, err := e.startHTTP(data, flags...)
		if err != nil {
			return nil, err
		}
		defer srv.Stop(60 * time.Second)
		fn := mix(mems, e.mems, 10, ns)
		if warm {
			// Open every store once.
			if _, err := load(srv.URL, "2025-11-25", 8, 0, spaces/8+1, spaces, srv.Pid(), fn); err != nil {
				return nil, err
			}
		}
		r, err := load(srv.URL, "2025-11-25", e.c.sessions, d, 0, spaces, srv.Pid(), fn)
		if err != nil {
			return nil, err
		}
		logf("  %s: %.0f ops/s, p50 %.1f ms, p99 %.1f ms, too_many_stores %d, errors %d", label, r.perSec, r.all.P(0.5)/1000, r.all.P(0.99)/1000, r.tooMany, r.errors)
		return r, nil
	}
	hot, err := run("all open", []string{"--max-stores", strconv.Itoa(spaces + 16)}, uniformNS(spaces), true)
	if err != nil {
		return err
	}
	t.row("all stores open (--max-stores above the namespaces)", fmt.Sprintf("%.0f ops/s, p50 %.1f ms, p99 %.1f ms", hot.perSec, hot.all.P(0.5)/1000, hot.all.P(0.99)/1000), "baseline", "")
	zipf := func() func(*rand.Rand, int) int {
		var mu sync.Mutex
		z := rand.NewZipf(rand.New(rand.NewPCG(5, 5)), 1.1, 1, uint64(spaces-1))
		return func(*rand.Rand, int) int {
			mu.Lock()
			defer mu.Unlock()
			return int(z.Uint64())
		}
	}
	sticky := func(r *rand.Rand, w int) int {
		// Each session keeps to its namespace for runs of about 50 calls.
		if r.IntN(50) == 0 {
			return r.IntN(spaces)
		}
		return (w * 7919) % spaces
	}
	limit := []string{"--max-stores", strconv.Itoa(maxStores)}
	for _, v := range []struct {
		name string
		ns   func(*rand.Rand, int) int
	}{{"uniform", uniformNS(spaces)}, {"Zipf s = 1.1", zipf()}, {"sticky sessions", sticky}} {
		r, err := run(v.name, limit, v.ns, false)
		if err != nil {
			return err
		}
		goal, met := "", ""
		if v.name == "uniform" {
			goal, met = "≥ 0.5x all open", verdict(r.perSec >= 0.5*hot.perSec)
		}
		t.row(fmt.Sprintf("%s: throughput / all open", v.name), fmt.Sprintf("%.0f ops/s: **%.2fx**; p50 %.1f ms, p99 %.1f ms; too_many_stores %d (retried after 1 ms); VmHWM %.1f MB",
			r.perSec, r.perSec/hot.perSec, r.all.P(0.5)/1000, r.all.P(0.99)/1000, r.tooMany, mb(r.hwmKB)), goal, met)
		t.check(fmt.Sprintf("%s: errors other than too_many_stores", v.name), fmt.Sprintf("%d%s", r.errors, sample([]*loadResult{r})), "0", r.errors == 0)
		e.series["churn"] = append(e.series["churn"], point{float64(len(e.series["churn"])), r.perSec / hot.perSec})
		e.figures["s5_hwm_kb"] = math.Max(e.figures["s5_hwm_kb"], float64(r.hwmKB))
	}
	hwm := e.figures["s5_hwm_kb"]
	t.row("peak VmHWM under churn", fmt.Sprintf("%.1f MB", hwm/1024), "≤ 150 MB", verdict(hwm <= 150*1024))

	// S6 (b): the first search of a cold 100-memory store.
	if err := measure.DropCache(data); err != nil {
		return err
	}
	srv, err := e.startHTTP(data, limit...)
	if err != nil {
		return err
	}
	client := driver.NewHTTPClient(1)
	s, err := driver.Open(ctxBG(), client, srv.URL, "2025-11-25")
	if err != nil {
		srv.Kill()
		return err
	}
	h := driver.NewHist()
	for i := range min(200, spaces) {
		_, d, err := s.CallTool(ctxBG(), "search", map[string]any{"query": "entity object", "namespace": nsName(i)})
		if err != nil {
			srv.Kill()
			return err
		}
		h.Record(d)
	}
	srv.Stop(60 * time.Second)
	e.coldSmall = h
	// The same first search in this process, store by store: cold, and
	// cold but with the file read once sequentially before the open (what
	// MAP_POPULATE or a readahead on open would do), to tell the disk's
	// share from the rest.
	cold, warm := driver.NewHist(), driver.NewHist()
	for i := range min(200, spaces) {
		path := tenants.StoreFile(data, memgate.Namespace(nsName(200+i%max(spaces-200, 1))))
		if spaces <= 200 {
			path = tenants.StoreFile(data, memgate.Namespace(nsName(i)))
		}
		for _, h := range []*driver.Hist{cold, warm} {
			if err := measure.DropCache(filepath.Dir(path)); err != nil {
				return err
			}
			start := time.Now()
			if h == warm {
				if b, err := os.ReadFile(path); err != nil || len(b) == 0 {
					return fmt.Errorf("reading %s: %v", path, err)
				}
			}
			st, err := storage.Open(path, storage.Options{})
			if err != nil {
				return err
			}
			if _, err := st.Search(ctxBG(), memgate.Query{Text: "entity object", Limit: 10}); err != nil {
				st.Close()
				return err
			}
			h.Record(time.Since(start))
			st.Close()
		}
	}
	e.coldOpen, e.coldOpenRead = cold, warm
	os.RemoveAll(data)
	return nil
}

// s6 is the cold start: the page cache of the 100k store of S3 dropped,
// then the process started, initialized and asked one search.
func (e *env) s6() error {
	t := e.newTable("S6: cold start")
	e.s6t = t
	if e.memgateDir == "" {
		t.Notes = append(t.Notes, "needs S3's store; run S3 too")
		return nil
	}
	n := int(e.figures["n/memgate"])
	var ds []float64
	for range 3 {
		if err := measure.DropCache(e.memgateDir); err != nil {
			return err
		}
		start := time.Now()
		s, err := memgateSystem(e.c).start(e.memgateDir)
		if err != nil {
			return err
		}
		if _, _, err := s.CallTool("search", map[string]any{"query": "entity object thing"}); err != nil {
			s.Close(10 * time.Second)
			return err
		}
		ds = append(ds, float64(time.Since(start).Microseconds())/1000)
		if err := s.Close(60 * time.Second); err != nil {
			return err
		}
	}
	d := medianOf(ds)
	t.row(fmt.Sprintf("(a) page cache dropped, process start → initialize → first search result, %d memories", n),
		fmt.Sprintf("**%.0f ms** (runs: %s)", d, rates(ds)), "≤ 300 ms", verdict(d <= 300))
	e.figures["s6_cold_ms"] = d
	e.s6t = t
	return nil
}

// s7 gathers the footprint figures of the other scenarios and measures an
// idle server.
func (e *env) s7() error {
	t := e.newTable("S7: footprint")
	if e.coldSmall != nil && e.s6t != nil {
		p99 := e.coldSmall.P(0.99) / 1000
		e.s6t.row("(b) first search of a cold 100-memory store over HTTP (page cache dropped, store evicted)",
			fmt.Sprintf("p50 %.1f ms, **p99 %.1f ms** (%d stores)", e.coldSmall.P(0.5)/1000, p99, e.coldSmall.Count()), "p99 ≤ 5 ms", verdict(p99 <= 5))
		if e.coldOpen != nil {
			e.s6t.row("(b) diagnosis, in process: storage.Open + first search of a cold store; the same after one sequential read of the file",
				fmt.Sprintf("p50 %.2f ms, p99 %.2f ms; p50 %.2f ms, p99 %.2f ms", e.coldOpen.P(0.5)/1000, e.coldOpen.P(0.99)/1000,
					e.coldOpenRead.P(0.5)/1000, e.coldOpenRead.P(0.99)/1000), "", "")
		}
	}
	dir := filepath.Join(e.dir, "s7-idle")
	s, err := memgateSystem(e.c).start(dir)
	if err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond)
	u, _ := measure.ReadUsage(strconv.Itoa(s.Pid()))
	s.Close(10 * time.Second)
	os.RemoveAll(dir)
	t.row("memgate idle over stdio after initialize: VmHWM", fmt.Sprintf("**%.1f MB**", mb(u.HWMKB)), "≤ 20 MB", verdict(mb(u.HWMKB) <= 20))
	if v := e.figures["hwm_kb/memgate-http-idle"]; v > 0 {
		t.row("memgate HTTP gateway: VmHWM idle (10 stores open) / under the S4 load", fmt.Sprintf("%.1f MB / %.1f MB", v/1024, e.figures["hwm_kb/memgate-http-load"]/1024), "", "")
	}
	raw := e.figures["raw_bytes/memgate"]
	if n := e.figures["n/memgate"]; n > 0 {
		dm := e.figures["disk_per_memory/memgate"]
		t.row(fmt.Sprintf("memgate disk per memory after a one-by-one load of %.0f (index included) / raw text", n),
			fmt.Sprintf("%.0f B / %.0f B: **%.2fx**", dm, raw/n, dm/(raw/n)), "≤ 3x", verdict(dm <= 3*raw/n))
		for _, name := range []string{"@ai-devkit/memory", "mcp-memory-libsql", "server-memory"} {
			pn := e.figures["n/"+name]
			if pn == 0 {
				continue
			}
			pd := e.figures["disk_per_memory/"+name]
			row := fmt.Sprintf("%.0f B per memory at %.0f; VmHWM %.0f MB (memgate: %.0f MB at %.0f)", pd, pn, e.figures["hwm_kb/"+name]/1024, e.figures["hwm_kb/memgate"]/1024, n)
			goal, met := "", ""
			if name == "@ai-devkit/memory" && pn == n {
				goal = "disk ≤ 1.0x, VmHWM ≤ 0.5x"
				met = verdict(dm <= pd && e.figures["hwm_kb/memgate"] <= 0.5*e.figures["hwm_kb/"+name])
				row += fmt.Sprintf(": disk **%.2fx**, VmHWM **%.2fx**", dm/pd, e.figures["hwm_kb/memgate"]/e.figures["hwm_kb/"+name])
			}
			t.row(name, row, goal, met)
		}
	}
	return nil
}

// s8 checks that acknowledged means persisted: pipelined stdio writes, 64
// concurrent HTTP writers (S4's write-only run counts them too), and a kill
// in the middle of a load.
func (e *env) s8() error {
	t := e.newTable("S8: correctness under load")
	for _, sys := range e.systems() {
		if sys.name != "memgate" && sys.name != "server-memory" {
			continue
		}
		dir := filepath.Join(e.dir, "s8-"+safe(sys.name))
		os.MkdirAll(dir, 0o700)
		s, err := sys.start(dir)
		if err != nil {
			return err
		}
		var args []any
		for i, m := range e.mems[:200] {
			_, a := sys.write(i, m)
			args = append(args, a)
		}
		tool, _ := sys.write(0, e.mems[0])
		_, errs, err := s.Pipeline(tool, args)
		if err != nil {
			s.Close(10 * time.Second)
			return err
		}
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			}
		}
		if err := s.Close(60 * time.Second); err != nil {
			return err
		}
		kept := 0
		if sys.name == "memgate" {
			out, err := exec.Command(e.c.memgateBin, "stats", "--data-dir", dir).Output()
			if err != nil {
				return err
			}
			kept = int(countOf(out))
		} else {
			b, _ := os.ReadFile(filepath.Join(dir, "memory.jsonl"))
			kept = strings.Count(string(b), `"type":"entity"`)
		}
		if sys.name == "memgate" {
			t.check("memgate: 200 pipelined stdio writes", fmt.Sprintf("%d acknowledged, %d kept", ok, kept), "200 of 200", kept == 200 && ok == 200)
		} else {
			t.row(fmt.Sprintf("%s: 200 pipelined stdio writes", sys.name), fmt.Sprintf("%d acknowledged, %d kept", ok, kept), "", "")
		}
		os.RemoveAll(dir)
	}
	if v, ok := e.figures["s4_lost"]; ok {
		t.check(fmt.Sprintf("%d concurrent HTTP sessions writing (S4, write-only run included)", e.c.sessions), fmt.Sprintf("%.0f acknowledged writes lost", v), "0", v == 0)
	}
	return e.killDuringLoad(t)
}

// slowloris holds many half-open connections against a small
// --max-connections: memory must stay bounded, the header timeout must
// free the slots, and a normal client must be served again within that
// timeout once the attack stops.
func (e *env) slowloris() error {
	const conns, maxConns = 500, 64
	headerTimeout := 5 * time.Second
	attack := 12 * time.Second
	if e.c.smoke {
		headerTimeout, attack = 2*time.Second, 3*time.Second
	}
	t := e.newTable(fmt.Sprintf("Slowloris: %d half-open connections against --max-connections %d, --read-header-timeout %s", conns, maxConns, headerTimeout))
	data := filepath.Join(e.dir, "slowloris")
	srv, err := e.startHTTP(data, "--max-connections", strconv.Itoa(maxConns), "--read-header-timeout", headerTimeout.String())
	if err != nil {
		return err
	}
	defer srv.Kill()
	pid := strconv.Itoa(srv.Pid())
	addr := strings.TrimPrefix(strings.TrimSuffix(srv.URL, "/mcp"), "http://")
	probe := func() error {
		client := driver.NewHTTPClient(1)
		defer client.CloseIdleConnections()
		client.Timeout = 2 * time.Second
		s, err := driver.Open(ctxBG(), client, srv.URL, "2025-11-25")
		if err != nil {
			return err
		}
		_, _, err = s.CallTool(ctxBG(), "stats", map[string]any{})
		return err
	}
	if err := probe(); err != nil {
		return fmt.Errorf("before the attack: %w", err)
	}
	before, _ := measure.ReadUsage(pid)

	// The attack: keep up to conns connections open, each with a request
	// line and a header that never ends, one more header byte every second.
	stop := make(chan struct{})
	var mu sync.Mutex
	var open []net.Conn
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			mu.Lock()
			for len(open) < conns {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					break
				}
				fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nX-A: ", addr)
				open = append(open, c)
			}
			kept := open[:0]
			for _, c := range open {
				c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
				if _, err := c.Write([]byte("a")); err != nil {
					c.Close()
					continue
				}
				kept = append(kept, c)
			}
			open = kept
			mu.Unlock()
		}
	}()
	var served, refused int
	var peak int64
	deadline := time.Now().Add(attack)
	for time.Now().Before(deadline) {
		if probe() == nil {
			served++
		} else {
			refused++
		}
		if u, err := measure.ReadUsage(pid); err == nil {
			peak = max(peak, u.RSSKB)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The attack stops: no new connections, no more bytes; the half-open
	// ones stay open until the server drops them.
	close(stop)
	wg.Wait()
	stopped := time.Now()
	var back time.Duration = -1
	for time.Since(stopped) < 3*headerTimeout {
		if probe() == nil {
			back = time.Since(stopped)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	for _, c := range open {
		c.Close()
	}
	mu.Unlock()
	after, _ := measure.ReadUsage(pid)
	t.row("VmRSS before the attack → peak during it → after; VmHWM after", fmt.Sprintf("%.1f → %.1f → %.1f MB; %.1f MB", mb(before.RSSKB), mb(peak), mb(after.RSSKB), mb(after.HWMKB)),
		"bounded: peak ≤ before + 32 MB", verdict(peak <= before.RSSKB+32*1024))
	t.row("normal client during the attack (a new connection every 0.5 s)", fmt.Sprintf("%d served, %d refused or timed out", served, refused), "—", "")
	bt := "never within 3 × the timeout"
	if back >= 0 {
		bt = back.Round(10 * time.Millisecond).String()
	}
	t.check("after the attack stops: time until a normal client is served", "**"+bt+"**", "≤ header timeout ("+headerTimeout.String()+")", back >= 0 && back <= headerTimeout+500*time.Millisecond)
	stopErr := srv.Stop(30 * time.Second)
	t.check("graceful stop afterwards", exitText(stopErr), "exit 0", stopErr == nil)
	return nil
}
