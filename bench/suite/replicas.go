package suite

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/memgate/memgate/bench/driver"
	"github.com/memgate/memgate/bench/measure"
	"github.com/memgate/memgate/bench/replicas"
	"github.com/memgate/memgate/storage/postgres"
)

// replicas is S4's mix over PostgreSQL (docs/SCALING.md): the namespaces
// of S4 preloaded into bbolt and moved into a new database the way
// SCALING.md says (memgate export from the bbolt folder, memgate import
// --store postgres per namespace); then, round by round, the mix on one
// gateway over bbolt, on one gateway over PostgreSQL, and on two gateways
// over the same database with half the sessions each. Then the staleness a
// reader sees: a writer on one gateway remembers a unique text, a reader on
// the other polls for it. Every acknowledged write is counted afterwards,
// in the bbolt stores and in the database.
func (e *env) replicas() error {
	c := e.c
	admin := cmp.Or(c.postgres, os.Getenv(replicas.AdminVariable))
	if admin == "" {
		return fmt.Errorf("needs a PostgreSQL server: -postgres DSN or %s (scripts/postgres.sh start prints one)", replicas.AdminVariable)
	}
	stalenesses, err := durations(c.staleness)
	if err != nil || len(stalenesses) == 0 {
		return fmt.Errorf("-replica-staleness %q: a list of durations", c.staleness)
	}
	ctx := context.Background()
	dsn, drop, err := replicas.NewDatabase(ctx, admin)
	if err != nil {
		return err
	}
	defer func() {
		if err := drop(); err != nil {
			logf("  dropping the database: %v", err)
		}
	}()
	pg, err := replicas.FindServer(ctx, dsn)
	if err != nil {
		return err
	}
	pgCPU := func() time.Duration { d, _ := pg.CPU(); return d }
	version, _ := replicas.Setting(ctx, dsn, "server_version")
	fsync, _ := replicas.Setting(ctx, dsn, "fsync")
	pgEnv := []string{postgres.DSNVariable + "=" + dsn}

	t := e.newTable(fmt.Sprintf("Replicas over PostgreSQL — %d sessions, %d namespaces × %d memories, 90%% search / 10%% remember, %s per round",
		c.sessions, c.spaces, c.perSpace, c.duration))
	t.row("PostgreSQL", fmt.Sprintf("%s on this machine, fsync=%s", strings.Fields(version + " ?")[0], fsync), "", "")
	loads := []string{loadAvg()}

	// The namespaces of S4, in bbolt; then moved into the database.
	bdata := filepath.Join(e.dir, "replicas-bbolt")
	logf("  preloading %d × %d…", c.spaces, c.perSpace)
	mems, err := preload(bdata, c.spaces, c.perSpace, e.mems)
	if err != nil {
		return err
	}
	if out, err := e.memgateCmd(pgEnv, "migrate").CombinedOutput(); err != nil {
		return fmt.Errorf("memgate migrate: %w: %s", err, out)
	}
	logf("  export and import into PostgreSQL…")
	var exportTime, importTime time.Duration
	for s := range c.spaces {
		file := filepath.Join(e.dir, nsName(s)+".jsonl")
		began := time.Now()
		if out, err := e.memgateCmd(nil, "export", "--data-dir", bdata, "--namespace", nsName(s), "--out", file).CombinedOutput(); err != nil {
			return fmt.Errorf("memgate export: %w: %s", err, out)
		}
		exportTime += time.Since(began)
		began = time.Now()
		if out, err := e.memgateCmd(pgEnv, "import", "--store", "postgres", "--namespace", nsName(s), file).CombinedOutput(); err != nil {
			return fmt.Errorf("memgate import --store postgres: %w: %s", err, out)
		}
		importTime += time.Since(began)
		os.Remove(file)
	}
	n := float64(c.spaces * c.perSpace)
	t.row("moving the namespaces into PostgreSQL: `memgate export` from the bbolt folder, `memgate import --store postgres`, one namespace at a time",
		fmt.Sprintf("export %.1f s (%.0f memories/s), import %.1f s (%.0f memories/s, each namespace one log entry)",
			exportTime.Seconds(), n/exportTime.Seconds(), importTime.Seconds(), n/importTime.Seconds()), "", "")

	// The servers: one over bbolt, two over the database.
	cpuA, cpuB, cores := "", "", "not pinned: the gateways, PostgreSQL and the load generator share both cores"
	if c.pin {
		cpuA, cpuB = "0", "1"
		cores = "the bbolt gateway and replica A pinned to core 0, replica B to core 1 (taskset; each gateway's GOMAXPROCS is then 1); PostgreSQL and the load generator not pinned"
	}
	t.row("how the 2 cores were shared", cores, "", "")
	bb, err := e.startGateway(bdata, nil, cpuA)
	if err != nil {
		return err
	}
	defer bb.Kill()
	main := stalenesses[0]
	// With -cpuprofile P: A is profiled through the last round's load on
	// one gateway (P.replica-one), B through the last round's load on two
	// (P.replica-two).
	profFlags := func(name string) []string {
		if c.profile == "" {
			return nil
		}
		return []string{"--cpuprofile", c.profile + "." + name, "--profile-signal"}
	}
	a, err := e.startGateway(filepath.Join(e.dir, "replica-a"), pgEnv, cpuA, append([]string{"--store", "postgres", "--migrate", "--replica-staleness", main.String()},
		profFlags("replica-one")...)...)
	if err != nil {
		return err
	}
	defer a.Kill()
	b, err := e.startGateway(filepath.Join(e.dir, "replica-b"), pgEnv, cpuB, append([]string{"--store", "postgres", "--migrate", "--replica-staleness", main.String()},
		profFlags("replica-two")...)...)
	if err != nil {
		return err
	}
	defer b.Kill()

	// A fresh replica's first search of a namespace replays its log: the
	// import, one entry of the namespace's memories.
	first := driver.NewHist()
	for _, srv := range []*driver.Server{a, b} {
		s, err := driver.Open(ctx, driver.NewHTTPClient(1), srv.URL, "2025-11-25")
		if err != nil {
			return err
		}
		for i := range c.spaces {
			d, err := s.CallToolCheck(ctx, "search", map[string]any{"query": "automobile", "namespace": nsName(i)})
			if err != nil {
				return fmt.Errorf("first search of %s: %w", nsName(i), err)
			}
			first.Record(d)
		}
		s.Close(ctx)
	}
	t.row(fmt.Sprintf("first search of a namespace on a fresh replica over HTTP (its log replayed: one import of %d memories)", c.perSpace),
		fmt.Sprintf("p50 %.0f ms, max %.0f ms (%d namespaces × 2 replicas)", first.P(0.5)/1000, first.P(1)/1000, c.spaces), "", "")

	acked := make([]int64, c.spaces)  // over bbolt
	packed := make([]int64, c.spaces) // over PostgreSQL
	add := func(to []int64, r *loadResult) {
		for i, x := range r.acked {
			to[i] += x
		}
	}
	mixFn := mixLimit(mems, e.mems, 10, c.searchLimit, uniformNS(c.spaces))
	pgMeter := map[string]func() time.Duration{"postgres": pgCPU}
	runBbolt := func(d time.Duration) (*loadResult, error) {
		r, err := load(bb.URL, "2025-11-25", c.sessions, d, 0, c.spaces, bb.Pid(), mixFn)
		if err == nil {
			add(acked, r)
		}
		return r, err
	}
	runPG := func(d time.Duration, srvs ...*driver.Server) (*loadResult, error) {
		var urls []string
		var pids []int
		for _, s := range srvs {
			urls, pids = append(urls, s.URL), append(pids, s.Pid())
		}
		r, err := loadOn(urls, pids, pgMeter, "2025-11-25", c.sessions, d, 0, c.spaces, mixFn)
		if err == nil {
			add(packed, r)
		}
		return r, err
	}
	warm := min(c.duration/10, 5*time.Second)
	if _, err := runBbolt(warm); err != nil {
		return err
	}
	if _, err := runPG(warm, a, b); err != nil {
		return err
	}
	var bbs, ones, twos []*loadResult
	var pgRatios, twoRatios []float64
	for round := range c.rounds {
		x, err := runBbolt(c.duration)
		if err != nil {
			return err
		}
		loads = append(loads, loadAvg())
		last := c.profile != "" && round == c.rounds-1
		if last {
			a.Signal(syscall.SIGUSR1)
		}
		y, err := runPG(c.duration, a)
		if err != nil {
			return err
		}
		if last {
			a.Signal(syscall.SIGUSR2)
			b.Signal(syscall.SIGUSR1)
		}
		loads = append(loads, loadAvg())
		z, err := runPG(c.duration, a, b)
		if err != nil {
			return err
		}
		if last {
			b.Signal(syscall.SIGUSR2)
		}
		loads = append(loads, loadAvg())
		bbs, ones, twos = append(bbs, x), append(ones, y), append(twos, z)
		pgRatios, twoRatios = append(pgRatios, y.perSec/x.perSec), append(twoRatios, z.perSec/y.perSec)
		logf("  round %d: bbolt %.0f ops/s (p99 %.1f ms), one replica %.0f ops/s (p99 %.1f ms), two %.0f ops/s (p99 %.1f ms); errors %d, %d, %d; load %s",
			round+1, x.perSec, x.all.P(0.99)/1000, y.perSec, y.all.P(0.99)/1000, z.perSec, z.all.P(0.99)/1000, x.errors, y.errors, z.errors, loadAvg())
	}
	x, y, z := medianLoad(bbs), medianLoad(ones), medianLoad(twos)
	describe := func(r *loadResult, servers string) string {
		s := fmt.Sprintf("%.0f /s, p50 %.1f ms, p99 %.1f ms; search p50 %.1f ms, remember p50 %.1f ms, p99 %.1f ms; CPU per call: %s %.0f µs",
			r.perSec, r.all.P(0.5)/1000, r.all.P(0.99)/1000, hp(r, "search", 0.5), hp(r, "remember", 0.5), hp(r, "remember", 0.99), servers, r.cpuUS)
		if pg, ok := r.otherUS["postgres"]; ok {
			s += fmt.Sprintf(", PostgreSQL %.0f µs", pg)
		}
		return s + fmt.Sprintf(", load generator %.0f µs", r.clientCPUUS)
	}
	t.row("one gateway over bbolt (S4's mix)", describe(x, "gateway"), "baseline", "")
	t.row("one gateway over PostgreSQL (replica A)", describe(y, "gateway"), "", "")
	t.row("two gateways over PostgreSQL (A and B, half the sessions each)", describe(z, "gateways"), "", "")
	pr, tr := medianOf(pgRatios), medianOf(twoRatios)
	t.row("one gateway: PostgreSQL / bbolt throughput", fmt.Sprintf("**%.2fx** (rounds: %s)", pr, ratiosString(pgRatios)), "≥ 0.5x", verdict(pr >= 0.5))
	t.row("two gateways / one gateway over PostgreSQL", fmt.Sprintf("**%.2fx** (rounds: %s)", tr, ratiosString(twoRatios)), "≥ 1.6x", verdict(tr >= 1.6))
	var errs int64
	all := append(append(append([]*loadResult{}, bbs...), ones...), twos...)
	for _, r := range all {
		errs += r.errors
	}
	t.check("errors in the rounds", fmt.Sprintf("%d of %d calls%s", errs, sumOps(all), sample(all)), "0", errs == 0)

	// Staleness: at the main setting on A and B, then on new pairs.
	probes := []*driver.Server{a, b}
	if c.staleSamples <= 0 {
		stalenesses = nil
	}
	for i, st := range stalenesses {
		if i > 0 {
			var pair []*driver.Server
			for _, name := range []string{"a", "b"} {
				s, err := e.startGateway(filepath.Join(e.dir, fmt.Sprintf("replica-%s-%d", name, i)), pgEnv, "", "--store", "postgres", "--replica-staleness", st.String())
				if err != nil {
					return err
				}
				defer s.Kill()
				pair = append(pair, s)
			}
			probes = pair
		}
		logf("  staleness at %s: %d samples…", st, c.staleSamples)
		h, missed, err := staleness(ctx, probes[0].URL, probes[1].URL, fmt.Sprintf("stale-%d", i), c.staleSamples, st)
		if err != nil {
			return err
		}
		loads = append(loads, loadAvg())
		t.row(fmt.Sprintf("staleness at --replica-staleness %s: from the writer's acknowledgement on A to the reader's first hit on B (polling every 2 ms)", st),
			fmt.Sprintf("p50 %.0f ms, p99 %.0f ms, max %.0f ms (%d samples, %d not found within %s)", h.P(0.5)/1000, h.P(0.99)/1000, h.P(1)/1000, h.Count(), missed, 10*st+5*time.Second),
			fmt.Sprintf("max ≤ %s (the documented bound)", st), verdict(missed == 0 && h.Count() > 0 && h.P(1) <= measure.US(st)))
	}

	// Every acknowledged write, counted after a graceful stop.
	for _, s := range []struct {
		name string
		srv  *driver.Server
	}{{"the bbolt gateway", bb}, {"replica A", a}, {"replica B", b}} {
		err := s.srv.Stop(60 * time.Second)
		t.check("graceful stop (SIGTERM) of "+s.name, exitText(err), "exit 0", err == nil)
	}
	counts, err := e.countStores(bdata, c.spaces)
	if err != nil {
		return err
	}
	pcounts, err := e.countShared(pgEnv, c.spaces)
	if err != nil {
		return err
	}
	for _, side := range []struct {
		name          string
		acked, counts []int64
	}{{"bbolt", acked, counts}, {"PostgreSQL", packed, pcounts}} {
		want := int64(c.spaces*c.perSpace) + sum(side.acked)
		lost := max(want-sum(side.counts), 0)
		t.check("acknowledged writes lost, "+side.name, fmt.Sprintf("%d (preloaded %d + acknowledged %d; counted %d)", lost, c.spaces*c.perSpace, sum(side.acked), sum(side.counts)),
			"0", lost == 0)
	}
	t.row("load average (1 min) at the start, after each load, at the end", strings.Join(loads, ", "), "", "")
	e.figures["replicas_pg_ratio"], e.figures["replicas_two_ratio"] = pr, tr
	os.RemoveAll(bdata)
	return nil
}

// startGateway is startHTTP with more environment, pinned to the CPUs of
// cpus (taskset's list) when it is not "".
func (e *env) startGateway(data string, env []string, cpus string, extra ...string) (*driver.Server, error) {
	argv := append([]string{e.c.memgateBin, "serve", "--transport", "http", "--bind", "127.0.0.1:0",
		"--path", "/mcp", "--data-dir", data, "--namespace-arg"}, extra...)
	if cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	if e.c.serverEnv != "" {
		env = append(env, strings.Split(e.c.serverEnv, ",")...)
	}
	return driver.StartServer("memgate-http", argv, env, 30*time.Second)
}

// memgateCmd is a memgate command with more environment.
func (e *env) memgateCmd(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(e.c.memgateBin, args...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// countShared is countStores for the database of env.
func (e *env) countShared(env []string, spaces int) ([]int64, error) {
	out := make([]int64, spaces)
	for s := range spaces {
		b, err := e.memgateCmd(env, "stats", "--store", "postgres", "--namespace", nsName(s)).Output()
		if err != nil {
			return nil, fmt.Errorf("stats of %s: %w", nsName(s), err)
		}
		out[s] = countOf(b)
	}
	return out, nil
}

// staleness measures how long a write acknowledged on the gateway at aURL
// takes to be found by a search on the one at bURL: in each of three
// namespaces, a reader on B searches every 2 ms without pause, for the
// probe under way when there is one; a writer on A waits a random part of
// bound (so that its write falls anywhere in B's cycle of looks at the
// log), remembers a text of a random word, and the reader times from the
// acknowledgement to the first answer that holds it.
func staleness(ctx context.Context, aURL, bURL, prefix string, samples int, bound time.Duration) (*driver.Hist, int, error) {
	const pairs = 3
	h := driver.NewHist()
	var mu sync.Mutex
	var missed atomic.Int64
	errs := make(chan error, pairs)
	var wg sync.WaitGroup
	for p := range pairs {
		ns := fmt.Sprintf("%s-%d", prefix, p)
		per := (samples + pairs - 1 - p) / pairs
		wg.Go(func() {
			errs <- probePair(ctx, aURL, bURL, ns, per, bound, uint64(p), func(d time.Duration) {
				mu.Lock()
				h.Record(d)
				mu.Unlock()
			}, func() { missed.Add(1) })
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return nil, 0, err
		}
	}
	return h, int(missed.Load()), nil
}

type probe struct {
	word  string
	acked time.Time
	found chan time.Duration // the delay, or -1 when not found in time
}

func probePair(ctx context.Context, aURL, bURL, ns string, samples int, bound time.Duration, seed uint64,
	record func(time.Duration), miss func()) error {
	client := driver.NewHTTPClient(2)
	defer client.CloseIdleConnections()
	w, err := driver.Open(ctx, client, aURL, "2025-11-25")
	if err != nil {
		return err
	}
	defer w.Close(ctx)
	r, err := driver.Open(ctx, client, bURL, "2025-11-25")
	if err != nil {
		return err
	}
	defer r.Close(ctx)
	rnd := rand.New(rand.NewPCG(seed, 11))
	word := func() string {
		const consonants = "bcdfghjklmnpqrstvwxz"
		b := make([]byte, 12)
		for i := range b {
			b[i] = consonants[rnd.IntN(len(consonants))]
		}
		return string(b)
	}
	remember := func(text string) error {
		_, err := w.CallToolCheck(ctx, "remember", map[string]any{"text": text, "namespace": ns})
		return err
	}
	hits := func(q string) (int, error) {
		res, _, err := r.CallTool(ctx, "search", map[string]any{"query": q, "namespace": ns})
		if err != nil {
			return 0, err
		}
		var out struct {
			Hits []json.RawMessage `json:"hits"`
		}
		if err := json.Unmarshal(res, &out); err != nil {
			return 0, err
		}
		return len(out.Hits), nil
	}
	// The namespace made, and seen on B.
	if err := remember("staleness probe namespace " + ns); err != nil {
		return err
	}
	for deadline := time.Now().Add(10*bound + 5*time.Second); ; time.Sleep(2 * time.Millisecond) {
		n, err := hits("namespace")
		if err != nil {
			return err
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the staleness probes' namespace never showed on B")
		}
	}
	var cur atomic.Pointer[probe]
	stop := make(chan struct{})
	readerDone := make(chan error, 1)
	go func() {
		// The reader: never a pause longer than 2 ms between searches.
		for {
			select {
			case <-stop:
				readerDone <- nil
				return
			default:
			}
			p := cur.Load()
			q := "namespace"
			if p != nil {
				q = p.word
			}
			n, err := hits(q)
			if err != nil {
				readerDone <- err
				return
			}
			if p != nil {
				if d := time.Since(p.acked); n > 0 {
					cur.Store(nil)
					p.found <- d
				} else if d > 10*bound+5*time.Second {
					cur.Store(nil)
					p.found <- -1
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	var werr error
	for range samples {
		time.Sleep(time.Duration(rnd.Int64N(int64(bound))))
		p := &probe{word: word(), found: make(chan time.Duration, 1)}
		if werr = remember("staleness probe " + p.word); werr != nil {
			break
		}
		p.acked = time.Now()
		cur.Store(p)
		var d time.Duration
		select {
		case d = <-p.found:
		case werr = <-readerDone:
		}
		if werr != nil {
			readerDone <- werr
			break
		}
		if d < 0 {
			miss()
		} else {
			record(d)
		}
	}
	close(stop)
	if err := <-readerDone; err != nil {
		return err
	}
	return werr
}

func hp(r *loadResult, kind string, q float64) float64 {
	if h := r.hist[kind]; h != nil {
		return h.P(q) / 1000
	}
	return 0
}

func sumOps(rs []*loadResult) int64 {
	var n int64
	for _, r := range rs {
		n += r.ops + r.errors
	}
	return n
}

func durations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for f := range strings.SplitSeq(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// loadAvg is the machine's load average over the last minute.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}
