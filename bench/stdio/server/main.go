// Command server is memgate's stdio server for benchmarks only: it is wired
// exactly as `memgate serve` wires it (a pool of stores in a data folder, the
// fixed namespace strategy, server.New with default options, the namespace
// leased once before serving, the pool closed and flushed at the end), and
// it adds one tool, noop, registered with the SDK's raw Server.AddTool on the
// same *mcp.Server. noop returns {} as structured content (and as text, the
// shape of every memgate result) without touching a store, so a noop call
// measures everything a tools/call costs over stdio except the tool's work:
// the trivial-tool ceiling behind memgate's own wiring.
//
//	server -data DIR [-namespace NS] [-cpuprofile FILE [-profile-signal]] [-memprofile FILE]
//
// -nosync turns off fsync, to tell the disk's share of a write from the
// rest, and -sdk-stdio serves with the SDK's own stdio transport instead of
// RunStdio, to tell the cost of RunStdio's line filter; neither is ever the
// figure of record. -memprofile writes the allocations of the whole run when stdin ends.
// With -cpuprofile the whole run is profiled, or, with -profile-signal, only
// the stretch between SIGUSR1 and SIGUSR2 (the driver, bench/stdio, sends
// them around the phase it profiles). The profile is written when stdin
// ends.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

// NoopTool is the name of the extra tool.
const NoopTool = "noop"

func main() {
	data := flag.String("data", "", "data folder (required)")
	namespace := flag.String("namespace", string(memgate.DefaultNamespace), "the fixed namespace")
	profile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	onSignal := flag.Bool("profile-signal", false, "profile only between SIGUSR1 and SIGUSR2")
	memProfile := flag.String("memprofile", "", "write an allocation profile to this file when stdin ends")
	noSync := flag.Bool("nosync", false, "commit without fsync (diagnosis only: acknowledged writes can be lost)")
	sdkStdio := flag.Bool("sdk-stdio", false, "serve with the SDK's own stdio transport instead of RunStdio (diagnosis only)")
	flag.Parse()
	if *data == "" {
		fmt.Fprintln(os.Stderr, "server: -data is required")
		os.Exit(2)
	}
	err := run(*data, memgate.Namespace(*namespace), *profile, *onSignal, *noSync, *sdkStdio)
	if err == nil && *memProfile != "" {
		err = writeHeapProfile(*memProfile)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

func run(data string, ns memgate.Namespace, profile string, onSignal, noSync, sdkStdio bool) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if profile != "" {
		p, err := startProfiler(profile, onSignal)
		if err != nil {
			return err
		}
		defer p.stop()
	}

	// As cmd/memgate: the logger at its default level (warn), on stderr.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r := &tenants.Resolver{Strategy: tenants.Fixed, Default: ns}
	if _, err := r.Resolve(nil, ""); err != nil {
		return err
	}
	pool, err := tenants.NewPool(tenants.Options{
		Dir:       data,
		MaxStores: tenants.DefaultMaxStores,
		Store:     storage.Options{MaxTextBytes: memgate.DefaultMaxTextBytes, Logger: log, NoSync: noSync},
		Logger:    log,
	})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if cerr := pool.Close(cctx); err == nil {
			err = cerr
		}
	}()
	srv, err := server.New(server.Options{
		Lease:        server.LeaseOf(pool.Lease),
		LeaseRead:    server.LeaseOf(pool.LeaseRead),
		Resolve:      r.Resolve,
		Logger:       log,
		MaxTextBytes: memgate.DefaultMaxTextBytes,
		Version:      "bench",
	})
	if err != nil {
		return err
	}
	srv.MCP().AddTool(&mcp.Tool{
		Name:        NoopTool,
		Description: "Does nothing; the benchmark's trivial-tool ceiling.",
		InputSchema: &jsonschema.Schema{Type: "object"},
	}, noop)

	// As `memgate serve`: lease the namespace once, so a locked store fails
	// before the first call.
	_, release, err := pool.Lease(ctx, ns)
	if err != nil {
		return err
	}
	release()
	if sdkStdio {
		err := srv.MCP().Run(ctx, &mcp.StdioTransport{})
		if err == nil || ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) {
			return nil
		}
		return err
	}
	return srv.RunStdio(ctx, os.Stdin, os.Stdout)
}

// writeHeapProfile writes the allocations of the whole run (read it with
// go tool pprof -sample_index alloc_space).
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

var empty = json.RawMessage(`{}`)

// noop answers every call with an empty object.
func noop(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{
		StructuredContent: empty,
		Content:           []mcp.Content{&mcp.TextContent{Text: "{}"}},
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
	}
	p.halt()
	p.f.Close()
}
