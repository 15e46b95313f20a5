package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/auth"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/gateway"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/telemetry"
	"github.com/memgate/memgate/tenants"
)

// envPrefix starts the environment variable of every configuration flag:
// --max-stores is MEMGATE_MAX_STORES.
const envPrefix = "MEMGATE_"

// maxMemoryBytesLimit bounds --max-memory-bytes. A memory travels as one
// JSON-RPC line over stdio and as one export line, and both have bounds of
// their own that a larger text, once escaped, could pass.
const maxMemoryBytesLimit = 1 << 20

// maxResponseBytesLimit bounds --max-response-bytes.
const maxResponseBytesLimit = 1 << 30

// Config is the configuration of one run. Its settings come in groups of
// flags, and a command takes the groups it uses, as fields of its own
// (`embed:""`): `memgate get --help` lists get's. Once kong has parsed the
// command line, every group the command took copies itself here
// (AfterApply); the groups it did not take stay zero, which the packages
// read as their defaults, and are not validated.
//
// The flags of a group are configuration: a command embeds a group with a
// group:"..." tag, which lists its flags in a section of the help of their
// own and gives each an environment variable (fromEnv, envName). A flag on
// the command line beats its variable, which beats the default. A command's own flags and arguments (an id, a
// limit, a tag) never come from the environment. The default of
// --data-dir is computed from XDG_DATA_HOME or HOME (see envResolver).
type Config struct {
	baseFlags
	namespaceFlag
	strategyFlags
	encryptFlag
	passphraseFlag
	lifecycleFlags
	memoryFlag
	responseFlag
	toolsFlag
	writeModeFlag
	secretsFlag
	namespaceArgFlag
	includeFlag
	backendFlags
	serveFlags
	benchFlags // the benchmark build's (bench.go)

	taken groups // the groups the command took
}

// groups is a set of flag groups.
type groups uint16

const (
	takesBase groups = 1 << iota
	takesNamespace
	takesStrategy
	takesEncrypt
	takesPassphrase
	takesMemory
	takesResponse
	takesTools
	takesWriteMode
	takesSecrets
	takesNamespaceArg
	takesServe
	takesLifecycle
	takesInclude
	takesBackend
)

// The help sections of the configuration flags. A flag in one of them is
// configuration (fromEnv); a flag outside them belongs to its command.
const (
	groupConfig = "config"
	groupServe  = "serve"
	groupHTTP   = "http"
	groupAuth   = "auth"
)

var flagGroups = []kong.Group{
	{Key: groupConfig, Title: "Configuration:"},
	{Key: groupServe, Title: "Serving:"},
	{Key: groupHTTP, Title: "HTTP transport (--transport http):"},
	{Key: groupAuth, Title: "Authorization (--transport http; see docs/AUTH.md):"},
}

// baseFlags: the data folder and the log. Every command that opens stores.
type baseFlags struct {
	DataDir   string `name:"data-dir" placeholder:"DIR" help:"Folder of the stores (default: $XDG_DATA_HOME/memgate, else ~/.local/share/memgate)."`
	Log       string `name:"log" default:"warn" placeholder:"LEVEL" help:"Log level on stderr: debug, info, warn or error."`
	LogFormat string `name:"log-format" default:"text" placeholder:"text|json" help:"Log format on stderr."`
}

func (f *baseFlags) AfterApply(c *Config) error {
	c.baseFlags, c.taken = *f, c.taken|takesBase
	return nil
}

// validateLog reports the problems of the log flags, which Validate
// reports last.
func (f *baseFlags) validateLog(bad badFunc) {
	if _, ok := logLevels[f.Log]; !ok {
		bad("log", "must be debug, info, warn or error")
	}
	if f.LogFormat != "text" && f.LogFormat != "json" {
		bad("log-format", "must be text or json")
	}
}

// namespaceFlag: the namespace of the fixed strategy.
type namespaceFlag struct {
	Namespace string `name:"namespace" placeholder:"NAME" help:"Namespace of the fixed strategy."`
}

func (f *namespaceFlag) AfterApply(c *Config) error {
	c.namespaceFlag, c.taken = *f, c.taken|takesNamespace
	return nil
}

// strategyFlags: how a call gets its namespace.
type strategyFlags struct {
	NamespaceStrategy string `name:"namespace-strategy" placeholder:"fixed|project|token" help:"How a call gets its namespace: fixed (--namespace), project (from the working directory) or token (from the caller's token, over HTTP; a store command, which has no caller, works on --namespace)."`
	ProjectDir        string `name:"project-dir" placeholder:"DIR" help:"Folder whose namespace the project strategy uses (default: the working directory)."`
}

func (f *strategyFlags) AfterApply(c *Config) error {
	c.strategyFlags, c.taken = *f, c.taken|takesStrategy
	return nil
}

// memoryFlag: the largest text of a memory.
type memoryFlag struct {
	MaxMemoryBytes int `name:"max-memory-bytes" placeholder:"BYTES" help:"Largest text of one memory."`
}

func (f *memoryFlag) AfterApply(c *Config) error {
	c.memoryFlag, c.taken = *f, c.taken|takesMemory
	return nil
}

// responseFlag: the largest answer of a tool.
type responseFlag struct {
	MaxResponseBytes int `name:"max-response-bytes" placeholder:"BYTES" help:"Largest JSON answer of one tool call: list and export end their page early, search returns fewer hits (at least 13 x --max-memory-bytes + 512 KiB, so one memory always fits)."`
}

func (f *responseFlag) AfterApply(c *Config) error {
	c.responseFlag, c.taken = *f, c.taken|takesResponse
	return nil
}

// toolsFlag: the tools left out.
type toolsFlag struct {
	DisableTool []string `name:"disable-tool" placeholder:"TOOL" help:"Leave a tool out (repeatable, or comma-separated)."`
}

func (f *toolsFlag) AfterApply(c *Config) error {
	c.toolsFlag, c.taken = *f, c.taken|takesTools
	return nil
}

// writeModeFlag: what the tools may write.
type writeModeFlag struct {
	WriteMode string `name:"write-mode" placeholder:"full|read-only|candidate" help:"full: every tool; read-only: no remember, no forget; candidate: remember proposes memories that wait for memgate candidates approve, no forget."`
}

func (f *writeModeFlag) AfterApply(c *Config) error {
	c.writeModeFlag, c.taken = *f, c.taken|takesWriteMode
	return nil
}

// secretsFlag: whether remember keeps what looks like a credential.
type secretsFlag struct {
	AllowSecrets bool `name:"allow-secrets" help:"Store text that looks like a credential instead of refusing it."`
}

func (f *secretsFlag) AfterApply(c *Config) error {
	c.secretsFlag, c.taken = *f, c.taken|takesSecrets
	return nil
}

// namespaceArgFlag: whether a tool call may name its namespace.
type namespaceArgFlag struct {
	NamespaceArg bool `name:"namespace-arg" help:"Let every tool take an optional namespace argument."`
}

func (f *namespaceArgFlag) AfterApply(c *Config) error {
	c.namespaceArgFlag, c.taken = *f, c.taken|takesNamespaceArg
	return nil
}

// storeFlags are what a command on the store of one namespace takes: which
// store, where, and how it is opened.
type storeFlags struct {
	Base       baseFlags      `embed:"" group:"config"`
	Namespace  namespaceFlag  `embed:"" group:"config"`
	Strategy   strategyFlags  `embed:"" group:"config"`
	Encrypt    encryptFlag    `embed:"" group:"config"`
	Passphrase passphraseFlag `embed:"" group:"config"`
	Backend    backendFlags   `embed:"" group:"config"`
}

// lifecycleFlags: what a namespace may hold, and how long the trash keeps a
// forgotten memory. The commands that write take them.
type lifecycleFlags struct {
	MaxMemories       int64         `name:"max-memories" default:"0" placeholder:"N" help:"Most memories one namespace holds (0: no limit); a remember past it fails with quota_exceeded."`
	MaxNamespaceBytes int64         `name:"max-namespace-bytes" default:"0" placeholder:"BYTES" help:"Most text bytes one namespace holds (0: no limit)."`
	TrashRetention    time.Duration `name:"trash-retention" default:"0s" placeholder:"DURATION" help:"Keep a forgotten memory in the trash this long (memgate trash list|restore|purge); 0s: forget deletes at once."`
}

func (f *lifecycleFlags) AfterApply(c *Config) error {
	c.lifecycleFlags, c.taken = *f, c.taken|takesLifecycle
	return nil
}

func (f *lifecycleFlags) validate(bad badFunc) {
	if f.MaxMemories < 0 {
		bad("max-memories", "must not be negative")
	}
	if f.MaxNamespaceBytes < 0 {
		bad("max-namespace-bytes", "must not be negative")
	}
	if f.TrashRetention < 0 {
		bad("trash-retention", "must not be negative")
	}
}

// limitFlags bound what the tools take and answer.
type limitFlags struct {
	Memory   memoryFlag   `embed:"" group:"config"`
	Response responseFlag `embed:"" group:"config"`
}

// serverFlags are everything the server's tools are configured with: what
// invoke, verify and serve take.
type serverFlags struct {
	Limits       limitFlags       `embed:""`
	Tools        toolsFlag        `embed:"" group:"config"`
	WriteMode    writeModeFlag    `embed:"" group:"config"`
	Secrets      secretsFlag      `embed:"" group:"config"`
	NamespaceArg namespaceArgFlag `embed:"" group:"config"`
	Include      includeFlag      `embed:"" group:"config"`
	Lifecycle    lifecycleFlags   `embed:"" group:"config"`
}

// badFunc reports one problem of a flag.
type badFunc func(flag, format string, args ...any)

// Validate reports every problem of the groups c took at once, each naming
// its flag.
func (c *Config) Validate() error {
	var errs []error
	bad := func(flag, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, args...)))
	}
	if c.taken&takesBackend != 0 {
		c.backendFlags.validate(bad)
	}
	if c.taken&takesBase != 0 && c.DataDir == "" {
		bad("data-dir", "no data folder: give --data-dir, or set XDG_DATA_HOME or HOME")
	}
	if c.taken&takesNamespace != 0 {
		if _, err := memgate.ParseNamespace("namespace", c.Namespace); err != nil {
			bad("namespace", "must be 1 to %d characters of a-z, 0-9, _ and -", memgate.MaxNamespaceLen)
		}
	}
	if c.taken&takesStrategy != 0 {
		switch c.NamespaceStrategy {
		case string(tenants.Fixed), string(tenants.Project), string(tenants.Token):
		default:
			bad("namespace-strategy", "must be fixed, project or token")
		}
		if c.ProjectDir != "" && c.NamespaceStrategy != string(tenants.Project) {
			bad("project-dir", "only the project strategy uses it; add --namespace-strategy project")
		}
	}
	if c.taken&takesMemory != 0 && (c.MaxMemoryBytes < 1 || c.MaxMemoryBytes > maxMemoryBytesLimit) {
		bad("max-memory-bytes", "must be from 1 to %d", maxMemoryBytesLimit)
	}
	if c.taken&takesResponse != 0 && c.MaxMemoryBytes >= 1 && c.MaxMemoryBytes <= maxMemoryBytesLimit {
		if minReply := memgate.MinResponseBytes(c.MaxMemoryBytes); c.MaxResponseBytes < minReply || c.MaxResponseBytes > maxResponseBytesLimit {
			bad("max-response-bytes", "must be from %d (what one memory of --max-memory-bytes %d can take in an answer) to %d",
				minReply, c.MaxMemoryBytes, maxResponseBytesLimit)
		}
	}
	if c.taken&takesWriteMode != 0 {
		switch c.WriteMode {
		case server.WriteFull, server.WriteReadOnly, server.WriteCandidate:
		default:
			bad("write-mode", "must be full, read-only or candidate")
		}
	}
	// "remember, forget," lists two tools: the spaces and the last comma
	// are the list's.
	c.DisableTool = slices.DeleteFunc(c.DisableTool, func(t string) bool { return strings.TrimSpace(t) == "" })
	for i, t := range c.DisableTool {
		t = strings.TrimSpace(t)
		c.DisableTool[i] = t
		if !slices.Contains(server.ToolNames, t) {
			bad("disable-tool", "%q is not a tool; tools are %s", t, strings.Join(server.ToolNames, ", "))
		}
	}
	if c.taken&takesPassphrase != 0 {
		c.passphraseFlag.validate(bad)
	}
	if c.taken&takesLifecycle != 0 {
		c.lifecycleFlags.validate(bad)
	}
	if c.taken&takesInclude != 0 {
		c.includeFlag.validate(bad)
	}
	if c.taken&takesServe != 0 {
		c.serveFlags.validate(c, bad)
	}
	if c.taken&takesBase != 0 {
		c.baseFlags.validateLog(bad)
	}
	return errors.Join(errs...)
}

// serves reports whether the command is serve, the one that has callers.
func (c *Config) serves() bool { return c.taken&takesServe != 0 }

var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
}

// logger returns the logger of c, writing to w: warnings and errors as
// text for a command that takes no log flags.
func (c *Config) logger(w io.Writer) *slog.Logger {
	level, ok := logLevels[c.Log]
	if !ok {
		level = slog.LevelWarn
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if c.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	// A line logged within a span carries its trace_id and span_id.
	return slog.New(telemetry.LogHandler(h))
}

// flagDefaults are the defaults that a package states, by flag name: each
// is stated once, where it is used, and setDefaults gives it to every flag
// of that name. (Kong's ${var} defaults would do the same, but kong
// interpolates every variable for every flag of every command: 17 ms and
// 6 MB per run with these.)
func flagDefaults() map[string]string {
	itoa := strconv.Itoa
	return map[string]string{
		"namespace":          string(memgate.DefaultNamespace),
		"namespace-strategy": string(tenants.Fixed),
		"max-stores":         itoa(tenants.DefaultMaxStores),
		"sweep-interval":     durationText(tenants.DefaultSweepInterval),
		"max-memory-bytes":   itoa(memgate.DefaultMaxTextBytes),
		"max-response-bytes": itoa(memgate.DefaultMaxResponseBytes),
		"write-mode":         server.WriteFull,
		"on-conflict":        storage.ImportSkip,

		"path":                gateway.DefaultPath,
		"max-connections":     itoa(gateway.DefaultMaxConnections),
		"max-inflight":        itoa(gateway.DefaultMaxInflight),
		"max-streams":         itoa(gateway.DefaultMaxStreams),
		"max-sessions":        itoa(gateway.DefaultMaxSessions),
		"session-idle":        durationText(gateway.DefaultSessionIdle),
		"max-request-bytes":   itoa(gateway.DefaultMaxRequestBytes),
		"read-header-timeout": durationText(gateway.DefaultReadHeaderTimeout),
		"idle-timeout":        durationText(gateway.DefaultIdleTimeout),
		"request-timeout":     durationText(gateway.DefaultRequestTimeout),
		"conn-lifetime":       durationText(gateway.DefaultConnLifetime),
		"shutdown-grace":      durationText(gateway.DefaultShutdownGrace),

		"jwt-jwks-refresh":      durationText(auth.DefaultJWKSRefresh),
		"clock-skew":            durationText(auth.DefaultClockSkew),
		"namespace-claim":       auth.DefaultNamespaceClaim,
		"introspection-timeout": durationText(auth.DefaultTimeout),
	}
}

// setDefaults gives every flag named in flagDefaults its default, before
// kong parses anything (a PostBuild option).
func setDefaults(k *kong.Kong) error {
	defaults := flagDefaults()
	var visit func(n *kong.Node)
	visit = func(n *kong.Node) {
		for _, f := range n.Flags {
			if d, ok := defaults[f.Name]; ok {
				f.Default, f.HasDefault = d, true
			}
		}
		for _, c := range n.Children {
			visit(c)
		}
	}
	visit(k.Model.Node)
	return nil
}

// durationText writes d as a person would: 30m, not 30m0s.
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// envName is the environment variable of a flag.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// fromEnv reports whether a flag is configuration, whose value may come
// from its environment variable: a flag of a group. A command's own flags
// have none.
func fromEnv(f *kong.Flag) bool { return f.Group != nil }

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

// envResolver gives kong the value of a configuration flag that the command
// line leaves out: its environment variable, read through getenv (so tests
// control it), or, for --data-dir, the computed default. Kong asks only
// about flags the command line did not set, which is what makes a flag beat
// its variable, and only about the flags of the command given, so a
// variable of a flag the command does not take is not read at all. An empty
// variable counts as unset.
func envResolver(getenv func(string) string) kong.Resolver {
	return kong.ResolverFunc(func(_ *kong.Context, _ *kong.Path, flag *kong.Flag) (any, error) {
		if !fromEnv(flag) {
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

// documentEnv adds each flag's default, and each configuration flag's
// variable, to its help. (Kong's own env tag would read the process
// environment behind getenv's back.)
func documentEnv(k *kong.Kong) error {
	var visit func(n *kong.Node)
	visit = func(n *kong.Node) {
		for _, f := range n.Flags {
			var notes []string
			if f.HasDefault && f.Default != "" {
				notes = append(notes, "default "+f.Default)
			}
			if fromEnv(f) {
				notes = append(notes, "$"+envName(f.Name))
			}
			if len(notes) > 0 {
				f.Help = strings.TrimSpace(f.Help + " (" + strings.Join(notes, "; ") + ")")
			}
		}
		for _, c := range n.Children {
			visit(c)
		}
	}
	visit(k.Model.Node)
	return nil
}
