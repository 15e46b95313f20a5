//go:build memgatebench

// This file is compiled only into the benchmark build of memgate
// (go build -tags memgatebench ./cmd/memgate), which bench/ measures: the
// binary users run, plus a trivial tool and profiles of the serving
// process, each asked for by a flag of serve. The product binary has none
// of them.

package main

import (
	"context"
	"encoding/json"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"

	"github.com/alecthomas/kong"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/storage"
)

// NoopTool is the benchmark build's trivial tool: it answers {} (as
// structured content and as text, the shape of every memgate result)
// without touching a store, so a call of it costs everything a tools/call
// costs through memgate's wiring except a tool's work.
const NoopTool = "noop"

const groupBench = "bench"

func init() {
	flagGroups = append(flagGroups, kong.Group{Key: groupBench, Title: "Benchmark build (-tags memgatebench):"})
}

// benchFlags are serve's flags in the benchmark build. Without them it
// serves exactly what the product binary serves.
type benchFlags struct {
	Noop          bool   `name:"noop" group:"bench" help:"Serve the noop tool too: it answers {} and touches no store (a call's cost through memgate's wiring, without a tool's work)."`
	CPUProfile    string `name:"cpuprofile" group:"bench" placeholder:"FILE" help:"Write a CPU profile of the whole run (or, with --profile-signal, of the stretch between SIGUSR1 and SIGUSR2) to FILE at the stop."`
	ProfileSignal bool   `name:"profile-signal" group:"bench" help:"Profile only between SIGUSR1 and SIGUSR2."`
	MemProfile    string `name:"memprofile" group:"bench" placeholder:"FILE" help:"Write the allocations of the whole run to FILE at the stop (go tool pprof -sample_index alloc_space)."`
	NoSync        bool   `name:"nosync" group:"bench" help:"Commit without fsync (diagnosis only: acknowledged writes can be lost)."`
}

func (f *benchFlags) AfterApply(c *Config) error {
	c.benchFlags = *f
	return nil
}

// addTools adds noop, when --noop asks for it, to an MCP server: serve's
// over stdio, and each of the HTTP gateway's.
func (f *benchFlags) addTools(m *mcp.Server) {
	if !f.Noop {
		return
	}
	m.AddTool(&mcp.Tool{Name: NoopTool, Description: "Does nothing; the benchmarks' trivial-tool ceiling.",
		InputSchema: json.RawMessage(`{"type":"object"}`)}, noop)
}

// withTools returns newMCP, or, with --noop, newMCP with addTools after it:
// how the HTTP gateway makes each of its SDK servers.
func (f *benchFlags) withTools(newMCP func() *mcp.Server) func() *mcp.Server {
	if !f.Noop {
		return newMCP
	}
	return func() *mcp.Server {
		m := newMCP()
		f.addTools(m)
		return m
	}
}

var emptyObject = json.RawMessage(`{}`)

func noop(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{StructuredContent: emptyObject,
		Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}}, nil
}

// storeOptions applies --nosync.
func (f *benchFlags) storeOptions(o *storage.Options) { o.NoSync = o.NoSync || f.NoSync }

// startProfiles starts the profiles the flags ask for; stop writes them.
func (f *benchFlags) startProfiles() (stop func(), err error) {
	var p *profiler
	if f.CPUProfile != "" {
		if p, err = startProfiler(f.CPUProfile, f.ProfileSignal); err != nil {
			return nil, err
		}
	}
	return func() {
		if p != nil {
			p.stop()
		}
		if f.MemProfile != "" {
			if out, err := os.Create(f.MemProfile); err == nil {
				pprof.Lookup("allocs").WriteTo(out, 0)
				out.Close()
			}
		}
	}, nil
}

// profiler writes one CPU profile, of the whole run or of the stretch
// between SIGUSR1 and SIGUSR2.
type profiler struct {
	f       *os.File
	mu      sync.Mutex
	running bool
	done    bool // a profile was written: a second would corrupt the file
	sigs    chan os.Signal
}

func startProfiler(path string, onSignal bool) (*profiler, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	p := &profiler{f: f}
	if !onSignal {
		p.start()
		return p, nil
	}
	p.sigs = make(chan os.Signal, 2)
	signal.Notify(p.sigs, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for s := range p.sigs {
			if s == syscall.SIGUSR1 {
				p.start()
			} else {
				p.halt()
			}
		}
	}()
	return p, nil
}

func (p *profiler) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running && !p.done && pprof.StartCPUProfile(p.f) == nil {
		p.running = true
	}
}

func (p *profiler) halt() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running {
		pprof.StopCPUProfile()
		p.running, p.done = false, true
	}
}

func (p *profiler) stop() {
	if p.sigs != nil {
		signal.Stop(p.sigs)
		close(p.sigs)
	}
	p.halt()
	p.f.Close()
}
