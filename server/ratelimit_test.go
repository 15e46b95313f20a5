package server_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/server/gateway"
	"github.com/memgate/memgate/tenants"
)

// rawPost sends a POST to the gateway with a header naming bodyLen bytes
// and sends body (which may be shorter: the rest never comes), and returns
// the status and Retry-After of the answer.
func rawPost(t *testing.T, addr, auth string, bodyLen int, body string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	h := "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" +
		"Mcp-Protocol-Version: 2026-07-28\r\nContent-Length: " + strconv.Itoa(bodyLen) + "\r\n"
	if auth != "" {
		h += "Authorization: Bearer " + auth + "\r\n"
	}
	fmt.Fprint(c, h+"\r\n"+body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// A principal gets --rate-burst requests at once and the next one is 429
// with Retry-After, answered before its body is read; another principal
// has a bucket of its own.
func TestRateLimitPerPrincipal(t *testing.T) {
	const burst = 3
	users := staticAuth{
		"alice-token": {Subject: "alice", Namespace: "alice", Namespaces: []string{"alice"}, Scopes: []string{"memory:read"}},
		"bob-token":   {Subject: "bob", Namespace: "bob", Namespaces: []string{"bob"}, Scopes: []string{"memory:read"}},
	}
	r := &tenants.Resolver{Strategy: tenants.Token}
	g := startGateway(t, gateway.Options{Auth: users, RateLimit: 0.01, RateBurst: burst}, server.Options{Resolve: r.Resolve})
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	for i := range burst {
		if code, _ := rawPost(t, g.addr, "alice-token", len(ping), ping); code == http.StatusTooManyRequests {
			t.Fatalf("request %d of a burst of %d: 429", i+1, burst)
		}
	}
	// N+1: refused from the header alone, though the body never comes.
	code, retry := rawPost(t, g.addr, "alice-token", 1<<20, "")
	if code != http.StatusTooManyRequests {
		t.Fatalf("request %d: %d, want 429", burst+1, code)
	}
	if n, err := strconv.Atoi(retry); err != nil || n < 1 {
		t.Fatalf("Retry-After %q", retry)
	}
	if code, _ := rawPost(t, g.addr, "bob-token", len(ping), ping); code == http.StatusTooManyRequests {
		t.Fatal("another principal was limited by alice's bucket")
	}
}

// Without authentication the principal is the client's address; the
// buckets stay within their bound however many callers come.
func TestRateLimitByAddressWithoutAuth(t *testing.T) {
	g := startGateway(t, gateway.Options{RateLimit: 0.01, RateBurst: 1, MaxRateKeys: 2}, server.Options{})
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	if code, _ := rawPost(t, g.addr, "", len(ping), ping); code == http.StatusTooManyRequests {
		t.Fatal("the first request was limited")
	}
	if code, _ := rawPost(t, g.addr, "", len(ping), ping); code != http.StatusTooManyRequests {
		t.Fatalf("the second request from the same address: %d", code)
	}
	if !strings.HasPrefix(g.addr, "127.0.0.1:") {
		t.Fatal(g.addr)
	}
}
