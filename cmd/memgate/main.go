package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/telemetry"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop() // os.Exit skips it; exiting releases the signal handlers anyway
	os.Exit(exitCode(run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)))
}

// cli is the command line: the commands, each with its own flags (the
// groups of Config it takes, and its arguments). There are no global flags.
type cli struct {
	Serve       serveCmd       `cmd:"" help:"Serve MCP over stdio (the default) or streamable HTTP (--transport http)."`
	Remember    rememberCmd    `cmd:"" help:"Store a memory: TEXT, or standard input when TEXT is left out."`
	Get         getCmd         `cmd:"" help:"Print one memory."`
	Search      searchCmd      `cmd:"" help:"Search memories by words, tags and metadata."`
	List        listCmd        `cmd:"" help:"List one page of memories."`
	Forget      forgetCmd      `cmd:"" help:"Delete one memory."`
	Stats       statsCmd       `cmd:"" help:"Print the namespace's statistics and limits."`
	Export      exportCmd      `cmd:"" help:"Write every memory as JSON Lines."`
	Import      importCmd      `cmd:"" help:"Read memories from JSON Lines (memgate's export, or memory.jsonl)."`
	Backup      backupCmd      `cmd:"" help:"Write a consistent copy of the store's file."`
	Candidates  candidatesCmd  `cmd:"" help:"List, approve or reject the memories proposed in --write-mode candidate."`
	Trash       trashCmd       `cmd:"" help:"List, restore or purge the memories forget keeps with --trash-retention."`
	Rekey       rekeyCmd       `cmd:"" help:"Re-encrypt every store under a new passphrase (from --new-passphrase-env's variable)."`
	Invoke      invokeCmd      `cmd:"" help:"Call a tool with JSON arguments from standard input; print its structured result."`
	Verify      verifyCmd      `cmd:"" help:"Check this installation and its configuration end to end, on a temporary folder."`
	Healthcheck healthcheckCmd `cmd:"" help:"Probe a memgate serving HTTP on this machine (GET /health, or /ready): exit 0 when it answers 200."`
	Migrate     migrateCmd     `cmd:"" help:"Bring the schema of the PostgreSQL database in MEMGATE_POSTGRES_DSN to this memgate's (--store postgres)."`
	Version     versionCmd     `cmd:"" help:"Print the version."`
}

// app is what every command runs with.
type app struct {
	ctx    context.Context
	cfg    *Config
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	log    *slog.Logger
	getenv func(string) string // the environment, where secrets come from

	tel   *telemetrySetup // serve's (telemetry.go); nil for the other commands
	audit *auditLog       // serve's --audit-log (audit.go); nil for none

	closers []func() // what the pool used (its database, its replicas), closed after it
}

// telemetry is what the packages report through: serve's providers, none
// for the other commands.
func (a *app) telemetry() telemetry.Providers {
	if a.tel == nil {
		return telemetry.Providers{}
	}
	return a.tel.providers
}

// run parses args, runs the command they name, and reports its failure, if
// any, on stderr: one line per problem, starting "memgate: ". The error it
// returns decides the exit status (exitCode).
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	err := runCommand(ctx, args, getenv, stdin, stdout, stderr)
	if err != nil && !errors.Is(err, errHelp) {
		report(stderr, err)
	}
	return err
}

func runCommand(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	// The parser would turn invalid UTF-8 into U+FFFD: an id or a tag sent
	// that way must be refused, not changed.
	if err := checkArgsUTF8(args); err != nil {
		return err
	}
	cfg, kctx, err := parseArgs(args, getenv, stdout, stderr)
	if err != nil {
		return namedBySource(err, args, getenv)
	}
	if err := cfg.Validate(); err != nil {
		return namedBySource(usageError{err}, args, getenv)
	}
	a := &app{ctx: ctx, cfg: cfg, stdin: stdin, stdout: stdout, stderr: stderr, log: cfg.logger(stderr), getenv: getenv}
	err = kctx.Run(a)
	a.logCause(err)
	return err
}

// logCause logs the cause of an internal error that a command returns,
// which the user sees only as its fixed message. (A tool's internal errors
// reach here as a toolError, their cause already logged by the server.)
func (a *app) logCause(err error) {
	var e *memgate.Error
	if errors.As(err, &e) && e.Code == memgate.CodeInternal && e.Cause != nil {
		a.log.Error("command failed", "op", e.Op, "code", string(memgate.CodeInternal), "cause", e.Cause.Error())
	}
}

// parseArgs reads the command line and the environment (through getenv)
// into the configuration of the command it names, not validated yet. Help
// goes to stdout.
func parseArgs(args []string, getenv func(string) string, stdout, stderr io.Writer) (*Config, *kong.Context, error) {
	var cfg Config // filled by the AfterApply of each group the command takes
	parser, err := kong.New(commandLine(args),
		kong.Name("memgate"),
		kong.Description("memgate: a long-term memory for AI agents over MCP."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(int) { panic(errHelp) }),
		kong.ExplicitGroups(flagGroups),
		kong.Bind(&cfg),
		kong.Resolvers(envResolver(getenv)),
		kong.PostBuild(setDefaults), // before documentEnv, which names them
		kong.PostBuild(documentEnv),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
	)
	if err != nil {
		return nil, nil, err // a mistake in cli's tags
	}
	kctx, err := parse(parser, args)
	if err != nil {
		return nil, nil, err
	}
	return &cfg, kctx, nil
}

// commandLine returns what kong builds its model from: a cli, or, when args
// start with the name of a command, a struct of that command alone. Kong
// builds (and reads the tags of) every flag of every command it is given,
// several milliseconds and megabytes at each start; a run needs one.
func commandLine(args []string) any {
	if len(args) > 0 {
		t := reflect.TypeFor[cli]()
		for i := range t.NumField() {
			if f := t.Field(i); strings.ToLower(f.Name) == args[0] {
				return reflect.New(reflect.StructOf([]reflect.StructField{{Name: f.Name, Type: f.Type, Tag: f.Tag}})).Interface()
			}
		}
	}
	return &cli{}
}

// errHelp ends a run that printed help, with status 0.
var errHelp = errors.New("help printed")

// parse parses args; --help prints help and returns errHelp.
func parse(parser *kong.Kong, args []string) (kctx *kong.Context, err error) {
	defer func() {
		if r := recover(); r != nil {
			if r != errHelp {
				panic(r)
			}
			kctx, err = nil, errHelp
		}
	}()
	if len(args) == 0 {
		args = []string{"--help"}
	}
	kctx, err = parser.Parse(args)
	if err != nil {
		msg := redactParseError(err.Error())
		if strings.HasPrefix(args[0], "-") && strings.HasPrefix(msg, "unknown flag") {
			msg += " (flags follow their command: memgate COMMAND [flags])"
		}
		return nil, usageError{errors.New(msg)}
	}
	return kctx, nil
}

// namedBySource returns a usage error whose lines blame a flag ("--x: …")
// that the command line does not hold, but its variable does, as that
// variable's: "MEMGATE_X (--x): …". Other errors are returned as they are.
func namedBySource(err error, args []string, getenv func(string) string) error {
	var u usageError
	if !errors.As(err, &u) {
		return err
	}
	lines := strings.Split(err.Error(), "\n")
	changed := false
	for i, line := range lines {
		flag, rest, ok := strings.Cut(line, ":")
		name, isFlag := strings.CutPrefix(flag, "--")
		if !ok || !isFlag || name == "" || strings.ContainsAny(name, " =") {
			continue
		}
		onLine := slices.ContainsFunc(args, func(a string) bool { return a == flag || strings.HasPrefix(a, flag+"=") })
		env := envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		if !onLine && getenv(env) != "" {
			lines[i], changed = env+" ("+flag+"):"+rest, true
		}
	}
	if !changed {
		return err
	}
	return usageError{errors.New(strings.Join(lines, "\n"))}
}

// usageError is a command line or configuration that cannot run: status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// toolError is a tool's error envelope: status 1. Code and Message are what
// the envelope says, which never holds a memory's text, id or query.
type toolError struct {
	Code    memgate.Code
	Message string
}

func (e *toolError) Error() string { return string(e.Code) + ": " + e.Message }

// verifyError is a failed verify, already reported on stdout: status 1.
type verifyError struct{ step string }

func (e *verifyError) Error() string { return "verify failed at " + e.step }

// exitCode maps the error of run to the process's exit status: 0 for none
// (and for help), 2 for a usage error, 1 for anything else.
func exitCode(err error) int {
	var u usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &u):
		return 2
	}
	return 1
}

// report writes err on w, one line per problem. A memgate error shows its
// code and client-safe message, never its cause (the log has that).
func report(w io.Writer, err error) {
	var (
		te *toolError
		me *memgate.Error
		ve *verifyError
	)
	switch {
	case errors.As(err, &ve):
		return // verify printed its own line
	case errors.As(err, &te):
		fmt.Fprintf(w, "memgate: %s: %s\n", te.Code, oneLine(te.Message))
	case errors.As(err, &me):
		e := me
		if e.Code == memgate.CodeInternal || e.Code == "" {
			fmt.Fprintf(w, "memgate: %s: %s\n", memgate.CodeInternal, memgate.InternalMessage)
			return
		}
		fmt.Fprintf(w, "memgate: %s: %s\n", e.Code, oneLine(e.Message))
	default:
		for _, line := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
			fmt.Fprintf(w, "memgate: %s\n", line)
		}
	}
}

var (
	// strayArg is a word of the command line that kong quotes back, lines
	// and all.
	strayArg = regexp.MustCompile(`(?s)(unexpected (?:flag )?argument|unexpected token|got) .*`)
	// unknownFlag is kong's "unknown flag --x"; a name that is not a flag's
	// shape may be a memory's text that begins with dashes.
	unknownFlag = regexp.MustCompile(`(?s)unknown flag (.+?)(, did you mean .*)?$`)
	flagShape   = regexp.MustCompile(`^--?[A-Za-z0-9][A-Za-z0-9-]*$`)
)

// redactParseError returns kong's message without the values it quotes
// from the command line, any of which may be a memory's text, an id or a
// query: it keeps what went wrong and which flag, and drops what was typed.
func redactParseError(msg string) string {
	if i := strings.Index(msg, "; perhaps try"); i >= 0 {
		msg = msg[:i]
	}
	msg = strayArg.ReplaceAllStringFunc(msg, func(m string) string {
		switch {
		case strings.HasPrefix(m, "got"):
			return "got a value it cannot read"
		case strings.HasPrefix(m, "unexpected token"):
			return "unexpected token"
		case strings.HasPrefix(m, "unexpected flag argument"):
			return "unexpected flag argument"
		}
		return "unexpected argument (a command takes at most the arguments its help lists; quote text with spaces)"
	})
	return unknownFlag.ReplaceAllStringFunc(msg, func(m string) string {
		if flagShape.MatchString(unknownFlag.FindStringSubmatch(m)[1]) {
			return m
		}
		return "unknown flag (an argument that starts with - is read as a flag; put -- before it)"
	})
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
