package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memgate/memgate/tenants"
)

// Two folders whose project namespaces collide: the second is refused at
// start with one line that says what to do, and the first keeps its store.
func TestServeRefusesAProjectNamespaceOfAnotherFolder(t *testing.T) {
	proj := filepath.Join(t.TempDir(), "Tide Tables")
	if err := os.Mkdir(proj, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := tenants.BindProject(proj)
	if err != nil {
		t.Fatal(err)
	}
	dd := store(t)
	flags := []string{"--namespace-strategy", "project", "--project-dir", proj}
	mg(t, env{}, "", args(dd, append([]string{"remember", "the first folder's memory"}, flags...)...)...).ok(t)
	record := filepath.Join(dd[1], "stores", string(b.Namespace), tenants.ProjectFile)
	got, err := os.ReadFile(record)
	if err != nil || strings.TrimSpace(string(got)) != b.PathHash {
		t.Fatalf("record %q %v, want %s", got, err, b.PathHash)
	}
	// Another folder with the same namespace (as a 32-bit hash allows)
	// recorded its own hash: this folder may not use that store.
	if err := os.WriteFile(record, []byte(strings.Repeat("0", 64)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := mg(t, env{}, "", args(dd, append([]string{"stats"}, flags...)...)...)
	r.fails(t, 1, "invalid_argument")
	if !strings.Contains(r.stderr, "another folder") || strings.Contains(r.stderr, proj) {
		t.Fatalf("stderr %q", r.stderr)
	}
	// serve refuses too, before it answers anything.
	var stdout, stderr syncBuffer
	err = run(t.Context(), args(dd, append([]string{"serve"}, flags...)...), env{}.get, strings.NewReader(""), &stdout, &stderr)
	if exitCode(err) != 1 || !strings.Contains(stderr.String(), "invalid_argument") || stdout.String() != "" {
		t.Fatalf("serve: exit %d, stderr %q, stdout %q", exitCode(err), stderr.String(), stdout.String())
	}
	// Its own record back, the folder is served again.
	if err := os.WriteFile(record, []byte(b.PathHash+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if st := mg(t, env{}, "", args(dd, append([]string{"stats"}, flags...)...)...).ok(t); st["count"] != 1.0 {
		t.Fatalf("stats %v", st)
	}
}
