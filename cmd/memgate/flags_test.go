package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/auth"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/gateway"
	"github.com/memgate/memgate/tenants"
)

// helpFlags returns the long flags a command's --help lists.
func helpFlags(t *testing.T, command ...string) map[string]bool {
	t.Helper()
	r := mg(t, env{}, "", append(command, "--help")...)
	if r.code != 0 {
		t.Fatalf("%v --help: exit %d, stderr %q", command, r.code, r.stderr)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`).FindAllStringSubmatch(r.stdout, -1) {
		flags[m[1]] = true
	}
	return flags
}

func TestCommandHelpListsOnlyItsFlags(t *testing.T) {
	store := []string{"data-dir", "log", "log-format", "namespace", "namespace-strategy", "project-dir", "encrypt", "passphrase-env", "store"}
	lifecycle := []string{"max-memories", "max-namespace-bytes", "trash-retention"}
	limits := []string{"max-memory-bytes", "max-response-bytes"}
	server := append(append(append([]string{"disable-tool", "write-mode", "allow-secrets", "namespace-arg", "include-namespace"}, limits...), store...), lifecycle...)
	serveOnly := []string{"transport", "max-stores", "store-idle-timeout", "sweep-interval", "bind", "allow-remote", "metrics", "metrics-bind", "max-sessions",
		"shutdown-grace", "tokens-file", "jwt-issuer", "jwt-jwks-url", "oauth-issuer", "clock-skew", "public-url",
		"read-scope", "namespace-claim", "namespace-from-subject", "replica-staleness", "migrate"}
	join := func(lists ...[]string) []string {
		var out []string
		for _, l := range lists {
			out = append(out, l...)
		}
		return out
	}
	for _, tc := range []struct {
		command []string
		takes   []string // exactly these, besides --help
	}{
		{[]string{"get"}, join(store, limits, []string{"disable-tool", "include-namespace"})},
		{[]string{"remember"}, join(store, limits, lifecycle, []string{"disable-tool", "write-mode", "allow-secrets",
			"id", "title", "tag", "meta", "if-version", "allow-empty", "ttl-seconds", "expires-at", "allow-duplicate"})},
		{[]string{"search"}, join(store, limits, []string{"disable-tool", "include-namespace", "tag", "tags-mode", "filter", "limit", "budget"})},
		{[]string{"list"}, join(store, limits, []string{"disable-tool", "limit", "cursor", "order", "tag", "filter"})},
		{[]string{"forget"}, join(store, limits, lifecycle, []string{"disable-tool", "write-mode", "if-version"})},
		{[]string{"stats"}, join(store, limits, []string{"disable-tool", "write-mode"})},
		{[]string{"export"}, join(store, limits, []string{"disable-tool", "out"})},
		{[]string{"import"}, join(store, lifecycle, []string{"max-memory-bytes", "on-conflict"})},
		{[]string{"backup"}, store},
		{[]string{"candidates", "list"}, join(store, []string{"limit", "cursor"})},
		{[]string{"candidates", "approve"}, store},
		{[]string{"candidates", "reject"}, store},
		{[]string{"trash", "list"}, join(store, lifecycle, []string{"limit", "cursor"})},
		{[]string{"trash", "restore"}, join(store, lifecycle)},
		{[]string{"trash", "purge"}, store},
		{[]string{"invoke"}, server},
		{[]string{"verify"}, server},
		{[]string{"rekey"}, []string{"data-dir", "log", "log-format", "namespace", "passphrase-env",
			"new-passphrase-env", "from-plain", "from-namespace"}},
		{[]string{"healthcheck"}, []string{"bind", "ready", "timeout"}},
		{[]string{"migrate"}, []string{"data-dir", "log", "log-format"}},
		{[]string{"version"}, nil},
	} {
		t.Run(strings.Join(tc.command, " "), func(t *testing.T) {
			got := helpFlags(t, tc.command...)
			delete(got, "help")
			for _, f := range tc.takes {
				if !got[f] {
					t.Errorf("--%s is not listed", f)
				}
				delete(got, f)
			}
			for f := range got {
				t.Errorf("--%s is listed, and the command does not take it", f)
			}
		})
	}
	// serve takes every configuration flag.
	got := helpFlags(t, "serve")
	for _, f := range join(server, serveOnly) {
		if !got[f] {
			t.Errorf("serve: --%s is not listed", f)
		}
	}
}

func TestGetHelpIsShort(t *testing.T) {
	r := mg(t, env{}, "", "get", "--help")
	if n := strings.Count(r.stdout, "\n"); n > 60 || strings.Contains(r.stdout, "jwt") || strings.Contains(r.stdout, "--bind") {
		t.Fatalf("get --help is %d lines:\n%s", n, r.stdout)
	}
}

// TestOnlyConfigurationComesFromTheEnvironment: every flag of serve is
// configuration, with its variable; no flag or argument of a command's own
// is.
func TestOnlyConfigurationComesFromTheEnvironment(t *testing.T) {
	var c cli
	var cfg Config
	k, err := kong.New(&c, kong.PostBuild(setDefaults), kong.ExplicitGroups(flagGroups), kong.Bind(&cfg))
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]bool{"id": true, "title": true, "tag": true, "meta": true, "if-version": true, "allow-empty": true,
		"ttl-seconds": true, "expires-at": true, "allow-duplicate": true,
		"tags-mode": true, "filter": true, "limit": true, "budget": true, "cursor": true, "order": true, "out": true,
		"on-conflict": true, "new-passphrase-env": true, "from-plain": true, "from-namespace": true, "ready": true, "timeout": true, "help": true}
	everything := func(string) string { return "from-the-environment" }
	resolve := envResolver(everything)
	seen := map[string]bool{}
	var visit func(n *kong.Node)
	visit = func(n *kong.Node) {
		for _, f := range n.Flags {
			seen[f.Name] = true
			v, err := resolve.Resolve(nil, nil, f)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case own[f.Name] && v != nil:
				t.Errorf("%s --%s: its own flag comes from %s", n.Name, f.Name, envName(f.Name))
			case !own[f.Name] && v == nil:
				t.Errorf("%s --%s: a configuration flag that %s does not set", n.Name, f.Name, envName(f.Name))
			case n.Name == "serve" && own[f.Name] && f.Name != "help":
				t.Errorf("serve --%s is not configuration", f.Name)
			}
		}
		for _, c := range n.Children {
			visit(c)
		}
	}
	visit(k.Model.Node)
	for f := range own {
		if !seen[f] {
			t.Errorf("no command has --%s: the list is out of date", f)
		}
	}
}

// TestAnExportedIDDoesNotReplaceAMemory: a command's arguments are not
// configuration; MEMGATE_ID and the like in the environment change
// nothing.
func TestAnExportedIDDoesNotReplaceAMemory(t *testing.T) {
	dir := t.TempDir()
	e := env{"MEMGATE_DATA_DIR": dir, "MEMGATE_ID": "fixed-id", "MEMGATE_TITLE": "env title", "MEMGATE_TAG": "envtag",
		"MEMGATE_IF_VERSION": "7", "MEMGATE_LIMIT": "1", "MEMGATE_ORDER": "sideways", "MEMGATE_CURSOR": "garbage",
		"MEMGATE_OUT": filepath.Join(dir, "out.jsonl"), "MEMGATE_ON_CONFLICT": "fail", "MEMGATE_FILTER": "k=v",
		"MEMGATE_TEXT": "env text", "MEMGATE_QUERY": "nothing"}
	first := mg(t, e, "", "remember", "x").ok(t)
	second := mg(t, e, "", "remember", "x x").ok(t)
	for _, m := range []map[string]any{first, second} {
		if m["created"] != true || dig(m, "memory", "id") == "fixed-id" || dig(m, "memory", "title") != nil ||
			len(dig(m, "memory", "tags").([]any)) != 0 {
			t.Fatalf("remember took its arguments from the environment: %v", m)
		}
	}
	if dig(first, "memory", "id") == dig(second, "memory", "id") {
		t.Fatal("the second remember replaced the first")
	}
	if ms := mg(t, e, "", "list").ok(t)["memories"].([]any); len(ms) != 2 {
		t.Fatalf("list took --limit from the environment: %d memories", len(ms))
	}
	if hits := mg(t, e, "", "search", "x").ok(t)["hits"].([]any); len(hits) != 2 {
		t.Fatalf("search took its arguments from the environment: %d hits", len(hits))
	}
	out := mg(t, e, "", "export")
	if out.code != 0 || strings.Count(out.stdout, "\n") != 3 {
		t.Fatalf("export took --out from the environment: exit %d, stdout %q", out.code, out.stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.jsonl")); !os.IsNotExist(err) {
		t.Fatal("export wrote the file MEMGATE_OUT names")
	}
	// --on-conflict stays skip: importing the same memories again skips them.
	if rep := mg(t, e, out.stdout, "import", "-").ok(t); rep["skipped"] != 2.0 {
		t.Fatalf("import took --on-conflict from the environment: %v", rep)
	}
	if m := mg(t, e, "", "forget", dig(first, "memory", "id").(string)).ok(t); m["forgotten"] != true {
		t.Fatalf("forget took --if-version from the environment: %v", m)
	}
}

// serverEnvironment is what a container gives `memgate serve --transport
// http`: settings only serve uses, several of which a store command could
// not run with, beside the store's.
func serverEnvironment(dir string) env {
	return env{
		"MEMGATE_DATA_DIR": dir, "MEMGATE_NAMESPACE": "team", "MEMGATE_NAMESPACE_STRATEGY": "token",
		"MEMGATE_NAMESPACE_FROM_SUBJECT": "true", "MEMGATE_WRITE_MODE": "full", "MEMGATE_LOG_FORMAT": "json",
		"MEMGATE_TRANSPORT": "http", "MEMGATE_BIND": "0.0.0.0:8765", "MEMGATE_ALLOW_REMOTE": "true",
		"MEMGATE_METRICS": "true", "MEMGATE_MAX_STORES": "0", "MEMGATE_SESSION_IDLE": "1h",
		"MEMGATE_TOKEN": "0123456789abcdef", "MEMGATE_TOKENS_FILE": "/run/secrets/tokens.jsonl",
		"MEMGATE_JWT_ISSUER": "https://id.example.com/", "MEMGATE_JWT_AUDIENCE": "https://m.example.com/mcp",
		"MEMGATE_JWT_JWKS_URL": "https://id.example.com/jwks", "MEMGATE_PUBLIC_URL": "https://m.example.com/mcp",
		"MEMGATE_OAUTH_INTROSPECTION_TOKEN": "secret", "MEMGATE_INTROSPECTION_TIMEOUT": "2s",
		"MEMGATE_READ_SCOPE": "memory:read",
	}
}

// TestStoreCommandsRunInTheServersEnvironment: a store command run beside
// the server (kubectl exec, docker exec) ignores what only serve uses, and
// works on --namespace under the token strategy.
func TestStoreCommandsRunInTheServersEnvironment(t *testing.T) {
	t.Setenv(mainEnv, "1") // verify starts this binary
	dir := t.TempDir()
	e := serverEnvironment(dir)
	// serve reads those variables: with them it refuses to start.
	mg(t, e, "", "serve").fails(t, 2, "MEMGATE_MAX_STORES (--max-stores): must be at least 1")

	m := mg(t, e, "", "remember", "kept beside the server", "--id", "k").ok(t)
	if m["created"] != true {
		t.Fatalf("remember: %v", m)
	}
	if st := mg(t, e, "", "stats").ok(t); st["namespace"] != "team" || st["count"] != 1.0 {
		t.Fatalf("stats: %v", st)
	}
	if m := mg(t, e, "", "get", "k").ok(t); dig(m, "memory", "text") != "kept beside the server" {
		t.Fatalf("get: %v", m)
	}
	mg(t, e, "", "search", "server").ok(t)
	mg(t, e, "", "list").ok(t)
	mg(t, e, `{"id":"k"}`, "invoke", "get").ok(t)
	exp := mg(t, e, "", "export")
	if exp.code != 0 {
		t.Fatalf("export: exit %d, stderr %q", exp.code, exp.stderr)
	}
	mg(t, e, exp.stdout, "import", "-").ok(t)
	mg(t, e, "", "backup", filepath.Join(t.TempDir(), "copy.db")).ok(t)
	mg(t, e, "", "candidates", "list").ok(t)
	if r := mg(t, e, "", "verify"); r.code != 0 || !strings.HasPrefix(r.stdout, "memgate verify: ok") {
		t.Fatalf("verify: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	mg(t, e, "", "forget", "k").ok(t)
	if _, err := os.Stat(filepath.Join(dir, "stores", "team", "memgate.db")); err != nil {
		t.Fatalf("the store is not the namespace's: %v", err)
	}

	rekeyEnv := env{"MEMGATE_NEW_PASSPHRASE": newPassphrase}
	for k, v := range e {
		rekeyEnv[k] = v
	}
	if r := mg(t, rekeyEnv, "", "rekey", "--from-plain").ok(t); r["rekeyed"] != 1.0 {
		t.Fatalf("rekey: %v", r)
	}
}

func TestAFlagBeforeTheCommandIsRefused(t *testing.T) {
	mg(t, env{}, "", "--data-dir", t.TempDir(), "get", "x").fails(t, 2, "flags follow their command: memgate COMMAND [flags]")
	// Only a flag the command does not take says so; the command's own
	// unknown flags are plain.
	r := mg(t, env{}, "", "get", "x", "--bind", "127.0.0.1:1")
	r.fails(t, 2, "unknown flag --bind")
	if strings.Contains(r.stderr, "follow") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

// TestFlagDefaultsAreThePackages: a default the packages state is the
// flag's default.
func TestFlagDefaultsAreThePackages(t *testing.T) {
	c, err := parseConfig(t, env{"HOME": t.TempDir()}, "serve")
	if err != nil {
		t.Fatal(err)
	}
	h, a := c.HTTP, c.Auth
	for _, d := range []struct {
		name      string
		got, want any
	}{
		{"namespace", memgate.Namespace(c.Namespace), memgate.DefaultNamespace},
		{"namespace-strategy", tenants.Strategy(c.NamespaceStrategy), tenants.Fixed},
		{"max-stores", c.MaxStores, tenants.DefaultMaxStores},
		{"max-memory-bytes", c.MaxMemoryBytes, memgate.DefaultMaxTextBytes},
		{"max-response-bytes", c.MaxResponseBytes, memgate.DefaultMaxResponseBytes},
		{"write-mode", c.WriteMode, server.WriteFull},
		{"path", h.Path, gateway.DefaultPath},
		{"max-connections", h.MaxConnections, gateway.DefaultMaxConnections},
		{"max-inflight", h.MaxInflight, gateway.DefaultMaxInflight},
		{"max-streams", h.MaxStreams, gateway.DefaultMaxStreams},
		{"max-sessions", h.MaxSessions, gateway.DefaultMaxSessions},
		{"session-idle", h.SessionIdle, gateway.DefaultSessionIdle},
		{"max-request-bytes", h.MaxRequestBytes, int64(gateway.DefaultMaxRequestBytes)},
		{"read-header-timeout", h.ReadHeaderTimeout, gateway.DefaultReadHeaderTimeout},
		{"idle-timeout", h.IdleTimeout, gateway.DefaultIdleTimeout},
		{"request-timeout", h.RequestTimeout, gateway.DefaultRequestTimeout},
		{"conn-lifetime", h.ConnLifetime, gateway.DefaultConnLifetime},
		{"shutdown-grace", h.ShutdownGrace, gateway.DefaultShutdownGrace},
		{"jwt-jwks-refresh", a.JWTJWKSRefresh, auth.DefaultJWKSRefresh},
		{"clock-skew", a.ClockSkew, auth.DefaultClockSkew},
		{"namespace-claim", a.NamespaceClaim, auth.DefaultNamespaceClaim},
	} {
		if d.got != d.want {
			t.Errorf("--%s defaults to %v, want %v", d.name, d.got, d.want)
		}
	}
}

func TestDurationText(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0s", 15 * time.Second: "15s", 90 * time.Second: "1m30s",
		30 * time.Minute: "30m", time.Hour: "1h", 90 * time.Minute: "1h30m"} {
		if got := durationText(d); got != want {
			t.Errorf("durationText(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestParseArgsKeepsUnusedGroupsZero: a command's Config holds the groups
// it takes and nothing else, so no setting of serve's leaks into a store
// command.
func TestParseArgsKeepsUnusedGroupsZero(t *testing.T) {
	cfg, _, err := parseArgs([]string{"get", "x"}, serverEnvironment(t.TempDir()).get, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.serves() || cfg.Transport != "" || cfg.MaxStores != 0 || cfg.HTTP.Bind != "" || cfg.Auth.JWTIssuer != "" || cfg.WriteMode != "" {
		t.Fatalf("get's configuration holds serve's: %+v", cfg)
	}
	if cfg.Namespace != "team" || cfg.NamespaceStrategy != "token" {
		t.Fatalf("get's configuration lacks the store's: %+v", cfg)
	}
}

// A text of several lines that begins with dashes, taken for a flag, is not
// echoed: neither its first line nor the others.
func TestAMultiLineTextTakenForAFlagIsNotEchoed(t *testing.T) {
	key := "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBmarmaladeSECRETbody\n-----END EC PRIVATE KEY-----"
	r := mg(t, env{}, "", "remember", "--data-dir", t.TempDir(), key)
	r.fails(t, 2, "put -- before it")
	if strings.Contains(r.stderr, "marmalade") || strings.Contains(r.stderr, "BEGIN") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("stderr %q", r.stderr)
	}
	r = mg(t, env{}, "", "get", "x", "y\nsecond line of marmalade")
	if strings.Contains(r.stderr, "marmalade") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

// A bad value from the environment is blamed on its variable; one bad
// value makes one line, not a second about a flag it confused.
func TestBadValuesNameTheirSource(t *testing.T) {
	mg(t, env{"MEMGATE_SESSION_IDLE": "bogus"}, "", "serve", "--transport", "http", "--data-dir", t.TempDir()).
		fails(t, 2, "memgate: MEMGATE_SESSION_IDLE (--session-idle): expected duration")
	mg(t, env{"MEMGATE_WRITE_MODE": "nope"}, "", "stats", "--data-dir", t.TempDir()).
		fails(t, 2, "memgate: MEMGATE_WRITE_MODE (--write-mode): must be full, read-only or candidate")
	mg(t, env{"MEMGATE_WRITE_MODE": "nope"}, "", "stats", "--data-dir", t.TempDir(), "--write-mode", "also-bad").
		fails(t, 2, "memgate: --write-mode: must be full, read-only or candidate")
	r := mg(t, env{}, "", "stats", "--data-dir", t.TempDir(), "--max-memory-bytes", "99999999999")
	r.fails(t, 2, "--max-memory-bytes: must be from 1 to")
	if strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("stderr %q", r.stderr)
	}
	mg(t, env{"MEMGATE_DISABLE_TOOL": " remember , forget, "}, "", "stats", "--data-dir", t.TempDir()).ok(t)
}
