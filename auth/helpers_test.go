package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
)

// Keys made once for the whole package: RSA generation is slow.
var (
	keysOnce             sync.Once
	rsaA, rsaB, rsaSmall *rsa.PrivateKey
	ecA                  *ecdsa.PrivateKey
	edA                  ed25519.PrivateKey
)

func testKeys(t testing.TB) {
	t.Helper()
	keysOnce.Do(func() {
		var err error
		if rsaA, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if rsaB, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if rsaSmall, err = rsa.GenerateKey(rand.Reader, 1024); err != nil {
			panic(err)
		}
		if ecA, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
		if _, edA, err = ed25519.GenerateKey(rand.Reader); err != nil {
			panic(err)
		}
	})
}

// publicJWK returns the public JWK of priv with kid and, when alg is not
// "", an alg member.
func publicJWK(t testing.TB, priv crypto.Signer, kid, alg string) jwk.Key {
	t.Helper()
	k, err := jwk.FromRaw(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	k.Set(jwk.KeyIDKey, kid)
	if alg != "" {
		k.Set(jwk.AlgorithmKey, alg)
	}
	return k
}

// jwksDoc returns a JWKS document of keys.
func jwksDoc(t testing.TB, keys ...jwk.Key) []byte {
	t.Helper()
	set := jwk.NewSet()
	for _, k := range keys {
		set.AddKey(k)
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sign signs claims (a JSON object, exactly as given) with priv and alg;
// hdr members go into the protected header (kid among them).
func sign(t testing.TB, priv any, alg string, hdr map[string]any, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	h := jws.NewHeaders()
	for k, v := range hdr {
		if err := h.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	b, err := jws.Sign(payload, jws.WithKey(jwa.SignatureAlgorithm(alg), priv, jws.WithProtectedHeaders(h)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// clock is a settable clock.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) now() time.Time             { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration)    { c.ns.Add(int64(d)) }
func (c *clock) unix(d time.Duration) int64 { return c.now().Add(d).Unix() }

// jwksServer serves a JWKS document that tests change, and counts fetches.
type jwksServer struct {
	*httptest.Server
	mu     sync.Mutex
	doc    []byte
	status int
	hits   atomic.Int32
}

func newJWKSServer(t testing.TB, doc []byte) *jwksServer {
	s := &jwksServer{doc: doc, status: http.StatusOK}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		doc, status := s.doc, s.status
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(doc)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(doc []byte, status int) {
	s.mu.Lock()
	s.doc, s.status = doc, status
	s.mu.Unlock()
}

// statusOf returns the status of a refusal, 200 for none.
func statusOf(err error) int {
	if err == nil {
		return http.StatusOK
	}
	if r, ok := err.(*Refusal); ok {
		return r.Status()
	}
	if f, ok := err.(*failure); ok {
		return f.status
	}
	return -1
}

// bearer returns a request to /mcp with the Authorization header h ("" for none).
func bearer(h string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8765/mcp", nil)
	if h != "" {
		r.Header.Set("Authorization", h)
	}
	return r
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o600) }
