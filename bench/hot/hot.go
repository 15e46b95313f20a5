// Package hot measures the MCP hot path of a search over stdio: S3's q3
// queries (three words, limit 10) at 100,000 memories, each followed by a
// noop call, against one or more benchmark builds of memgate serving the
// same store, in turn, round after round. It reports, per build, the medians
// over the rounds of
//
//   - the p50 of q3 and of noop as the suite measures them (from the write
//     of the request to the client's decoding of the response line), and to
//     the read of the response line alone;
//   - the server's CPU per q3 and per noop, from /proc: a phase of q3+noop
//     pairs, then one of noop+noop pairs, each as many calls;
//   - the bytes of a q3 answer.
//
// The store is imported in process once (into -dir, which is kept and
// reused); the builds open it read-only in effect, since searches write
// nothing. With -cpuprofile each build's last round is profiled
// (--cpuprofile FILE.LABEL --profile-signal, between the q3 phase's start
// and end).
//
//	go build -tags memgatebench -o /tmp/mg-a ../cmd/memgate   # in bench/
//	go run . hot -memgate /tmp/mg-a,/tmp/mg-b -dir /tmp/hot-store
package hot

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/bench/corpus"
	"github.com/memgate/memgate/bench/driver"
	"github.com/memgate/memgate/bench/measure"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

// Main runs the harness with the command-line arguments args (after the
// subcommand's name).
func Main(args []string) error {
	fs := flag.NewFlagSet("hot", flag.ContinueOnError)
	bins := fs.String("memgate", "", "benchmark builds of memgate (-tags memgatebench), comma-separated, run in turn")
	n := fs.Int("n", 100000, "memories in the store")
	queries := fs.Int("queries", 1000, "q3 queries per round (each followed by a noop)")
	rounds := fs.Int("rounds", 3, "rounds; each runs every build once, in turn")
	dir := fs.String("dir", "", "folder of the store, kept and reused (default: a temporary one, removed after)")
	seed := fs.Int64("seed", 1, "seed of the corpus and the queries")
	profile := fs.String("cpuprofile", "", "profile each build's last q3 phase into FILE.LABEL (LABEL: the build's file name)")
	env := fs.String("server-env", "", "extra environment of the servers, as K=V,K=V (e.g. GOGC=100)")
	inProcess := fs.Bool("in-process", false, "also time storage.Search on the same store in this process: back to back, after 8 MiB of other memory is touched, and after a 300 µs sleep (profiled into FILE.in-process with -cpuprofile)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bins == "" && !*inProcess {
		return errors.New("-memgate: no build given")
	}
	var extra []string
	if *env != "" {
		extra = strings.Split(*env, ",")
	}
	var builds []string
	if *bins != "" {
		builds = strings.Split(*bins, ",")
	}
	return run(builds, *n, *queries, *rounds, *dir, *seed, *profile, extra, *inProcess, os.Stdout)
}

// figures are one build's measurements in one round.
type figures struct {
	q3, q3Read, noop, noopRead float64 // p50s, µs
	cpuQ3, cpuNoop             float64 // server CPU per call, µs
	bytes                      float64 // mean q3 response line
}

func run(bins []string, n, queries, rounds int, dir string, seed int64, profile string, env []string, inProcess bool, out io.Writer) error {
	dir, done, err := measure.WorkDir(dir, "memgate-hot")
	if err != nil {
		return err
	}
	defer done()
	mems, err := memories(n, seed)
	if err != nil {
		return err
	}
	path := tenants.StoreFile(dir, memgate.DefaultNamespace)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "hot: importing %d memories into %s…\n", len(mems), dir)
		if err := corpus.ImportStore(path, mems, func(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i*7919) }); err != nil {
			return err
		}
	}
	qs := corpus.KnownItem(mems, 3, queries, seed+int64(len(mems)))
	warm := corpus.KnownItem(mems, 3, 200, seed+7)
	if inProcess {
		if err := searchInProcess(path, qs, rounds, profile, out); err != nil {
			return err
		}
		if len(bins) == 0 {
			return nil
		}
	}
	all := make([][]figures, len(bins))
	for r := range rounds {
		for i, bin := range bins {
			prof := ""
			if profile != "" && r == rounds-1 {
				prof = profile + "." + filepath.Base(bin)
			}
			f, err := round(bin, dir, qs, warm, prof, env)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "hot: round %d %s: q3 p50 %.0f µs (read %.0f), noop %.0f µs (read %.0f), CPU q3 %.0f µs, noop %.0f µs, %.0f B\n",
				r+1, filepath.Base(bin), f.q3, f.q3Read, f.noop, f.noopRead, f.cpuQ3, f.cpuNoop, f.bytes)
			all[i] = append(all[i], f)
		}
	}
	fmt.Fprintf(out, "q3 (limit 10) and noop over stdio at %d memories, %d queries a round, medians of %d rounds\n\n", len(mems), len(qs), rounds)
	fmt.Fprintln(out, "| build | q3 p50 | noop p50 | q3 − noop | to the read: q3, noop, q3 − noop | server CPU: q3, noop, q3 − noop | q3 answer |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|")
	for i, bin := range bins {
		m := func(get func(figures) float64) float64 {
			xs := make([]float64, len(all[i]))
			for j, f := range all[i] {
				xs[j] = get(f)
			}
			return measure.Median(xs)
		}
		fmt.Fprintf(out, "| %s | %.0f µs | %.0f µs | %.0f µs | %.0f, %.0f, %.0f µs | %.0f, %.0f, %.0f µs | %.0f B |\n", filepath.Base(bin),
			m(func(f figures) float64 { return f.q3 }), m(func(f figures) float64 { return f.noop }),
			m(func(f figures) float64 { return f.q3 - f.noop }),
			m(func(f figures) float64 { return f.q3Read }), m(func(f figures) float64 { return f.noopRead }),
			m(func(f figures) float64 { return f.q3Read - f.noopRead }),
			m(func(f figures) float64 { return f.cpuQ3 }), m(func(f figures) float64 { return f.cpuNoop }),
			m(func(f figures) float64 { return f.cpuQ3 - f.cpuNoop }),
			m(func(f figures) float64 { return f.bytes }))
	}
	return nil
}

// round starts bin on the store in dir, warms it with warm, then times qs
// (each followed by a noop) and as many noop pairs.
func round(bin, dir string, qs, warm []corpus.Query, profile string, env []string) (figures, error) {
	var f figures
	argv := []string{bin, "serve", "--data-dir", dir, "--noop"}
	if profile != "" {
		argv = append(argv, "--cpuprofile", profile, "--profile-signal")
	}
	s, err := driver.StartStdio("memgate", argv, env, "")
	if err != nil {
		return f, err
	}
	defer s.Close(time.Minute)
	if err := s.Initialize(); err != nil {
		return f, err
	}
	search := func(q corpus.Query) error {
		_, _, err := s.CallTool("search", map[string]any{"query": q.Text, "limit": 10})
		return err
	}
	noop := func() (time.Duration, time.Duration, error) {
		_, d, err := s.CallTool("noop", map[string]any{})
		return d, s.LastRead, err
	}
	for _, q := range warm {
		if err := search(q); err != nil {
			return f, err
		}
		if _, _, err := noop(); err != nil {
			return f, err
		}
	}
	pid := strconv.Itoa(s.Pid())
	var q3, q3Read, nd, ndRead []time.Duration
	total := 0
	if profile != "" {
		s.Signal(syscall.SIGUSR1)
	}
	u0, err := measure.ReadUsage(pid)
	if err != nil {
		return f, err
	}
	for _, q := range qs {
		_, d, err := s.CallTool("search", map[string]any{"query": q.Text, "limit": 10})
		if err != nil {
			return f, err
		}
		q3, q3Read = append(q3, d), append(q3Read, s.LastRead)
		total += s.LastBytes
		d, r, err := noop()
		if err != nil {
			return f, err
		}
		nd, ndRead = append(nd, d), append(ndRead, r)
	}
	u1, err := measure.ReadUsage(pid)
	if err != nil {
		return f, err
	}
	if profile != "" {
		s.Signal(syscall.SIGUSR2)
	}
	for range qs {
		for range 2 {
			if _, _, err := noop(); err != nil {
				return f, err
			}
		}
	}
	u2, err := measure.ReadUsage(pid)
	if err != nil {
		return f, err
	}
	k := float64(len(qs))
	f.cpuNoop = measure.US(u2.CPU-u1.CPU) / (2 * k)
	f.cpuQ3 = measure.US(u1.CPU-u0.CPU)/k - f.cpuNoop
	f.q3, f.q3Read = p50(q3), p50(q3Read)
	f.noop, f.noopRead = p50(nd), p50(ndRead)
	f.bytes = float64(total) / k
	return f, nil
}

func p50(ds []time.Duration) float64 { return measure.Percentile(ds, 0.5) }

// memories are the suite's: WordNet gloss pairs of 50 bytes or more.
func memories(n int, seed int64) ([]memgate.Write, error) {
	if !corpus.Available() {
		return nil, fmt.Errorf("the datasets are not installed in %s: run bench/datasets.sh", corpus.Dir())
	}
	g, err := corpus.WordNet(corpus.Dir())
	if err != nil {
		return nil, err
	}
	var mems []memgate.Write
	for _, m := range corpus.Memories(g, len(g), seed) {
		if len(m.Text) >= 50 && len(mems) < n {
			mems = append(mems, m)
		}
	}
	return mems, nil
}

// searchInProcess times storage.Search of qs on the store at path in this
// process, three ways in turn each round: back to back; after 8 MiB of
// other memory is written (a cache's worth of other work between two
// searches); and after a 300 µs sleep (a server idles between calls).
func searchInProcess(path string, qs []corpus.Query, rounds int, profile string, out io.Writer) error {
	st, err := storage.Open(path, storage.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	ctx := context.Background()
	other := make([]byte, 8<<20)
	ways := []struct {
		name   string
		before func()
	}{
		{"back to back", func() {}},
		{"8 MiB touched before each", func() {
			for i := 0; i < len(other); i += 64 {
				other[i]++
			}
		}},
		{"300 µs sleep before each", func() { time.Sleep(300 * time.Microsecond) }},
	}
	// The thread's own CPU clock, the search locked to it: /proc counts
	// in ticks.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	threadCPU := func() time.Duration {
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
		return time.Duration(ts.Nano())
	}
	p50s := make([][]float64, len(ways))
	cpus := make([][]float64, len(ways))
	for range rounds {
		for w, way := range ways {
			ds := make([]time.Duration, 0, len(qs))
			var cpu time.Duration
			if profile != "" && w == len(ways)-1 {
				f, err := os.Create(profile + ".in-process")
				if err != nil {
					return err
				}
				pprof.StartCPUProfile(f)
				defer f.Close()
				defer pprof.StopCPUProfile()
			}
			for _, q := range qs {
				way.before()
				c0 := threadCPU()
				start := time.Now()
				if _, err := st.Search(ctx, memgate.Query{Text: q.Text, Limit: 10}); err != nil {
					return err
				}
				ds = append(ds, time.Since(start))
				cpu += threadCPU() - c0
			}
			p50s[w] = append(p50s[w], p50(ds))
			cpus[w] = append(cpus[w], measure.US(cpu)/float64(len(qs)))
		}
	}
	fmt.Fprintf(out, "storage.Search of the same q3 queries in process, medians of %d rounds\n\n| before each search | p50 | CPU per search |\n|---|---|---|\n", rounds)
	for w, way := range ways {
		fmt.Fprintf(out, "| %s | %.0f µs | %.0f µs |\n", way.name, measure.Median(p50s[w]), measure.Median(cpus[w]))
	}
	fmt.Fprintln(out)
	return nil
}
