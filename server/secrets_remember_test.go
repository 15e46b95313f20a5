package server_test

import (
	"strings"
	"testing"

	"github.com/memgate/memgate/server"
)

func TestRememberRefusesSecrets(t *testing.T) {
	key := "ghp_" + strings.Repeat("aB3d", 9)
	aws := "AKIAIOSFODNN7EXAMPLE"
	e := newEnv(t, server.Options{})
	for _, tc := range []struct {
		name, args, field, kind string
	}{
		{"in the text", js(t, map[string]any{"text": "my token is " + key}), "text", server.SecretGitHubToken},
		{"in the title", js(t, map[string]any{"text": "x", "title": "key " + aws}), "title", server.SecretAWSAccessKey},
		{"in a metadata value", js(t, map[string]any{"text": "x", "metadata": map[string]any{"dsn": "postgres://app:Tr0ub4dor@db/app"}}), "metadata", server.SecretURLPassword},
		{"in a tag", js(t, map[string]any{"text": "x", "tags": []string{key}}), "tags", server.SecretGitHubToken},
		{"in the id", js(t, map[string]any{"text": "x", "id": aws}), "id", server.SecretAWSAccessKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			res := e.call("remember", tc.args)
			code, field := envelopeOf(t, res)
			kind := res.StructuredContent.(map[string]any)["error"].(map[string]any)["details"].(map[string]any)["kind"]
			if code != "secret_detected" || field != tc.field || kind != tc.kind {
				t.Fatalf("got %s on %s (%v)", code, field, kind)
			}
			if all := mustJSON(t, res); strings.Contains(all, key) || strings.Contains(all, aws) || strings.Contains(all, "Tr0ub4dor") {
				t.Fatalf("the refusal echoes the secret: %s", all)
			}
		})
	}
	e.t = t
	if n := e.ok("stats", "")["count"]; n != 0.0 {
		t.Fatalf("a refused memory was stored: count %v", n)
	}
	e.ok("remember", `{"text":"export GITHUB_TOKEN=${GITHUB_TOKEN}; sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}`)

	allow := newEnv(t, server.Options{AllowSecrets: true})
	if m := memoryOf(t, allow.ok("remember", js(t, map[string]any{"text": "my token is " + key}))); m["text"] != "my token is "+key {
		t.Fatalf("AllowSecrets: %v", m)
	}
}
