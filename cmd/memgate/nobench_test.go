//go:build !memgatebench

package main

import (
	"slices"
	"strings"
	"testing"
)

// The product binary has none of the benchmark build's additions: no noop
// tool, and serve refuses its flags.
func TestProductBuildHasNoBenchmarkAdditions(t *testing.T) {
	s := serve(t, t.Context(), env{}, "--data-dir", t.TempDir())
	if names := toolNames(t, s.cs); slices.Contains(names, "noop") {
		t.Fatalf("tools %v include noop", names)
	}
	s.cs.Close()
	if err := s.wait(t); err != nil {
		t.Fatal(err)
	}
	help := mg(t, env{}, "", "serve", "--help")
	for _, flag := range []string{"--cpuprofile", "--memprofile", "--profile-signal", "--nosync", "--noop"} {
		if strings.Contains(help.stdout, flag) {
			t.Errorf("serve --help lists %s", flag)
		}
		mg(t, env{}, "", "serve", "--data-dir", t.TempDir(), flag).fails(t, 2, "unknown flag "+flag)
	}
}
