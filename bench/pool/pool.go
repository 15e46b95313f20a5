// Package pool measures the tenants pool under namespace churn, in-process:
// many namespaces of a few memories each, far more than --max-stores, leased
// by concurrent workers in a 90% search / 10% remember mix. The same run
// measures the same workload with every store already open (a pool as large
// as the namespaces), which is the figure churn is judged against.
//
//	go run . pool                  # in bench/: 1,000 namespaces × 100 memories
//	go run . pool -smoke           # a few seconds, for CI
//	go run . pool -encrypt         # and the same churn with --encrypt
package pool

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/bench/measure"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

type config struct {
	spaces, perSpace, maxStores, workers int
	duration                             time.Duration
	writeEvery                           int
	retry                                time.Duration
	profile                              string
	encrypt                              bool
}

// Main runs the harness with the command-line arguments args (after the
// subcommand's name).
func Main(args []string) error {
	fs := flag.NewFlagSet("pool", flag.ContinueOnError)
	var c config
	smoke := fs.Bool("smoke", false, "a short run for CI")
	profile := fs.String("cpuprofile", "", "write a CPU profile of the churn run to this file")
	fs.IntVar(&c.spaces, "namespaces", 1000, "namespaces")
	fs.IntVar(&c.perSpace, "memories", 100, "memories per namespace")
	fs.IntVar(&c.maxStores, "max-stores", 16, "pool bound under churn")
	fs.IntVar(&c.workers, "workers", 64, "concurrent workers")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "length of each measured run")
	fs.IntVar(&c.writeEvery, "write-every", 10, "one remember per this many operations")
	fs.DurationVar(&c.retry, "retry", 100*time.Microsecond, "how long a worker waits after too_many_stores")
	fs.BoolVar(&c.encrypt, "encrypt", false, "also run the churn on encrypted stores (default KDF cost), against plain")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *smoke {
		c.spaces, c.perSpace, c.duration = 100, 20, time.Second
	}
	c.profile = *profile
	return run(c, os.Stdout)
}

func run(c config, out io.Writer) error {
	dir, err := os.MkdirTemp("", "memgate-pool-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(os.Stderr, "seeding %d namespaces × %d memories…\n", c.spaces, c.perSpace)
	if err := seed(dir, c, nil); err != nil {
		return err
	}
	// Churn first: VmHWM is a high-water mark, and the run with every store
	// open holds far more memory than churn ever may.
	if c.profile != "" {
		f, err := os.Create(c.profile)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
	}
	churn, err := load(dir, c, c.maxStores)
	if c.profile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	hot, err := load(dir, c, c.spaces) // every store fits: after warm-up, all hits
	if err != nil {
		return err
	}
	ok := func(b bool) string {
		if b {
			return "met"
		}
		return "NOT met"
	}
	fmt.Fprintf(out, "memgate pool, %d namespaces × %d memories, %d workers, %v per run, %s\n\n", c.spaces, c.perSpace, c.workers, c.duration, runtime.Version())
	fmt.Fprintf(out, "| figure | measured | goal | |\n|---|---|---|---|\n")
	fmt.Fprintf(out, "| all stores open: ops/s | %.0f | baseline | |\n", hot.rate)
	fmt.Fprintf(out, "| --max-stores %d, uniform: ops/s | %.0f (%.2fx) | ≥ 0.5x all open | %s |\n", c.maxStores, churn.rate, churn.rate/hot.rate, ok(churn.rate >= 0.5*hot.rate))
	fmt.Fprintf(out, "| lease hit p50 / p99 | %.0f µs / %.0f µs | | |\n", churn.hitP50, churn.hitP99)
	fmt.Fprintf(out, "| lease miss (evict + open) p50 / p99 | %.2f ms / %.2f ms | ≤ 3 ms / ≤ 20 ms | %s |\n", churn.missP50/1000, churn.missP99/1000, ok(churn.missP50 <= 3000 && churn.missP99 <= 20000))
	fmt.Fprintf(out, "| misses, too_many_stores, errors | %d, %d, %d | 0 errors | %s |\n", churn.misses, churn.refused, churn.errors, ok(churn.errors == 0))
	fmt.Fprintf(out, "| peak memory (VmHWM) under churn, seeding included | %.0f MB | ≤ 150 MB | %s |\n", churn.hwmMB, ok(churn.hwmMB <= 150))
	if churn.errors+hot.errors > 0 {
		return fmt.Errorf("%d operations failed with an error other than too_many_stores", churn.errors+hot.errors)
	}
	if !c.encrypt {
		return nil
	}
	// The same churn over encrypted stores, each pool with an Encryption of
	// its own, as a new process has: its one Argon2id run is in the figure.
	encDir := dir + "-enc"
	defer os.RemoveAll(encDir)
	fmt.Fprintf(os.Stderr, "seeding %d encrypted namespaces…\n", c.spaces)
	if err := seed(encDir, c, newEncryption(encDir)); err != nil {
		return err
	}
	// The process's one derivation, at its first open, outside the run.
	e := newEncryption(encDir)
	start := time.Now()
	st, err := storage.Open(tenants.StoreFile(encDir, "ns0000"), storage.Options{Encryption: e, Binding: "ns0000"})
	if err != nil {
		return err
	}
	first := time.Since(start)
	st.Close()
	enc, err := loadWith(encDir, c, c.maxStores, e)
	if err != nil {
		return err
	}
	plain, err := load(dir, c, c.maxStores) // again, next to it in time
	if err != nil {
		return err
	}
	base := (churn.rate + plain.rate) / 2
	fmt.Fprintf(out, "| --encrypt, --max-stores %d, uniform: ops/s | %.0f (%.2fx plain churn, %.0f ops/s) | ≥ 0.8x | %s |\n", c.maxStores, enc.rate, enc.rate/base, base, ok(enc.rate >= 0.8*base))
	fmt.Fprintf(out, "| --encrypt: first open of the process (its one Argon2id run) | %.0f ms | | |\n", float64(first.Microseconds())/1000)
	fmt.Fprintf(out, "| --encrypt lease miss p50 / p99 | %.2f ms / %.2f ms | | |\n", enc.missP50/1000, enc.missP99/1000)
	fmt.Fprintf(out, "| --encrypt misses, errors; peak memory | %d, %d; %.0f MB | 0 errors | %s |\n", enc.misses, enc.errors, enc.hwmMB, ok(enc.errors == 0))
	if enc.errors > 0 {
		return fmt.Errorf("%d encrypted operations failed", enc.errors)
	}
	return nil
}

// newEncryption is a process's encryption of the data folder dir.
func newEncryption(dir string) *storage.Encryption {
	e, err := storage.NewEncryption("a passphrase for the pool benchmark")
	if err != nil {
		panic(err)
	}
	e.UseSaltFile(dir + "/kdf-salt")
	return e
}

func seed(dir string, c config, enc *storage.Encryption) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	text := strings.Fields("remember the deploy steps for the staging cluster and the database migration order before release notes go out")
	var wg sync.WaitGroup
	errs := make(chan error, c.spaces)
	sem := make(chan struct{}, 8)
	for i := range c.spaces {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s, err := storage.Open(tenants.StoreFile(dir, memgate.Namespace(fmt.Sprintf("ns%04d", i))), storage.Options{NoSync: true, Encryption: enc, Binding: fmt.Sprintf("ns%04d", i)})
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			var buf strings.Builder
			for j := range c.perSpace {
				fmt.Fprintf(&buf, `{"text":"%s %s memory %d"}`+"\n", text[j%len(text)], text[(j*7)%len(text)], j)
			}
			if _, err := s.Import(context.Background(), strings.NewReader(buf.String()), storage.ImportSkip); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

type result struct {
	rate                             float64
	hitP50, hitP99, missP50, missP99 float64
	misses, refused, errors          int64
	hwmMB                            float64
}

func load(dir string, c config, maxStores int) (result, error) {
	return loadWith(dir, c, maxStores, nil)
}

func loadWith(dir string, c config, maxStores int, enc *storage.Encryption) (result, error) {
	pool, err := tenants.NewPool(tenants.Options{Dir: dir, MaxStores: maxStores, Store: storage.Options{Encryption: enc}})
	if err != nil {
		return result{}, err
	}
	defer pool.Close(context.Background())
	ctx := context.Background()
	if maxStores >= c.spaces { // warm: open every store once
		for i := range c.spaces {
			_, r, err := pool.Lease(ctx, memgate.Namespace(fmt.Sprintf("ns%04d", i)))
			if err != nil {
				return result{}, err
			}
			r()
		}
	}
	var (
		stop                       atomic.Bool
		ops, refused, errs, misses atomic.Int64
		mu                         sync.Mutex
		hits, miss                 []time.Duration
		wg                         sync.WaitGroup
	)
	for w := range c.workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(maxStores)))
			var myHits, myMiss []time.Duration
			for i := 0; !stop.Load(); i++ {
				ns := memgate.Namespace(fmt.Sprintf("ns%04d", rng.IntN(c.spaces)))
				start := time.Now()
				s, release, opened, err := pool.LeaseOpened(ctx, ns)
				d := time.Since(start)
				if err != nil {
					if memgate.ErrorCode(err) == memgate.CodeTooManyStores {
						// What a client does with too_many_stores: retry shortly.
						refused.Add(1)
						time.Sleep(c.retry)
						continue
					}
					errs.Add(1)
					continue
				}
				if opened {
					myMiss = append(myMiss, d)
					misses.Add(1)
				} else {
					myHits = append(myHits, d)
				}
				if i%c.writeEvery == 0 {
					_, _, err = s.Put(ctx, memgate.Write{Text: "a new memory about the staging cluster"})
				} else {
					_, err = s.Search(ctx, memgate.Query{Text: "staging deploy"})
				}
				release()
				if err != nil {
					errs.Add(1)
					continue
				}
				ops.Add(1)
			}
			mu.Lock()
			hits, miss = append(hits, myHits...), append(miss, myMiss...)
			mu.Unlock()
		})
	}
	start := time.Now()
	time.Sleep(c.duration)
	stop.Store(true)
	wg.Wait()
	r := result{rate: float64(ops.Load()) / time.Since(start).Seconds(), refused: refused.Load(), errors: errs.Load(), misses: misses.Load()}
	r.hitP50, r.hitP99 = measure.Percentile(hits, 0.5), measure.Percentile(hits, 0.99)
	r.missP50, r.missP99 = measure.Percentile(miss, 0.5), measure.Percentile(miss, 0.99)
	if u, err := measure.ReadUsage("self"); err == nil {
		r.hwmMB = float64(u.HWMKB) / 1024
	}
	return r, nil
}
