// Command server is memgate's HTTP gateway for benchmarks only: wired as
// `memgate serve --transport http --namespace-arg` wires it (a pool of stores
// in a data folder, the fixed namespace strategy with the namespace
// argument allowed, server.New, the gateway of server.NewGateway on a
// loopback listener, the pool closed after a graceful stop), with what the
// product binary has no reason to carry: a CPU or allocation profile of the
// whole run, written at the stop, and -nosync for diagnosis. It prints
// "memgate listening on URL" once bound, and stops on SIGTERM or SIGINT.
//
//	server --data-dir DIR [--bind 127.0.0.1:0] [--max-stores N] [--max-connections N]
//	       [--read-header-timeout D] [-cpuprofile FILE] [-memprofile FILE] [-nosync]
//
// Beside memgate's tools it serves "noop", a tool that does nothing and
// answers {}: the trivial tool behind the same gateway, for a ceiling.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/gateway"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

func main() {
	var c config
	flag.StringVar(&c.data, "data-dir", "", "data folder (required)")
	flag.StringVar(&c.bind, "bind", "127.0.0.1:0", "loopback address to listen on")
	flag.StringVar(&c.path, "path", gateway.DefaultPath, "path of the MCP endpoint")
	flag.IntVar(&c.maxStores, "max-stores", tenants.DefaultMaxStores, "most stores open at once")
	flag.IntVar(&c.maxConns, "max-connections", 0, "most TCP connections (0: the gateway's default)")
	flag.DurationVar(&c.headerTimeout, "read-header-timeout", 0, "time to send a request header (0: the gateway's default)")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.StringVar(&c.memProfile, "memprofile", "", "write the allocations of the whole run to this file at the stop")
	flag.BoolVar(&c.noSync, "nosync", false, "commit without fsync (diagnosis only: acknowledged writes can be lost)")
	flag.Bool("namespace-arg", true, "accepted for symmetry with memgate serve; always on")
	flag.String("transport", "http", "accepted for symmetry with memgate serve; always http")
	flag.Parse()
	if c.data == "" {
		fmt.Fprintln(os.Stderr, "server: --data-dir is required")
		os.Exit(2)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

type config struct {
	data, bind, path       string
	maxStores, maxConns    int
	headerTimeout          time.Duration
	cpuProfile, memProfile string
	noSync                 bool
}

func run(c config) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r := &tenants.Resolver{Strategy: tenants.Fixed, Default: memgate.DefaultNamespace, AllowArg: true}
	pool, err := tenants.NewPool(tenants.Options{
		Dir:       c.data,
		MaxStores: c.maxStores,
		Store:     storage.Options{MaxTextBytes: memgate.DefaultMaxTextBytes, Logger: log, NoSync: c.noSync},
		Logger:    log,
	})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
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
		NamespaceArg: true,
		MaxTextBytes: memgate.DefaultMaxTextBytes,
		Version:      "bench",
	})
	if err != nil {
		return err
	}
	withNoop := func() *mcp.Server { m := srv.NewMCP(); addNoop(m); return m }
	gw, err := gateway.New(withNoop, gateway.Options{Path: c.path, MaxConnections: c.maxConns,
		ReadHeaderTimeout: c.headerTimeout, Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.bind)
	if err != nil {
		return err
	}
	fmt.Printf("memgate listening on http://%s%s\n", ln.Addr(), c.path)
	err = gw.Serve(ctx, ln)
	if c.memProfile != "" {
		if f, ferr := os.Create(c.memProfile); ferr == nil {
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	return err
}

// addNoop adds the trivial tool to an SDK server of the gateway.
func addNoop(m *mcp.Server) {
	m.AddTool(&mcp.Tool{Name: "noop", Description: "Does nothing.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: json.RawMessage(`{}`),
				Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}}, nil
		})
}
