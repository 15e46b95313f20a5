package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/tenants"
)

// envPrefix starts the environment variable of every flag: --max-stores is
// MEMGATE_MAX_STORES.
const envPrefix = "MEMGATE_"

// maxMemoryBytesLimit bounds --max-memory-bytes. A memory travels as one
// JSON-RPC line over stdio and as one export line, and both have bounds of
// their own that a larger text, once escaped, could pass.
const maxMemoryBytesLimit = 1 << 20

// maxResponseBytesLimit bounds --max-response-bytes.
const maxResponseBytesLimit = 1 << 30

// Config is everything the server and the store commands are configured
// with. Each field is a flag, global to every command; each flag is also an
// environment variable (envName), and a flag given on the command line beats
// its variable, which beats the default. The default of --data-dir is
// computed from XDG_DATA_HOME or HOME (see envResolver).
//
// Kong fills a Config (as a flagSet) while it parses; run validates it
// before any command that uses it.
type Config struct {
	DataDir           string        `name:"data-dir" placeholder:"DIR" help:"Folder of the stores (default: $XDG_DATA_HOME/memgate, else ~/.local/share/memgate)."`
	Namespace         string        `name:"namespace" default:"default" placeholder:"NAME" help:"Namespace of the fixed strategy."`
	NamespaceStrategy string        `name:"namespace-strategy" default:"fixed" placeholder:"fixed|project|token" help:"How a call gets its namespace: fixed (--namespace), project (from the working directory) or token (from the caller's token, over HTTP)."`
	ProjectDir        string        `name:"project-dir" placeholder:"DIR" help:"Folder whose namespace the project strategy uses (default: the working directory)."`
	NamespaceArg      bool          `name:"namespace-arg" help:"Let every tool take an optional namespace argument."`
	MaxStores         int           `name:"max-stores" default:"16" placeholder:"N" help:"Most stores open at once."`
	StoreIdleTimeout  time.Duration `name:"store-idle-timeout" default:"0s" placeholder:"DURATION" help:"Close a store unused for this long (0s: never)."`
	MaxMemoryBytes    int           `name:"max-memory-bytes" default:"65536" placeholder:"BYTES" help:"Largest text of one memory."`
	MaxResponseBytes  int           `name:"max-response-bytes" default:"4194304" placeholder:"BYTES" help:"Largest JSON answer of one tool call: list and export end their page early, search returns fewer hits (at least 13 x --max-memory-bytes + 512 KiB, so one memory always fits)."`
	AllowSecrets      bool          `name:"allow-secrets" help:"Store text that looks like a credential instead of refusing it."`
	WriteMode         string        `name:"write-mode" default:"full" placeholder:"full|read-only|candidate" help:"full: every tool; read-only: no remember, no forget; candidate: remember proposes memories that wait for memgate candidates approve, no forget."`
	DisableTool       []string      `name:"disable-tool" placeholder:"TOOL" help:"Leave a tool out (repeatable, or comma-separated)."`
	Transport         string        `name:"transport" default:"stdio" placeholder:"stdio|http" help:"How serve talks to its clients: stdio (one client) or http (streamable HTTP)."`
	Log               string        `name:"log" default:"warn" placeholder:"LEVEL" help:"Log level on stderr: debug, info, warn or error."`
	LogFormat         string        `name:"log-format" default:"text" placeholder:"text|json" help:"Log format on stderr."`

	HTTP       httpFlags    `embed:""` // http_flags.go
	Auth       authFlags    `embed:""` // auth_flags.go
	Encryption encryptFlags `embed:""` // encrypt.go
}

// flagSet is Config without its methods, for kong (see cli).
type flagSet Config

// Validate reports every problem of c at once, each naming its flag.
func (c *Config) Validate() error {
	var errs []error
	bad := func(flag, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, args...)))
	}
	if c.DataDir == "" {
		bad("data-dir", "no data folder: give --data-dir, or set XDG_DATA_HOME or HOME")
	}
	if _, err := memgate.ParseNamespace("namespace", c.Namespace); err != nil {
		bad("namespace", "must be 1 to %d characters of a-z, 0-9, _ and -", memgate.MaxNamespaceLen)
	}
	switch c.NamespaceStrategy {
	case string(tenants.Fixed), string(tenants.Project):
	case string(tenants.Token):
		if c.Transport != "http" {
			bad("namespace-strategy", "token takes the namespace from an authenticated caller: it needs --transport http and an auth mode (MEMGATE_TOKEN, --tokens-file, --jwt-* or --oauth-*)")
		}
	default:
		bad("namespace-strategy", "must be fixed, project or token")
	}
	if c.ProjectDir != "" && c.NamespaceStrategy != string(tenants.Project) {
		bad("project-dir", "only the project strategy uses it; add --namespace-strategy project")
	}
	if c.MaxStores < 1 {
		bad("max-stores", "must be at least 1")
	}
	if c.StoreIdleTimeout < 0 {
		bad("store-idle-timeout", "must not be negative")
	}
	if c.MaxMemoryBytes < 1 || c.MaxMemoryBytes > maxMemoryBytesLimit {
		bad("max-memory-bytes", "must be from 1 to %d", maxMemoryBytesLimit)
	}
	if minReply := memgate.MinResponseBytes(c.MaxMemoryBytes); c.MaxMemoryBytes >= 1 &&
		(c.MaxResponseBytes < minReply || c.MaxResponseBytes > maxResponseBytesLimit) {
		bad("max-response-bytes", "must be from %d (what one memory of --max-memory-bytes %d can take in an answer) to %d",
			minReply, c.MaxMemoryBytes, maxResponseBytesLimit)
	}
	switch c.WriteMode {
	case server.WriteFull, server.WriteReadOnly, server.WriteCandidate:
	default:
		bad("write-mode", "must be full, read-only or candidate")
	}
	for _, t := range c.DisableTool {
		if !slices.Contains(server.ToolNames, t) {
			bad("disable-tool", "%q is not a tool; tools are %s", t, strings.Join(server.ToolNames, ", "))
		}
	}
	switch c.Transport {
	case "stdio", "http":
	default:
		bad("transport", "must be stdio or http")
	}
	c.HTTP.validate(c, bad)
	c.Auth.validate(c, bad)
	c.Encryption.validate(c, bad)
	if _, ok := logLevels[c.Log]; !ok {
		bad("log", "must be debug, info, warn or error")
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("log-format", "must be text or json")
	}
	return errors.Join(errs...)
}

var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
}

// logger returns the logger of c, writing to w.
func (c *Config) logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: logLevels[c.Log]}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// envName is the environment variable of a flag.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// defaultDataDir is $XDG_DATA_HOME/memgate, else ~/.local/share/memgate,
// else "" (which Validate refuses).
func defaultDataDir(getenv func(string) string) string {
	if d := getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "memgate")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "share", "memgate")
	}
	return ""
}

// envResolver gives kong the value of a flag that the command line leaves
// out: its environment variable, read through getenv (so tests control it),
// or, for --data-dir, the computed default. Kong asks only about flags the
// command line did not set, which is what makes a flag beat its variable.
// An empty variable counts as unset.
func envResolver(getenv func(string) string) kong.Resolver {
	return kong.ResolverFunc(func(_ *kong.Context, _ *kong.Path, flag *kong.Flag) (any, error) {
		if flag.Name == "help" {
			return nil, nil
		}
		if v := getenv(envName(flag.Name)); v != "" {
			return v, nil
		}
		if flag.Name == "data-dir" {
			if d := defaultDataDir(getenv); d != "" {
				return d, nil
			}
		}
		return nil, nil
	})
}

// documentEnv adds each flag's default and variable to its help. (Kong's own env tag
// would read the process environment behind getenv's back.)
func documentEnv(k *kong.Kong) error {
	var visit func(n *kong.Node)
	visit = func(n *kong.Node) {
		for _, f := range n.Flags {
			if f.Name == "help" {
				continue
			}
			note := "$" + envName(f.Name)
			if f.HasDefault && f.Default != "" {
				note = "default " + f.Default + "; " + note
			}
			f.Help = strings.TrimSpace(f.Help + " (" + note + ")")
		}
		for _, c := range n.Children {
			visit(c)
		}
	}
	visit(k.Model.Node)
	return nil
}
