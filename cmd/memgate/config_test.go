package main

import (
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// parseConfig parses a command line the way run does and returns its
// configuration.
func parseConfig(t *testing.T, e env, args ...string) (*Config, error) {
	t.Helper()
	cfg, _, err := parseArgs(args, e.get, io.Discard, io.Discard)
	if err != nil {
		return nil, err
	}
	return cfg, cfg.Validate()
}

func TestConfigPrecedence(t *testing.T) {
	home := t.TempDir()
	tests := []struct {
		name  string
		env   env
		args  []string
		check func(c *Config) bool
	}{
		{"a flag left out and no variable takes the default", env{"HOME": home}, nil, func(c *Config) bool {
			return c.Namespace == "default" && c.MaxStores == 16 && c.MaxMemoryBytes == 65536 &&
				c.Log == "warn" && c.LogFormat == "text" && c.WriteMode == "full" && c.NamespaceStrategy == "fixed" &&
				c.StoreIdleTimeout == 0 && !c.AllowSecrets && !c.NamespaceArg && c.Transport == "stdio" &&
				len(c.DisableTool) == 0 && c.DataDir == filepath.Join(home, ".local", "share", "memgate")
		}},
		{"XDG_DATA_HOME beats HOME for the data folder", env{"HOME": home, "XDG_DATA_HOME": "/xdg"}, nil, func(c *Config) bool {
			return c.DataDir == filepath.Join("/xdg", "memgate")
		}},
		{"a variable beats the default", env{"HOME": home, "MEMGATE_DATA_DIR": "/env-data", "MEMGATE_NAMESPACE": "from-env",
			"MEMGATE_MAX_STORES": "3", "MEMGATE_STORE_IDLE_TIMEOUT": "90s", "MEMGATE_ALLOW_SECRETS": "true",
			"MEMGATE_DISABLE_TOOL": "export,forget", "MEMGATE_LOG": "debug", "MEMGATE_NAMESPACE_ARG": "1"}, nil,
			func(c *Config) bool {
				return c.DataDir == "/env-data" && c.Namespace == "from-env" && c.MaxStores == 3 &&
					c.StoreIdleTimeout == 90*time.Second && c.AllowSecrets && c.NamespaceArg && c.Log == "debug" &&
					slices.Equal(c.DisableTool, []string{"export", "forget"})
			}},
		{"a flag beats its variable", env{"HOME": home, "MEMGATE_DATA_DIR": "/env-data", "MEMGATE_NAMESPACE": "from-env",
			"MEMGATE_MAX_STORES": "3", "MEMGATE_STORE_IDLE_TIMEOUT": "90s", "MEMGATE_ALLOW_SECRETS": "true",
			"MEMGATE_DISABLE_TOOL": "export", "MEMGATE_LOG": "debug"},
			[]string{"--data-dir", "/flag-data", "--namespace", "from-flag", "--max-stores", "5",
				"--store-idle-timeout", "2m", "--allow-secrets=false", "--disable-tool", "list", "--log", "error"},
			func(c *Config) bool {
				return c.DataDir == "/flag-data" && c.Namespace == "from-flag" && c.MaxStores == 5 &&
					c.StoreIdleTimeout == 2*time.Minute && !c.AllowSecrets && c.Log == "error" &&
					slices.Equal(c.DisableTool, []string{"list"})
			}},
		{"an empty variable counts as unset", env{"HOME": home, "MEMGATE_NAMESPACE": "", "MEMGATE_LOG": ""}, nil,
			func(c *Config) bool { return c.Namespace == "default" && c.Log == "warn" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(t, tt.env, append([]string{"serve"}, tt.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(c) {
				t.Fatalf("config: %+v", *c)
			}
		})
	}
}

// TestConfigPrecedenceReachesTheStore checks precedence through what the
// server reports, not only what the parser holds.
func TestConfigPrecedenceReachesTheStore(t *testing.T) {
	dir := t.TempDir()
	e := env{"MEMGATE_DATA_DIR": dir, "MEMGATE_NAMESPACE": "envns", "MEMGATE_MAX_MEMORY_BYTES": "100",
		"MEMGATE_WRITE_MODE": "read-only"}

	st := mg(t, e, "", "stats").ok(t)
	if st["namespace"] != "envns" || dig(st, "limits", "max_memory_bytes") != 100.0 || st["write_mode"] != "read-only" {
		t.Fatalf("stats from the environment: %v", st)
	}
	st = mg(t, e, "", "stats", "--namespace", "flagns", "--max-memory-bytes", "200", "--write-mode", "full").ok(t)
	if st["namespace"] != "flagns" || dig(st, "limits", "max_memory_bytes") != 200.0 || st["write_mode"] != "full" {
		t.Fatalf("stats from flags: %v", st)
	}
	// The default data folder comes from getenv's HOME, not the process's.
	home := t.TempDir()
	mg(t, env{"HOME": home}, "", "remember", "kept under HOME").ok(t)
	if m, _ := filepath.Glob(filepath.Join(home, ".local", "share", "memgate", "stores", "default", "*.db")); len(m) != 1 {
		t.Fatalf("no store under HOME: %v", m)
	}
	// In read-only mode remember is not offered at all.
	mg(t, e, "", "remember", "x").fails(t, 2, "not a tool this server offers")
}

func TestValidateReportsEveryProblemAtOnce(t *testing.T) {
	r := mg(t, env{}, "", "serve", "--namespace", "Not Valid", "--namespace-strategy", "token",
		"--max-stores", "0", "--store-idle-timeout=-1s", "--max-memory-bytes", "0", "--write-mode", "sometimes",
		"--disable-tool", "nope", "--transport", "pigeon", "--log", "loud", "--log-format", "xml")
	if r.code != 2 {
		t.Fatalf("exit %d, want 2", r.code)
	}
	want := []string{"--data-dir", "--namespace:", "--max-memory-bytes", "--write-mode", "--disable-tool",
		"--transport", "--namespace-strategy", "--max-stores", "--store-idle-timeout", "--log:", "--log-format"}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), r.stderr)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], "memgate: "+w) {
			t.Errorf("line %d = %q, want it to name %s", i, lines[i], w)
		}
	}
	for _, refusal := range []string{"token", "must be full, read-only or candidate", "must be stdio or http"} {
		if !strings.Contains(r.stderr, refusal) {
			t.Errorf("stderr does not explain %q:\n%s", refusal, r.stderr)
		}
	}
}

func TestValidateReadsTheEnvironmentToo(t *testing.T) {
	r := mg(t, env{"MEMGATE_DATA_DIR": t.TempDir(), "MEMGATE_LOG": "loud", "MEMGATE_WRITE_MODE": "sometimes"}, "", "stats")
	if r.code != 2 || !strings.Contains(r.stderr, "MEMGATE_LOG (--log):") || !strings.Contains(r.stderr, "MEMGATE_WRITE_MODE (--write-mode):") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	dd := store(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown flag", args(dd, "stats", "--colour"), "unknown flag --colour"},
		{"an unknown command", args(dd, "recollect"), "unexpected argument"},
		{"a missing argument", args(dd, "get"), "expected"},
		{"a flag value of the wrong type", args(dd, "list", "--limit", "many"), "--limit"},
		{"a bad duration", args(dd, "stats", "--store-idle-timeout", "soon"), "--store-idle-timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mg(t, env{}, "", tt.args...).fails(t, 2, tt.want)
		})
	}
}

func TestUsageErrorsDoNotEchoWhatWasTyped(t *testing.T) {
	dd := store(t)
	for _, a := range [][]string{
		{"get", "one-id", "the hidden words"},
		{"list", "--limit", "the hidden words"},
		{"stats", "--store-idle-timeout", "the hidden words"},
		{"remember", "--if-version", "the hidden words"},
		{"stats", "--allow-secrets=the hidden words"},
		{"remember", "--the hidden words"},
	} {
		r := mg(t, env{}, "", args(dd, a...)...)
		if r.code != 2 || strings.Contains(r.stderr, "hidden") || !strings.HasPrefix(r.stderr, "memgate: ") {
			t.Errorf("%q: exit %d, stderr %q", a, r.code, r.stderr)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, a := range [][]string{nil, {"--help"}, {"serve", "--help"}, {"remember", "--help"}} {
		r := mg(t, env{}, "", a...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage: memgate") || r.stderr != "" {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", a, r.code, r.stdout, r.stderr)
		}
	}
	if r := mg(t, env{}, "", "--help"); !strings.Contains(r.stdout, "verify") || !strings.Contains(r.stdout, "invoke") {
		t.Errorf("help lacks the commands:\n%s", r.stdout)
	}
	r := mg(t, env{}, "", "serve", "--help")
	for _, want := range []string{"$MEMGATE_MAX_STORES", "$MEMGATE_DATA_DIR", "default 16", "default 30m;", "--jwt-issuer"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("serve's help lacks %q", want)
		}
	}
}

func TestEnvName(t *testing.T) {
	for flag, want := range map[string]string{"data-dir": "MEMGATE_DATA_DIR", "log": "MEMGATE_LOG",
		"store-idle-timeout": "MEMGATE_STORE_IDLE_TIMEOUT"} {
		if got := envName(flag); got != want {
			t.Errorf("envName(%q) = %q, want %q", flag, got, want)
		}
	}
}
