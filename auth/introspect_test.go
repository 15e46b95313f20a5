package auth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	testResource   = "https://memory.example.com/mcp"
	testCredential = "introspection-credential-0123456789"
)

// authServer is an RFC 7662 endpoint over TLS. The answer to a token is
// answers[token]; a token that starts with "mode:" picks a failure.
type authServer struct {
	*httptest.Server
	caFile   string
	calls    atomic.Int32
	mu       sync.Mutex
	answers  map[string]any
	hold     chan struct{} // "mode:hold" waits on it
	arrived  chan struct{}
	badAuth  atomic.Int32 // calls without the right credential
	wantAuth string
}

func newAuthServer(t *testing.T) *authServer {
	t.Helper()
	s := &authServer{answers: map[string]any{}, hold: make(chan struct{}), arrived: make(chan struct{}, 64),
		wantAuth: "Bearer " + testCredential}
	mux := http.NewServeMux()
	mux.HandleFunc("/introspect", func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		if r.Method != http.MethodPost || r.Header.Get("Authorization") != s.wantAuth {
			s.badAuth.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		r.ParseForm()
		token := r.PostForm.Get("token")
		switch token {
		case "mode:500":
			w.WriteHeader(http.StatusInternalServerError)
			return
		case "mode:slow":
			time.Sleep(time.Second)
		case "mode:redirect":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		case "mode:huge":
			w.Write([]byte(`{"active":true,"pad":"` + strings.Repeat("x", maxIntrospectionBytes) + `"}`))
			return
		case "mode:huge-padded": // a good answer, then white space past the cap
			s.mu.Lock()
			a := s.answers["good"]
			s.mu.Unlock()
			b, _ := json.Marshal(a)
			w.Write(append(b, strings.Repeat(" ", maxIntrospectionBytes)...))
			return
		case "mode:html":
			w.Write([]byte("<html>"))
			return
		case "mode:duplicate": // a good answer with sub given twice
			s.mu.Lock()
			a := s.answers["good"]
			s.mu.Unlock()
			b, _ := json.Marshal(a)
			w.Write(append(bytes.TrimSuffix(b, []byte("}")), `,"sub":"admin"}`...))
			return
		case "mode:trailing": // a good answer, then another value
			s.mu.Lock()
			a := s.answers["good"]
			s.mu.Unlock()
			b, _ := json.Marshal(a)
			w.Write(append(b, `{"active":false}`...))
			return
		}
		if strings.HasPrefix(token, "mode:hold") {
			s.arrived <- struct{}{}
			<-s.hold
		}
		s.mu.Lock()
		a, ok := s.answers[token]
		s.mu.Unlock()
		if !ok {
			a = map[string]any{"active": false}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(a)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		t.Error("the redirect was followed")
		json.NewEncoder(w).Encode(map[string]any{"active": true})
	})
	s.Server = httptest.NewUnstartedServer(mux)
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted-certificate case
	s.StartTLS()
	t.Cleanup(s.Close)
	s.caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(s.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *authServer) answer(token string, a map[string]any) {
	s.mu.Lock()
	s.answers[token] = a
	s.mu.Unlock()
}

func (s *authServer) options(c *clock) IntrospectionOptions {
	return IntrospectionOptions{
		Issuer: s.URL, Resource: testResource, Endpoint: s.URL + "/introspect",
		Credential: testCredential, CAFile: s.caFile, Timeout: 300 * time.Millisecond,
		ClockSkew: 30 * time.Second, Now: c.now,
	}
}

func newIntrospector(t *testing.T, o IntrospectionOptions) *Introspector {
	t.Helper()
	in, err := NewIntrospector(o)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestIntrospectionAnswers(t *testing.T) {
	s := newAuthServer(t)
	c := newClock()
	in := newIntrospector(t, s.options(c))
	good := func(edits map[string]any) map[string]any {
		a := map[string]any{
			"active": true, "iss": s.URL, "aud": testResource, "sub": "user-1",
			"exp": c.unix(time.Hour), "iat": c.unix(-time.Minute), "nbf": c.unix(-time.Minute),
			"token_type": "Bearer", "scope": "memory:read memory:write", "client_id": "app",
		}
		for k, v := range edits {
			if v == nil {
				delete(a, k)
			} else {
				a[k] = v
			}
		}
		return a
	}
	cases := []struct {
		name   string
		answer map[string]any
		status int
	}{
		{"a complete active answer passes", good(nil), 200},
		{"active false is refused", good(map[string]any{"active": false}), 401},
		{"no active is refused", good(map[string]any{"active": nil}), 401},
		{"active as a string is refused", good(map[string]any{"active": "true"}), 401},
		{"another issuer is refused", good(map[string]any{"iss": "https://evil.example.com"}), 401},
		{"no issuer is refused", good(map[string]any{"iss": nil}), 401},
		{"an issuer with a trailing slash is refused", good(map[string]any{"iss": s.URL + "/"}), 401},
		{"another audience is refused", good(map[string]any{"aud": "https://other.example.com/mcp"}), 401},
		{"no audience is refused", good(map[string]any{"aud": nil}), 401},
		{"an audience list with the resource passes", good(map[string]any{"aud": []string{"x", testResource}}), 200},
		{"an audience list without it is refused", good(map[string]any{"aud": []string{"x"}}), 401},
		{"no sub is refused", good(map[string]any{"sub": nil}), 401},
		{"an empty sub is refused", good(map[string]any{"sub": ""}), 401},
		{"no exp is refused", good(map[string]any{"exp": nil}), 401},
		{"a past exp is refused", good(map[string]any{"exp": c.unix(-time.Second)}), 401},
		{"exp now is refused", good(map[string]any{"exp": c.unix(0)}), 401},
		{"a fractional exp is refused", good(map[string]any{"exp": float64(c.unix(time.Hour)) + 0.5}), 401},
		{"a string exp is refused", good(map[string]any{"exp": "9999999999"}), 401},
		{"no token_type is refused", good(map[string]any{"token_type": nil}), 401},
		{"token_type DPoP is refused", good(map[string]any{"token_type": "DPoP"}), 401},
		{"token_type bearer in lower case passes", good(map[string]any{"token_type": "bearer"}), 200},
		{"nbf in the future is refused", good(map[string]any{"nbf": c.unix(time.Minute)}), 401},
		{"iat in the future is refused", good(map[string]any{"iat": c.unix(time.Minute)}), 401},
		{"iat within the skew passes", good(map[string]any{"iat": c.unix(20 * time.Second)}), 200},
		{"a cnf (bound token) is refused", good(map[string]any{"cnf": map[string]any{"jkt": "abc"}}), 401},
		{"a malformed namespace is 403", good(map[string]any{"memgate_namespace": "../x"}), 403},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			token := "tok-" + string(rune('a'+i))
			s.answer(token, tc.answer)
			p, exp, err := in.Verify(context.Background(), token)
			if got := statusOf(err); got != tc.status {
				t.Fatalf("status %d (%v), want %d", got, err, tc.status)
			}
			if tc.status == 200 && (p.Subject != s.URL+"|user-1" || !p.HasScope("memory:write") || exp.Unix() != c.unix(time.Hour)) {
				t.Fatalf("principal %+v, expiry %v", p, exp)
			}
		})
	}
	if n := s.badAuth.Load(); n != 0 {
		t.Fatalf("%d calls without the credential", n)
	}
}

func TestIntrospectionFailures(t *testing.T) {
	s := newAuthServer(t)
	c := newClock()
	in := newIntrospector(t, s.options(c))
	s.answer("good", map[string]any{"active": true, "iss": s.URL, "aud": testResource, "sub": "u", "exp": c.unix(time.Hour), "token_type": "Bearer"})
	for _, tc := range []struct{ name, token string }{
		{"a 500 is 503", "mode:500"},
		{"a slow answer is 503 after the deadline", "mode:slow"},
		{"a redirect is not followed and is 503", "mode:redirect"},
		{"an answer over 16 KiB is 503", "mode:huge"},
		{"a good answer padded past 16 KiB is 503", "mode:huge-padded"},
		{"an answer that is not JSON is 503", "mode:html"},
		{"an answer with a key given twice is 503", "mode:duplicate"},
		{"an answer followed by another value is 503", "mode:trailing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, _, err := in.Verify(context.Background(), tc.token)
			if statusOf(err) != 503 {
				t.Fatalf("status %d (%v), want 503", statusOf(err), err)
			}
			if d := time.Since(start); d > 900*time.Millisecond {
				t.Fatalf("took %v, past the 300ms deadline", d)
			}
		})
	}
	t.Run("a token over 8 KiB is 401 without a call", func(t *testing.T) {
		before := s.calls.Load()
		_, _, err := in.Verify(context.Background(), strings.Repeat("a", MaxTokenBytes+1))
		if statusOf(err) != 401 || s.calls.Load() != before {
			t.Fatalf("status %d, calls %d", statusOf(err), s.calls.Load()-before)
		}
	})
	t.Run("an untrusted certificate is 503", func(t *testing.T) {
		o := s.options(c)
		o.CAFile = ""
		_, _, err := newIntrospector(t, o).Verify(context.Background(), "tok")
		if statusOf(err) != 503 {
			t.Fatalf("status %d, want 503", statusOf(err))
		}
	})
	t.Run("a stopped identity service is 503", func(t *testing.T) {
		s2 := newAuthServer(t)
		in2 := newIntrospector(t, s2.options(c))
		s2.Close()
		if _, _, err := in2.Verify(context.Background(), "tok"); statusOf(err) != 503 {
			t.Fatalf("status %d, want 503", statusOf(err))
		}
	})
	t.Run("a wrong credential is 503, not the caller's fault", func(t *testing.T) {
		o := s.options(c)
		o.Credential = "wrong-credential-0123456789"
		if _, _, err := newIntrospector(t, o).Verify(context.Background(), "tok"); statusOf(err) != 503 {
			t.Fatalf("status %d, want 503", statusOf(err))
		}
	})
	t.Run("no proxy is configured", func(t *testing.T) {
		// ProxyFromEnvironment never proxies loopback addresses, so a test
		// server cannot tell; the transport must simply have no proxy.
		if tr := in.client.Transport.(*http.Transport); tr.Proxy != nil {
			t.Fatal("the introspection client would use a proxy")
		}
	})
}

func TestIntrospectionBurstBeyondEightIs503AtOnce(t *testing.T) {
	s := newAuthServer(t)
	c := newClock()
	in := newIntrospector(t, s.options(c))
	in.timeout = 10 * time.Second
	in.client.Timeout = 10 * time.Second
	var wg sync.WaitGroup
	for i := range maxIntrospections {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in.Verify(context.Background(), fmt.Sprintf("mode:hold:%d", i))
		}()
	}
	for range maxIntrospections {
		<-s.arrived
	}
	start := time.Now()
	_, _, err := in.Verify(context.Background(), "tok")
	if statusOf(err) != 503 || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("the ninth: status %d after %v, want 503 at once", statusOf(err), time.Since(start))
	}
	close(s.hold)
	wg.Wait()
	s.answer("after", map[string]any{"active": true, "iss": s.URL, "aud": testResource, "sub": "u", "exp": c.unix(time.Hour), "token_type": "Bearer"})
	if _, _, err := in.Verify(context.Background(), "after"); err != nil {
		t.Fatalf("slots not given back: %v", err)
	}
}

func TestIntrospectionOfOneTokenIsShared(t *testing.T) {
	s := newAuthServer(t)
	c := newClock()
	in := newIntrospector(t, s.options(c))
	in.timeout = 10 * time.Second
	in.client.Timeout = 10 * time.Second
	s.answer("mode:hold-shared", map[string]any{"active": true, "iss": s.URL, "aud": testResource, "sub": "u", "exp": c.unix(time.Hour), "token_type": "Bearer"})
	const n = 3 * maxIntrospections
	errs := make(chan error, n)
	for range n {
		go func() {
			_, _, err := in.Verify(context.Background(), "mode:hold-shared")
			errs <- err
		}()
	}
	<-s.arrived
	time.Sleep(50 * time.Millisecond) // the others join the call in flight
	close(s.hold)
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("a check of a token in flight: %v", err)
		}
	}
	if calls := s.calls.Load(); calls > 2 {
		t.Fatalf("%d introspections for one token checked %d times at once", calls, n)
	}
}

func TestIntrospectionCache(t *testing.T) {
	s := newAuthServer(t)
	c := newClock()
	o := s.options(c)
	o.CacheTTL = time.Minute
	in := newIntrospector(t, o)
	s.answer("t1", map[string]any{"active": true, "iss": s.URL, "aud": testResource, "sub": "u", "exp": c.unix(time.Hour), "token_type": "Bearer", "scope": "memory:read"})
	s.answer("t2", map[string]any{"active": true, "iss": s.URL, "aud": testResource, "sub": "u", "exp": c.unix(10 * time.Second), "token_type": "Bearer"})
	for range 3 {
		if _, _, err := in.Verify(context.Background(), "t1"); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.calls.Load(); n != 1 {
		t.Fatalf("%d calls for three checks within the TTL, want 1", n)
	}
	s.answer("t1", map[string]any{"active": false}) // revoked
	c.advance(61 * time.Second)
	if _, _, err := in.Verify(context.Background(), "t1"); statusOf(err) != 401 {
		t.Fatalf("a revoked token passes after the TTL: %v", err)
	}
	// Never past exp, however long the TTL.
	in.Verify(context.Background(), "t2")
	c.advance(11 * time.Second)
	if _, _, err := in.Verify(context.Background(), "t2"); statusOf(err) != 401 {
		t.Fatalf("a cached answer outlived its exp: %v", err)
	}
	// Refusals are not cached.
	before := s.calls.Load()
	in.Verify(context.Background(), "unknown")
	in.Verify(context.Background(), "unknown")
	if s.calls.Load()-before != 2 {
		t.Fatal("a refusal was cached")
	}
}

func TestIntrospectionClientBasic(t *testing.T) {
	s := newAuthServer(t)
	c := newClock()
	o := s.options(c)
	o.ClientID = "memgate rs"
	s.wantAuth = "Basic " + basic("memgate rs", testCredential)
	if dec, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s.wantAuth, "Basic ")); string(dec) != "memgate+rs:"+testCredential {
		t.Fatal("the client id is not form-encoded in the basic credentials")
	}
	s.answer("t", map[string]any{"active": true, "iss": s.URL, "aud": testResource, "sub": "u", "exp": c.unix(time.Hour), "token_type": "Bearer"})
	if _, _, err := newIntrospector(t, o).Verify(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
}

func TestNewIntrospectorRefuses(t *testing.T) {
	base := IntrospectionOptions{Issuer: "https://id.example.com", Resource: testResource,
		Endpoint: "https://id.example.com/oauth/introspect", Credential: "c"}
	edit := func(f func(o *IntrospectionOptions)) IntrospectionOptions { o := base; f(&o); return o }
	if _, err := NewIntrospector(base); err != nil {
		t.Fatal(err)
	}
	if _, err := NewIntrospector(edit(func(o *IntrospectionOptions) { o.Endpoint = "https://id.example.com:443/x" })); err != nil {
		t.Fatalf("the default port spelt out: %v", err)
	}
	for name, o := range map[string]IntrospectionOptions{
		"an http issuer":                    edit(func(o *IntrospectionOptions) { o.Issuer, o.Endpoint = "http://127.0.0.1", "http://127.0.0.1/x" }),
		"an endpoint on another host":       edit(func(o *IntrospectionOptions) { o.Endpoint = "https://evil.example.com/introspect" }),
		"an endpoint on another port":       edit(func(o *IntrospectionOptions) { o.Endpoint = "https://id.example.com:8443/introspect" }),
		"an endpoint with user information": edit(func(o *IntrospectionOptions) { o.Endpoint = "https://u:p@id.example.com/x" }),
		"no resource":                       edit(func(o *IntrospectionOptions) { o.Resource = "" }),
		"no credential":                     edit(func(o *IntrospectionOptions) { o.Credential = "" }),
	} {
		if _, err := NewIntrospector(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
