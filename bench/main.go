// Command bench runs memgate's benchmark harnesses, one subcommand per
// family of figures in docs/PERFORMANCE.md. It is a module of its own
// (github.com/memgate/memgate/bench), so that what only the benchmarks
// need (plots, histograms) stays out of the product's go.mod. From this
// folder:
//
//	go run . engine -smoke       # the storage engine, in process
//	go run . pool -smoke         # the tenants pool under namespace churn
//	go run . suite -smoke        # scenarios S1-S8 over MCP, against the peers
//	go run . hostile -smoke      # the costliest legal calls
//	go run . coldopen            # the first search of a cold small store
//	go run . hot -memgate BIN    # a search over stdio against a noop call
//	go run . view -smoke         # search through a view of two namespaces
//	go run . FAMILY -h           # a family's flags
//
// The suite measures memgate as users run it: cmd/memgate, built with
// -tags memgatebench, which adds the noop tool and the profile flags.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"

	"github.com/memgate/memgate/bench/coldopen"
	"github.com/memgate/memgate/bench/engine"
	"github.com/memgate/memgate/bench/hostile"
	"github.com/memgate/memgate/bench/hot"
	"github.com/memgate/memgate/bench/pool"
	"github.com/memgate/memgate/bench/suite"
	"github.com/memgate/memgate/bench/view"
)

// family is one harness: its Main takes the arguments after its name.
type family struct {
	main func(args []string) error
	what string
}

var families = map[string]family{
	"engine":   {engine.Main, "the storage engine in process: durable writes, load, import, recall, cold open (-encryption: plain against encrypted)"},
	"pool":     {pool.Main, "the tenants pool under namespace churn, against every store open"},
	"suite":    {suite.Main, "scenarios S1-S8 and slowloris over MCP (stdio and HTTP), memgate against the peers, and the plots"},
	"hostile":  {hostile.Main, "the CPU of the costliest legal tool calls, and a tenant's latency beside them"},
	"hot":      {hot.Main, "a search over stdio against a noop call at 100k: builds in turn, p50s, the server's CPU per call"},
	"coldopen": {coldopen.Main, "open and first search of cold small stores"},
	"view":     {view.Main, "search through a view of two namespaces against one namespace alone, at 100k each"},
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	name := os.Args[1]
	f, ok := families[name]
	if !ok {
		if name != "-h" && name != "-help" && name != "--help" && name != "help" {
			fmt.Fprintf(os.Stderr, "bench: no family %q\n", name)
			usage()
			os.Exit(2)
		}
		usage()
		return
	}
	err := f.main(os.Args[2:])
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	default:
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", name, err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: go run . FAMILY [flags]   (in bench/; FAMILY -h lists its flags)")
	names := make([]string, 0, len(families))
	for n := range families {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-9s %s\n", n, families[n].what)
	}
}
