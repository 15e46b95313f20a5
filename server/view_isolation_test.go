package server_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/gateway"
	"github.com/memgate/memgate/tenants"
)

// TestViewIsolationProperty draws principals with random sets of allowed
// namespaces on a server whose view includes every namespace, and checks
// over HTTP through the gateway that no principal reads a namespace it may
// not use through the view — by search, get, recall-context or a resource
// — while it reads every one it may; and that a token whose namespace
// comes from its subject reads its own alone.
func TestViewIsolationProperty(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	namespaces := []string{"alpha", "beta", "gamma", "delta", "omega"}
	include := []memgate.Namespace{"omega", "delta", "gamma", "beta", "alpha", "absent"}

	users := staticAuth{}
	type principal struct {
		token string
		p     *memgate.Principal
	}
	var principals []principal
	for i := range 8 {
		var allowed []string
		for _, ns := range namespaces {
			if rng.IntN(2) == 0 {
				allowed = append(allowed, ns)
			}
		}
		if len(allowed) == 0 {
			allowed = []string{namespaces[rng.IntN(len(namespaces))]}
		}
		p := &memgate.Principal{Subject: fmt.Sprintf("user-%d", i), Namespace: allowed[rng.IntN(len(allowed))],
			Namespaces: allowed, Scopes: []string{"memory:read"}}
		users[fmt.Sprintf("token-%d", i)] = p
		principals = append(principals, principal{fmt.Sprintf("token-%d", i), p})
	}
	users["solo-token"] = &memgate.Principal{Subject: "solo", Scopes: []string{"memory:read", "memory:write"}}
	users["admin-token"] = &memgate.Principal{Subject: "admin", Namespace: namespaces[0], Namespaces: namespaces,
		Scopes: []string{"memory:read", "memory:write"}}

	r := &tenants.Resolver{Strategy: tenants.Token, AllowArg: true, FromSubject: true}
	g := startGateway(t, gateway.Options{Auth: users}, server.Options{Resolve: r.Resolve, NamespaceArg: true,
		WriteScope: "memory:write",
		View:       func(p *memgate.Principal, ns memgate.Namespace) []memgate.Namespace { return r.View(p, ns, include) }})
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

	admin := connectHTTP(t, g.url, bearer("admin-token"))
	ids := map[string]string{}
	for _, ns := range namespaces {
		res := structured(t, callTool(t, admin, "remember", map[string]any{
			"text": "secret plan of namespace " + ns, "namespace": ns}))
		ids[ns] = res["memory"].(map[string]any)["id"].(string)
	}
	solo := connectHTTP(t, g.url, bearer("solo-token"))
	structured(t, callTool(t, solo, "remember", map[string]any{"text": "secret plan of solo"}))

	// seen checks what one read found against what p may use.
	seen := func(p *memgate.Principal, what string, found []string) {
		t.Helper()
		for _, ns := range found {
			if !p.MayUse(ns) {
				t.Fatalf("%s reached %s through %s of a view", p.Subject, ns, what)
			}
		}
	}
	for _, pr := range principals {
		cs := connectHTTP(t, g.url, bearer(pr.token))
		for _, arg := range append([]string{""}, pr.p.Namespaces...) {
			args := map[string]any{"query": "secret plan"}
			if arg != "" {
				args["namespace"] = arg
			}
			res := structured(t, callTool(t, cs, "search", args))
			var found []string
			for _, h := range hitsOf(t, res) {
				found = append(found, h["namespace"].(string))
			}
			seen(pr.p, "search", found)
			seen(pr.p, "the receipt", receiptNamespaces(res))
			slices.Sort(found)
			if want := slices.Sorted(slices.Values(pr.p.Namespaces)); !slices.Equal(found, want) {
				t.Fatalf("%s searched %v through its view, may use %v", pr.p.Subject, found, want)
			}
		}
		for _, ns := range namespaces {
			allowed := pr.p.MayUse(ns)
			res := callTool(t, cs, "get", map[string]any{"id": ids[ns]})
			switch code := errorCode(t, res); {
			case allowed && code != "":
				t.Fatalf("%s could not get its %s's memory through its view: %s", pr.p.Subject, ns, code)
			case !allowed && code != string(memgate.CodeNotFound):
				t.Fatalf("%s got %s's memory through its view: %q", pr.p.Subject, ns, code)
			case allowed && structured(t, res)["memory"].(map[string]any)["namespace"] != ns:
				t.Fatalf("%s got %s's memory with another namespace", pr.p.Subject, ns)
			}
			_, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "memgate://namespace/" + ns + "/memory/" + ids[ns]})
			if allowed != (err == nil) {
				t.Fatalf("%s read %s's memory as a resource: %v (allowed %v)", pr.p.Subject, ns, err, allowed)
			}
		}
		prompt, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "recall-context",
			Arguments: map[string]string{"topic": "secret plan", "limit": "10"}})
		if err != nil {
			t.Fatal(err)
		}
		var recalled []string
		for _, m := range prompt.Messages[1:] {
			recalled = append(recalled, m.Content.(*mcp.EmbeddedResource).Resource.Meta["namespace"].(string))
		}
		seen(pr.p, "recall-context", recalled)
		if len(recalled) != len(pr.p.Namespaces) {
			t.Fatalf("%s recalled %v, may use %v", pr.p.Subject, recalled, pr.p.Namespaces)
		}
	}

	// A per-user namespace reads itself alone, whatever the view includes.
	res := structured(t, callTool(t, solo, "search", map[string]any{"query": "secret plan"}))
	own := string(tenants.SubjectNamespace("solo"))
	if hits := hitsOf(t, res); len(hits) != 1 || hits[0]["namespace"] != own || !slices.Equal(receiptNamespaces(res), []string{own}) {
		t.Fatalf("a per-user token searched %v, receipt %v", hits, res["receipt"])
	}
	for _, ns := range namespaces {
		if code := errorCode(t, callTool(t, solo, "get", map[string]any{"id": ids[ns]})); code != string(memgate.CodeNotFound) {
			t.Fatalf("a per-user token got %s's memory: %q", ns, code)
		}
	}
}
