package main

import (
	"strings"
	"testing"
)

func TestEmbedderFlagsAreServes(t *testing.T) {
	got := helpFlags(t, "serve")
	for _, f := range []string{"embedder", "embedder-model", "embedder-timeout"} {
		if !got[f] {
			t.Errorf("serve: --%s is not listed", f)
		}
	}
	if helpFlags(t, "get")["embedder"] {
		t.Error("get lists --embedder: only serve embeds")
	}
}

func TestEmbedderFlagsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--embedder", "glove"}, "--embedder:"},
		{[]string{"--embedder", "static:"}, "--embedder:"},
		{[]string{"--embedder", "openai:ftp://x"}, "--embedder:"},
		{[]string{"--embedder-timeout", "0s"}, "--embedder-timeout:"},
		{[]string{"--embedder", "openai:http://127.0.0.1:1", "--embedder-model", ""}, "--embedder-model:"},
	} {
		r := mg(t, env{"HOME": t.TempDir()}, "", append([]string{"serve"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "memgate: "+tc.flag) {
			t.Errorf("serve %q: exit %d, stderr %q; want 2 naming %s", tc.args, r.code, r.stderr, tc.flag)
		}
	}
	// The environment configures it too, as every configuration flag.
	r := mg(t, env{"HOME": t.TempDir(), "MEMGATE_EMBEDDER": "glove"}, "", "serve")
	if r.code != 2 || !strings.Contains(r.stderr, "MEMGATE_EMBEDDER (--embedder):") {
		t.Errorf("MEMGATE_EMBEDDER=glove: exit %d, %q", r.code, r.stderr)
	}
}
