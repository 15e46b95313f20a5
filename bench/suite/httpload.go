package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/bench/corpus"
	"github.com/memgate/memgate/bench/driver"
	"github.com/memgate/memgate/bench/measure"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

// startHTTP starts `memgate serve --transport http` on a free loopback port
// with the namespace argument on, and extra flags. With -cpuprofile, the
// server writes the profile FILE.http when it stops.
func (e *env) startHTTP(data string, extra ...string) (*driver.Server, error) {
	argv := append([]string{e.c.memgateBin, "serve", "--transport", "http", "--bind", "127.0.0.1:0",
		"--path", "/mcp", "--data-dir", data, "--namespace-arg"}, extra...)
	if e.c.profile != "" {
		argv = append(argv, "--cpuprofile", e.c.profile+".http")
	}
	var env []string
	if e.c.serverEnv != "" {
		env = strings.Split(e.c.serverEnv, ",")
	}
	return driver.StartServer("memgate-http", argv, env, 30*time.Second)
}

// preload fills namespaces ns-000… with per memories each, drawn in turn
// from mems, straight into the stores (storage.Import, 1,000 per commit).
// It returns the memories of each namespace.
func preload(data string, spaces, per int, mems []memgate.Write) ([][]memgate.Write, error) {
	out := make([][]memgate.Write, spaces)
	errs := make(chan error, spaces)
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for s := range spaces {
		out[s] = make([]memgate.Write, per)
		for i := range per {
			out[s][i] = mems[(s*per+i)%len(mems)]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			st, err := storage.Open(tenants.StoreFile(data, memgate.Namespace(nsName(s))), storage.Options{})
			if err != nil {
				errs <- err
				return
			}
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			for _, m := range out[s] {
				enc.Encode(map[string]any{"text": m.Text, "tags": m.Tags, "metadata": m.Metadata})
			}
			_, err = st.Import(context.Background(), &b, storage.ImportSkip)
			if cerr := st.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return out, <-errs
}

func nsName(i int) string { return fmt.Sprintf("ns-%03d", i) }

// op is one call a load worker makes.
type op struct {
	kind string // "search", "remember", "ping"
	ns   int
	tool string
	args map[string]any
}

// loadResult is what one load run measured.
type loadResult struct {
	ops, errors int64
	tooMany     int64
	perSec      float64
	hist        map[string]*driver.Hist
	all         *driver.Hist
	acked       []int64            // acknowledged remembers per namespace
	cpuUS       float64            // server CPU per op
	clientCPUUS float64            // this process's CPU per op (the load generator)
	otherUS     map[string]float64 // the CPU per op of what loadOn metered beside the servers
	hwmKB       int64
	errSample   string
}

// load runs sessions workers against url for d (or until each has made
// maxOps calls, when maxOps > 0); next picks each call.
func load(url, version string, sessions int, d time.Duration, maxOps int, spaces int, pid int,
	next func(r *rand.Rand, worker int) op) (*loadResult, error) {
	return loadOn([]string{url}, []int{pid}, nil, version, sessions, d, maxOps, spaces, next)
}

// loadOn is load over several servers serving the same namespaces: worker
// w calls urls[w%len(urls)]. The CPU of the servers' processes pids is
// the result's server CPU; other names what else to meter per call (its
// CPU so far), such as the database the servers share.
func loadOn(urls []string, pids []int, other map[string]func() time.Duration, version string, sessions int, d time.Duration, maxOps int, spaces int,
	next func(r *rand.Rand, worker int) op) (*loadResult, error) {
	client := driver.NewHTTPClient(sessions)
	defer client.CloseIdleConnections()
	ctx := context.Background()
	ss := make([]*driver.Session, sessions)
	for i := range ss {
		s, err := driver.Open(ctx, client, urls[i%len(urls)], version)
		if err != nil {
			return nil, fmt.Errorf("session %d: %w", i, err)
		}
		ss[i] = s
	}
	res := &loadResult{hist: map[string]*driver.Hist{}, all: driver.NewHist(), acked: make([]int64, spaces), otherUS: map[string]float64{}}
	var mu sync.Mutex
	var errs, tooMany, ops atomic.Int64
	acked := make([]atomic.Int64, spaces)
	deadline := time.Now().Add(d)
	usage := func() (u measure.Usage) {
		for _, pid := range pids {
			x, _ := measure.ReadUsage(strconv.Itoa(pid))
			u.CPU += x.CPU
			u.HWMKB = max(u.HWMKB, x.HWMKB)
		}
		return u
	}
	others := func() map[string]time.Duration {
		m := map[string]time.Duration{}
		for k, f := range other {
			m[k] = f()
		}
		return m
	}
	u0, o0 := usage(), others()
	c0, _ := measure.ReadUsage("self")
	start := time.Now()
	var wg sync.WaitGroup
	for w := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			local := map[string]*driver.Hist{}
			all := driver.NewHist()
			for i := 0; (maxOps <= 0 || i < maxOps) && (d <= 0 || time.Now().Before(deadline)); i++ {
				o := next(r, w)
				var err error
				var dur time.Duration
				if o.kind == "ping" {
					// 2026-07-28 has no ping; server/discover is its
					// trivial request.
					method := "ping"
					if version == driver.Stateless {
						method = "server/discover"
					}
					_, dur, err = ss[w].Call(ctx, method, map[string]any{})
				} else {
					dur, err = ss[w].CallToolCheck(ctx, o.tool, o.args)
				}
				if te := (*driver.ToolError)(nil); errors.As(err, &te) && te.Code == "too_many_stores" {
					tooMany.Add(1)
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil {
					if errs.Add(1) == 1 {
						mu.Lock()
						res.errSample = err.Error()
						mu.Unlock()
					}
					continue
				}
				ops.Add(1)
				if o.kind == "remember" {
					acked[o.ns].Add(1)
				}
				h := local[o.kind]
				if h == nil {
					h = driver.NewHist()
					local[o.kind] = h
				}
				h.Record(dur)
				all.Record(dur)
			}
			mu.Lock()
			for k, h := range local {
				if res.hist[k] == nil {
					res.hist[k] = driver.NewHist()
				}
				res.hist[k].Merge(h)
			}
			res.all.Merge(all)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	u1, o1 := usage(), others()
	c1, _ := measure.ReadUsage("self")
	for _, s := range ss {
		s.Close(ctx)
	}
	res.ops, res.errors, res.tooMany = ops.Load(), errs.Load(), tooMany.Load()
	res.perSec = float64(res.ops) / elapsed.Seconds()
	if res.ops > 0 {
		res.cpuUS = measure.US(u1.CPU-u0.CPU) / float64(res.ops)
		res.clientCPUUS = measure.US(c1.CPU-c0.CPU) / float64(res.ops)
		for k := range o1 {
			res.otherUS[k] = measure.US(o1[k]-o0[k]) / float64(res.ops)
		}
	}
	res.hwmKB = u1.HWMKB
	for i := range acked {
		res.acked[i] = acked[i].Load()
	}
	return res, nil
}

// mix returns the 90% search / 10% remember picker over spaces namespaces
// whose memories are mems[s]; ns picks a namespace.
func mix(mems [][]memgate.Write, extra []memgate.Write, writeShare int, ns func(r *rand.Rand, worker int) int) func(*rand.Rand, int) op {
	return mixLimit(mems, extra, writeShare, 0, ns)
}

// mixLimit is mix with searches of the given limit (0: the default).
func mixLimit(mems [][]memgate.Write, extra []memgate.Write, writeShare, limit int, ns func(r *rand.Rand, worker int) int) func(*rand.Rand, int) op {
	return func(r *rand.Rand, w int) op {
		s := ns(r, w)
		if r.IntN(100) < writeShare {
			// Every acknowledged write is counted in the stores afterwards:
			// a text drawn twice (the draws repeat from one load to the
			// next) is stored twice, not answered as a duplicate.
			m := extra[r.IntN(len(extra))]
			// allow_duplicate: the mix draws texts again, and every
			// acknowledged write must be a memory for the lost-write count.
			return op{kind: "remember", ns: s, tool: "remember", args: map[string]any{
				"text": m.Text, "tags": m.Tags, "metadata": m.Metadata, "namespace": nsName(s), "allow_duplicate": true}}
		}
		words := corpus.ContentWords(mems[s][r.IntN(len(mems[s]))].Text)
		r.Shuffle(len(words), func(i, j int) { words[i], words[j] = words[j], words[i] })
		q := strings.Join(words[:min(3, len(words))], " ")
		if q == "" {
			q = "entity"
		}
		args := map[string]any{"query": q, "namespace": nsName(s)}
		if limit > 0 {
			args["limit"] = limit
		}
		return op{kind: "search", ns: s, tool: "search", args: args}
	}
}

func pingOp(*rand.Rand, int) op { return op{kind: "ping"} }

// statsOp calls stats, memgate's cheapest tool (one lease, one read
// transaction, a 0.4 KB answer), on a random namespace.
func statsOp(spaces int) func(*rand.Rand, int) op {
	return func(r *rand.Rand, _ int) op {
		s := r.IntN(spaces)
		return op{kind: "stats", ns: s, tool: "stats", args: map[string]any{"namespace": nsName(s)}}
	}
}

// countStores returns the count of memories of each namespace, read with
// `memgate stats` after the server stopped.
func (e *env) countStores(data string, spaces int) ([]int64, error) {
	out := make([]int64, spaces)
	for s := range spaces {
		b, err := exec.Command(e.c.memgateBin, "stats", "--data-dir", data, "--namespace", nsName(s)).Output()
		if err != nil {
			return nil, fmt.Errorf("stats of %s: %w", nsName(s), err)
		}
		out[s] = countOf(b)
	}
	return out, nil
}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

func uniformNS(spaces int) func(*rand.Rand, int) int {
	return func(r *rand.Rand, _ int) int { return r.IntN(spaces) }
}

func mb(kb int64) float64 { return float64(kb) / 1024 }

var _ = os.Getpid
