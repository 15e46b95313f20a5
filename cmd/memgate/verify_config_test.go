package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestVerifyChecksTheConfigurationGiven runs verify with the settings of a
// server that is not the default one: each is served and checked, and a
// configuration that cannot serve fails at its step.
func TestVerifyChecksTheConfigurationGiven(t *testing.T) {
	t.Setenv(mainEnv, "1")
	const pass = "correct horse battery staple"
	for _, c := range []struct {
		name  string
		e     env
		args  []string
		tools int
	}{
		{"default", env{}, nil, 7},
		{"a disabled tool", env{"MEMGATE_DISABLE_TOOL": "search"}, nil, 6},
		{"two disabled tools", env{}, []string{"--disable-tool", "search,export"}, 5},
		{"read-only", env{}, []string{"--write-mode", "read-only"}, 5},
		{"candidate", env{}, []string{"--write-mode", "candidate"}, 6},
		{"encrypted", env{"MEMGATE_PASSPHRASE": pass}, []string{"--encrypt"}, 7},
		{"encrypted, read-only", env{"MEMGATE_ENCRYPT": "1", "VERIFY_PASS": pass},
			[]string{"--passphrase-env", "VERIFY_PASS", "--write-mode", "read-only"}, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := mg(t, c.e, "", append([]string{"verify", "--data-dir", t.TempDir()}, c.args...)...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			if !regexp.MustCompile(`^memgate verify: ok \(` + itoa(c.tools) + ` tools, \d+ms\)\n$`).MatchString(r.stdout) {
				t.Fatalf("stdout %q, want %d tools", r.stdout, c.tools)
			}
		})
	}
}

func TestVerifyFailsOnAConfigurationThatCannotServe(t *testing.T) {
	t.Setenv(mainEnv, "1")
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := mg(t, env{}, "", "verify", "--data-dir", file)
	if r.code != 1 || !strings.HasPrefix(r.stderr, "memgate verify: failed at data dir: ") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	// A data folder not there yet is one serve makes: verify passes and
	// leaves it unmade.
	absent := filepath.Join(t.TempDir(), "new", "memgate")
	if r := mg(t, env{}, "", "verify", "--data-dir", absent); r.code != 0 {
		t.Fatalf("absent data folder: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Dir(absent)); !os.IsNotExist(err) {
		t.Fatalf("verify made the data folder: %v", err)
	}
	r = mg(t, env{}, "", "verify", "--data-dir", filepath.Join(file, "below"))
	if r.code != 1 || !strings.HasPrefix(r.stderr, "memgate verify: failed at data dir: ") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	r = mg(t, env{}, "", "verify", "--data-dir", t.TempDir(), "--encrypt")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "memgate verify: failed at encryption: --encrypt: the passphrase variable MEMGATE_PASSPHRASE is unset") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	mg(t, env{}, "", "verify", "--data-dir", t.TempDir(), "--write-mode", "sometimes").fails(t, 2, "--write-mode")
}
