package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/gateway"
	"github.com/memgate/memgate/tenants"
)

// TestIsolationProperty draws principals with random sets of allowed
// namespaces and checks, over HTTP through the gateway, that none of them
// can read, search, list, export, count, change or resource-read a
// namespace it is not allowed — through the strategy, the namespace
// argument, or another principal's session — and that a session opened by
// one token of a subject gives another token of that subject its own
// rights, not the opener's.
func TestIsolationProperty(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	namespaces := []string{"alpha", "beta", "gamma", "delta", "omega"}

	users := staticAuth{}
	type principal struct {
		token string
		p     *memgate.Principal
	}
	draw := func() []string {
		var allowed []string
		for _, ns := range namespaces {
			if rng.IntN(3) == 0 {
				allowed = append(allowed, ns)
			}
		}
		if len(allowed) == 0 {
			allowed = []string{namespaces[rng.IntN(len(namespaces))]}
		}
		return allowed
	}
	// Each principal has a sibling: another token of the same subject, with
	// namespaces of its own and, half of the time, no write scope.
	var principals, siblings []principal
	for i := range 6 {
		allowed := draw()
		p := &memgate.Principal{Subject: fmt.Sprintf("user-%d", i), Namespace: allowed[0], Namespaces: allowed,
			Scopes: []string{"memory:read", "memory:write"}}
		tok := fmt.Sprintf("token-%d", i)
		users[tok] = p
		principals = append(principals, principal{tok, p})

		allowed = draw()
		scopes := []string{"memory:read"}
		if rng.IntN(2) == 0 {
			scopes = append(scopes, "memory:write")
		}
		sp := &memgate.Principal{Subject: p.Subject, Namespace: allowed[0], Namespaces: allowed, Scopes: scopes}
		users[tok+"-sibling"] = sp
		siblings = append(siblings, principal{tok + "-sibling", sp})
	}
	// An operator seeds every namespace with one memory whose text names it.
	admin := &memgate.Principal{Subject: "admin", Namespace: namespaces[0], Namespaces: namespaces,
		Scopes: []string{"memory:read", "memory:write"}}
	users["admin-token"] = admin

	r := &tenants.Resolver{Strategy: tenants.Token, AllowArg: true}
	g := startGateway(t, gateway.Options{Auth: users},
		server.Options{Resolve: r.Resolve, NamespaceArg: true, WriteScope: "memory:write"})
	ctx := context.Background()
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

	adminSession := connectHTTP(t, g.url, bearer("admin-token"))
	ids := map[string]string{}
	for _, ns := range namespaces {
		res := structured(t, callTool(t, adminSession, "remember", map[string]any{
			"text": "secret plan of namespace " + ns, "namespace": ns, "tags": []string{"plan"}}))
		ids[ns] = res["memory"].(map[string]any)["id"].(string)
	}

	for _, pr := range principals {
		cs := connectHTTP(t, g.url, bearer(pr.token))
		for _, ns := range namespaces {
			allowed := slices.Contains(pr.p.Namespaces, ns)
			calls := []struct {
				tool string
				args map[string]any
			}{
				{"get", map[string]any{"id": ids[ns]}},
				{"search", map[string]any{"query": "secret plan"}},
				{"list", map[string]any{}},
				{"stats", map[string]any{}},
				{"export", map[string]any{}},
				{"remember", map[string]any{"text": "an intruder's note"}},
				{"forget", map[string]any{"id": "no-such-memory"}},
			}
			for _, c := range calls {
				c.args["namespace"] = ns
				res := callTool(t, cs, c.tool, c.args)
				code := errorCode(t, res)
				switch {
				case !allowed && code != string(memgate.CodeForbidden):
					t.Fatalf("%s reached %s through %s: %s", pr.p.Subject, ns, c.tool, code)
				case allowed && code == string(memgate.CodeForbidden):
					t.Fatalf("%s was refused its own %s through %s", pr.p.Subject, ns, c.tool)
				}
			}
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "memgate://namespace/" + ns + "/memory/" + ids[ns]})
			if !allowed && err == nil {
				t.Fatalf("%s read a memory of %s as a resource", pr.p.Subject, ns)
			}
			var rpc *jsonrpc.Error
			if !allowed && (!errors.As(err, &rpc) || rpc.Code != jsonrpc.CodeInvalidParams) {
				t.Fatalf("%s reading %s as a resource: %v, want -32602", pr.p.Subject, ns, err)
			}
			if allowed && err != nil {
				t.Fatalf("%s could not read its own %s as a resource: %v", pr.p.Subject, ns, err)
			}
		}
		// Without an argument, the strategy gives the token's own namespace,
		// and search finds nothing of the others.
		res := structured(t, callTool(t, cs, "search", map[string]any{"query": "secret plan namespace"}))
		hits, _ := json.Marshal(res["hits"])
		for _, ns := range namespaces {
			if ns != pr.p.Namespace && strings.Contains(string(hits), "namespace "+ns+`"`) {
				t.Fatalf("%s found %s's memory without an argument", pr.p.Subject, ns)
			}
		}
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "memgate://memory/" + ids[pr.p.Namespace]}); err != nil {
			t.Fatalf("%s could not read its own memory: %v", pr.p.Subject, err)
		}
	}

	// A sibling token on its principal's session has its own rights: its
	// namespaces, and writes only with the write scope.
	for i, pr := range principals {
		sib := siblings[i]
		session := g.initialize("2025-11-25", map[string]string{"Authorization": "Bearer " + pr.token})
		header := map[string]string{"Authorization": "Bearer " + sib.token}
		for _, ns := range namespaces {
			allowed := slices.Contains(sib.p.Namespaces, ns)
			for _, c := range []struct {
				tool, args string
				write      bool
			}{
				{"get", fmt.Sprintf(`{"id":%q,"namespace":%q}`, ids[ns], ns), false},
				{"list", fmt.Sprintf(`{"namespace":%q}`, ns), false},
				{"stats", fmt.Sprintf(`{"namespace":%q}`, ns), false},
				{"remember", fmt.Sprintf(`{"text":"a sibling's note","namespace":%q}`, ns), true},
				{"forget", fmt.Sprintf(`{"id":"no-such-memory","namespace":%q}`, ns), true},
			} {
				res, status := g.call(session, "2025-11-25", c.tool, c.args, header)
				if status != http.StatusOK {
					t.Fatalf("%s's sibling token on its session: %s: HTTP %d", pr.p.Subject, c.tool, status)
				}
				code := ""
				if e, ok := res["error"].(map[string]any); ok {
					code, _ = e["code"].(string)
				}
				mayWrite := slices.Contains(sib.p.Scopes, "memory:write")
				refused := !allowed || c.write && !mayWrite
				switch {
				case refused && code != string(memgate.CodeForbidden):
					t.Fatalf("%s's sibling token reached %s through %s on the session of a stronger token: %q", pr.p.Subject, ns, c.tool, code)
				case !refused && code == string(memgate.CodeForbidden):
					t.Fatalf("%s's sibling token was refused its own %s through %s", pr.p.Subject, ns, c.tool)
				}
			}
		}
	}

	// A session is its opener's: another principal's token is refused.
	owner := g.initialize("2025-11-25", map[string]string{"Authorization": "Bearer " + principals[0].token})
	for _, pr := range principals[1:] {
		if _, s := g.call(owner, "2025-11-25", "stats", `{}`, map[string]string{"Authorization": "Bearer " + pr.token}); s != http.StatusForbidden {
			t.Fatalf("%s used %s's session: %d", pr.p.Subject, principals[0].p.Subject, s)
		}
	}
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("a tool failed: %s", b)
	}
	return m
}

// errorCode is the code of a failed result's envelope, "" for a success.
func errorCode(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if !res.IsError {
		return ""
	}
	code, _ := envelopeOf(t, res)
	return code
}
