package main

import (
	"regexp"
	"strings"
	"testing"
)

func TestVerify(t *testing.T) {
	// verify starts os.Executable, this test binary, which runs main when
	// mainEnv says so (TestMain).
	t.Setenv(mainEnv, "1")
	t.Setenv("MEMGATE_DISABLE_TOOL", "search") // the served binary takes its configuration from verify alone
	r := mg(t, env{}, "", "verify", "--data-dir", t.TempDir())
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if !regexp.MustCompile(`^memgate verify: ok \(7 tools, \d+ms\)\n$`).MatchString(r.stdout) {
		t.Fatalf("stdout %q", r.stdout)
	}
}

func TestVerifyReportsTheFailingStep(t *testing.T) {
	t.Setenv(brokenEnv, "1")
	r := mg(t, env{}, "", "verify", "--data-dir", t.TempDir())
	if r.code != 1 || r.stdout != "" {
		t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
	}
	if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 ||
		!strings.HasPrefix(lines[0], "memgate verify: failed at initialize") ||
		!strings.HasSuffix(lines[0], "(server said: memgate: internal: broken on purpose)") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

func TestVersion(t *testing.T) {
	r := mg(t, env{}, "", "version")
	if r.code != 0 || !regexp.MustCompile(`^memgate \S+, (unknown commit|commit [0-9a-f]+.*), go1\.\S+\n$`).MatchString(r.stdout) {
		t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
	}
	b := buildInfo{Version: "v1.2.3", Commit: "abc123", Time: "2026-01-02T03:04:05Z", Modified: true, GoVersion: "go1.26.8"}
	if got, want := b.String(), "memgate v1.2.3, commit abc123 2026-01-02T03:04:05Z (modified), go1.26.8"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}
