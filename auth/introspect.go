package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/memgate/memgate"
)

// Bounds of introspection. DefaultTimeout also bounds a JWKS fetch.
const (
	DefaultTimeout         = 5 * time.Second
	maxIntrospections      = 8
	maxIntrospectionBytes  = 16 << 10
	DefaultIntrospectCache = 10000
)

// IntrospectionOptions configure an RFC 7662 introspector.
type IntrospectionOptions struct {
	// Issuer is the authorization server: the exact iss of every answer,
	// and the origin (https, host, port) Endpoint must share.
	Issuer string
	// Resource is memgate's resource identifier; it must be in aud.
	Resource string
	// Endpoint is the introspection endpoint.
	Endpoint string
	// Credential authenticates memgate to the endpoint: a bearer token, or
	// the client secret when ClientID is set (HTTP Basic).
	Credential string
	ClientID   string
	// CAFile, when set, holds the only certificates trusted.
	CAFile string
	// Timeout bounds one introspection (default 5s).
	Timeout time.Duration
	// MaxConcurrent bounds the introspections in progress (default 8);
	// one more fails at once with 503.
	MaxConcurrent int
	// CacheTTL keeps an active answer for this long, never past its exp
	// (0: no cache). CacheSize bounds the answers kept (default
	// DefaultIntrospectCache).
	CacheTTL  time.Duration
	CacheSize int
	// ClockSkew is the leeway for nbf and iat (exp gets none).
	ClockSkew time.Duration
	// NamespaceClaim names the member with the token's namespaces.
	NamespaceClaim string
	Now            func() time.Time
	Logger         *slog.Logger
}

// Introspector checks opaque tokens with the authorization server.
type Introspector struct {
	issuer, resource, endpoint string
	authz                      string // Authorization header value for the endpoint
	client                     *http.Client
	timeout                    time.Duration
	slots                      chan struct{}
	cache                      *lru.Cache[[sha256.Size]byte, cached]
	flight                     singleflight.Group
	ttl                        time.Duration
	skew                       time.Duration
	nsClaim                    string
	now                        func() time.Time
	log                        *slog.Logger
}

type cached struct {
	p       memgate.Principal
	exp     time.Time
	goodTil time.Time
}

// NewIntrospector checks o and returns its introspector.
func NewIntrospector(o IntrospectionOptions) (*Introspector, error) {
	iss, err := checkServiceURL(o.Issuer, false)
	if err != nil {
		return nil, fmt.Errorf("OAuth issuer: %w", err)
	}
	ep, err := checkServiceURL(o.Endpoint, false)
	if err != nil {
		return nil, fmt.Errorf("introspection endpoint: %w", err)
	}
	if origin(ep) != origin(iss) {
		return nil, errors.New("the introspection endpoint must be on the issuer's origin (scheme, host and port)")
	}
	if o.Resource == "" {
		return nil, errors.New("an OAuth resource is required")
	}
	if o.Credential == "" {
		return nil, errors.New("an introspection credential is required (MEMGATE_OAUTH_INTROSPECTION_TOKEN)")
	}
	roots, err := rootCAs(o.CAFile)
	if err != nil {
		return nil, err
	}
	in := &Introspector{
		issuer: o.Issuer, resource: o.Resource, endpoint: ep.String(),
		timeout: o.Timeout, ttl: o.CacheTTL, skew: o.ClockSkew, nsClaim: o.NamespaceClaim,
		now: o.Now, log: o.Logger,
	}
	if o.ClientID != "" {
		in.authz = "Basic " + basic(o.ClientID, o.Credential)
	} else {
		in.authz = "Bearer " + o.Credential
	}
	if in.timeout <= 0 {
		in.timeout = DefaultTimeout
	}
	n := o.MaxConcurrent
	if n <= 0 {
		n = maxIntrospections
	}
	in.slots = make(chan struct{}, n)
	in.client = newClient(roots, in.timeout, false)
	if in.ttl > 0 {
		size := o.CacheSize
		if size <= 0 {
			size = DefaultIntrospectCache
		}
		if in.cache, err = lru.New[[sha256.Size]byte, cached](size); err != nil {
			return nil, err
		}
	}
	if in.nsClaim == "" {
		in.nsClaim = DefaultNamespaceClaim
	}
	if in.now == nil {
		in.now = time.Now
	}
	if in.log == nil {
		in.log = slog.New(slog.DiscardHandler)
	}
	return in, nil
}

// basic is the credentials of HTTP Basic authentication for an OAuth
// client (RFC 6749 §2.3.1: both parts form-encoded first).
func basic(id, secret string) string {
	return base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id) + ":" + url.QueryEscape(secret)))
}

// Issuer returns the authorization server.
func (in *Introspector) Issuer() string { return in.issuer }

// Verify introspects token and returns its principal and expiry.
func (in *Introspector) Verify(ctx context.Context, token string) (*memgate.Principal, time.Time, error) {
	if len(token) > MaxTokenBytes {
		return nil, time.Time{}, errTooLarge
	}
	key := sha256.Sum256([]byte(token))
	if in.cache != nil {
		if c, ok := in.cache.Get(key); ok {
			if in.now().Before(c.goodTil) {
				return clonePrincipal(&c.p), c.exp, nil
			}
			in.cache.Remove(key)
		}
	}
	// Concurrent checks of one token (a client's parallel calls) share one
	// introspection and one slot. The shared call is not cut short when the
	// request that started it goes away: the others wait on it.
	v, err, _ := in.flight.Do(string(key[:]), func() (any, error) {
		select {
		case in.slots <- struct{}{}:
		default:
			return nil, errBusy // at once: no queue
		}
		body, err := in.call(context.WithoutCancel(ctx), token)
		<-in.slots
		if err != nil {
			return nil, err
		}
		p, exp, err := in.check(body)
		if err != nil {
			return nil, err
		}
		if in.cache != nil {
			until := in.now().Add(in.ttl)
			if exp.Before(until) {
				until = exp
			}
			in.cache.Add(key, cached{p: *clonePrincipal(p), exp: exp, goodTil: until})
		}
		return cached{p: *p, exp: exp}, nil
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	c := v.(cached)
	return clonePrincipal(&c.p), c.exp, nil
}

// call posts token to the endpoint and returns the answer's body. Any
// failure of the service (no answer, a status other than 200, a redirect,
// an answer too large) is errUnavailable.
func (in *Introspector) call(ctx context.Context, token string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, in.timeout)
	defer cancel()
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.endpoint, strings.NewReader(form))
	if err != nil {
		return nil, errUnavailable
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", in.authz)
	res, err := in.client.Do(req)
	if err != nil {
		if ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			in.log.Warn("introspection timed out", "op", "auth.introspect", "timeout", in.timeout)
		} else {
			in.log.Warn("introspection failed", "op", "auth.introspect", "error", "no answer")
		}
		return nil, errUnavailable
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
		in.log.Warn("introspection failed", "op", "auth.introspect", "status", res.StatusCode)
		return nil, errUnavailable
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, maxIntrospectionBytes+1))
	if err != nil {
		in.log.Warn("introspection failed", "op", "auth.introspect", "error", "answer cut short")
		return nil, errUnavailable
	}
	if len(b) > maxIntrospectionBytes {
		in.log.Warn("introspection failed", "op", "auth.introspect", "error", "answer too large", "limit", maxIntrospectionBytes)
		return nil, errUnavailable
	}
	return b, nil
}

// check reads an introspection answer (RFC 7662 §2.2) and admits it only
// when it is active, from the issuer, for this resource, for a subject,
// unexpired (an integer exp in the future), a Bearer token, not valid only
// later (nbf, iat), and not bound to a key (cnf: memgate cannot check the
// proof of possession, so it does not pretend to).
func (in *Introspector) check(body []byte) (*memgate.Principal, time.Time, error) {
	// One object, each key once: a reader that kept the first of two
	// "active" or "sub" would admit another token than this one.
	if _, err := memgate.StrictObject(body, nil); err != nil {
		in.log.Warn("introspection failed", "op", "auth.introspect", "error", "the answer is not one JSON object with each key once")
		return nil, time.Time{}, errUnavailable
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		in.log.Warn("introspection failed", "op", "auth.introspect", "error", "the answer is not a JSON object")
		return nil, time.Time{}, errUnavailable
	}
	if active, _ := m["active"].(bool); !active {
		return nil, time.Time{}, errBadToken
	}
	if iss, _ := m["iss"].(string); iss != in.issuer {
		return nil, time.Time{}, errBadToken
	}
	if !audienceHas(m["aud"], in.resource) {
		return nil, time.Time{}, errBadToken
	}
	sub, _ := m["sub"].(string)
	if sub == "" {
		return nil, time.Time{}, errNoSubject
	}
	if tt, _ := m["token_type"].(string); !strings.EqualFold(tt, "Bearer") {
		return nil, time.Time{}, errBadToken
	}
	if _, bound := m["cnf"]; bound {
		return nil, time.Time{}, errBadToken
	}
	now := in.now()
	exp, ok := unixSeconds(m["exp"])
	if !ok {
		return nil, time.Time{}, errBadToken
	}
	if !exp.After(now) {
		return nil, time.Time{}, errExpired
	}
	for _, name := range []string{"nbf", "iat"} {
		v, present := m[name]
		if !present {
			continue
		}
		t, ok := unixSeconds(v)
		if !ok || t.After(now.Add(in.skew)) {
			return nil, time.Time{}, errBadToken
		}
	}
	p, err := principalOf(in.issuer, sub, m, in.nsClaim)
	if err != nil {
		return nil, time.Time{}, err
	}
	return p, exp, nil
}

// audienceHas reports whether aud, a string or an array of strings, holds
// resource exactly.
func audienceHas(aud any, resource string) bool {
	switch a := aud.(type) {
	case string:
		return a == resource
	case []any:
		for _, e := range a {
			if s, ok := e.(string); ok && s == resource {
				return true
			}
		}
	}
	return false
}

// unixSeconds reads a NumericDate that is an integer.
func unixSeconds(v any) (time.Time, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return time.Time{}, false
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil || i <= 0 || i > 1<<40 {
		return time.Time{}, false
	}
	return time.Unix(i, 0), true
}

func clonePrincipal(p *memgate.Principal) *memgate.Principal {
	c := *p
	c.Scopes = append([]string(nil), p.Scopes...)
	c.Namespaces = append([]string(nil), p.Namespaces...)
	if p.Namespaces == nil {
		c.Namespaces = nil
	}
	if p.Scopes == nil {
		c.Scopes = nil
	}
	return &c
}
