package auth

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
)

// Bounds of a JWKS document.
const (
	maxJWKSBytes = 512 << 10
	maxJWKSKeys  = 64
	minRSABits   = 2048
)

// Defaults of the key cache.
const (
	DefaultJWKSRefresh = 5 * time.Minute
	defaultMinRefetch  = 10 * time.Second
	defaultMaxKeyAge   = 24 * time.Hour
)

var errNoKeys = errors.New("no usable key")

// keyCache holds the keys of a JWKS URL. It fetches them on first use,
// again in the background once they are older than refresh (the stale
// keys serve meanwhile), and at once when a token names a key it does not
// know, but never more often than once per minGap, so a flood of made-up
// key ids costs the identity service one request per minGap. Keys that
// could not be refreshed for maxAge are dropped: a key removed from the
// document stops working within that time even while the URL is down.
//
// A keyCache for a file holds its keys for good.
type keyCache struct {
	url     string
	client  *http.Client
	refresh time.Duration
	minGap  time.Duration
	maxAge  time.Duration
	now     func() time.Time
	log     *slog.Logger

	mu       sync.Mutex
	set      jwk.Set
	fetched  time.Time     // when set was fetched
	tried    time.Time     // when the last fetch started
	inflight chan struct{} // closed when the running fetch ends; nil when none runs
	lastErr  error
}

// fileKeys reads a JWKS document from a file.
func fileKeys(path string) (*keyCache, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("JWKS file: %w", pathless(err))
	}
	defer f.Close()
	set, err := readKeySet(f)
	if err != nil {
		return nil, fmt.Errorf("JWKS file: %w", err)
	}
	return &keyCache{set: set, now: time.Now}, nil
}

// readKeySet reads and filters a JWKS document: only public RSA (2048 bits
// and more), EC and OKP signing keys are kept, so an HMAC secret or a key
// meant for encryption in the document can never verify a token.
func readKeySet(r io.Reader) (jwk.Set, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxJWKSBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxJWKSBytes)
	}
	parsed, err := jwk.Parse(b)
	if err != nil {
		return nil, errors.New("not a JWKS document")
	}
	if parsed.Len() > maxJWKSKeys {
		return nil, fmt.Errorf("more than %d keys", maxJWKSKeys)
	}
	set := jwk.NewSet()
	for i := range parsed.Len() {
		key, _ := parsed.Key(i)
		if use := key.KeyUsage(); use != "" && use != string(jwk.ForSignature) {
			continue
		}
		pub, err := key.PublicKey()
		if err != nil {
			continue
		}
		switch pub.KeyType() {
		case jwa.RSA:
			var raw rsa.PublicKey
			if pub.Raw(&raw) != nil || raw.N.BitLen() < minRSABits {
				continue
			}
		case jwa.EC, jwa.OKP:
		default:
			continue // oct: a shared secret never verifies here
		}
		if err := set.AddKey(pub); err != nil {
			continue
		}
	}
	if set.Len() == 0 {
		return nil, errNoKeys
	}
	return set, nil
}

// keys returns the current keys, fetching them if there are none (or only
// ones too old to trust); a nil set means the keys are unavailable.
func (c *keyCache) keys(ctx context.Context) jwk.Set {
	if c.url == "" {
		return c.set
	}
	c.mu.Lock()
	now := c.now()
	usable := c.set != nil && now.Sub(c.fetched) <= c.maxAge
	if usable {
		if now.Sub(c.fetched) > c.refresh && c.inflight == nil && now.Sub(c.tried) >= c.minGap {
			c.startFetch(now)
		}
		set := c.set
		c.mu.Unlock()
		return set
	}
	c.mu.Unlock()
	return c.refetch(ctx)
}

// refetch fetches the keys again now, unless a fetch runs (then it waits
// for that one) or the last one started less than minGap ago, and returns
// the keys it has afterwards.
func (c *keyCache) refetch(ctx context.Context) jwk.Set {
	if c.url == "" {
		return c.set
	}
	c.mu.Lock()
	now := c.now()
	wait := c.inflight
	if wait == nil && now.Sub(c.tried) >= c.minGap {
		wait = c.startFetch(now)
	}
	c.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set == nil || c.now().Sub(c.fetched) > c.maxAge {
		return nil
	}
	return c.set
}

// startFetch starts a fetch in the background. c.mu is held.
func (c *keyCache) startFetch(now time.Time) chan struct{} {
	done := make(chan struct{})
	c.inflight, c.tried = done, now
	go func() {
		set, err := c.fetch()
		c.mu.Lock()
		if err == nil {
			c.set, c.fetched = set, c.now()
			if c.lastErr != nil {
				c.log.Warn("the JWKS URL answers again", "op", "auth.jwks")
			}
		} else if c.lastErr == nil || c.lastErr.Error() != err.Error() {
			c.log.Warn("fetching the JWKS failed; cached keys, if any, stay in use", "op", "auth.jwks", "error", err.Error())
		}
		c.lastErr = err
		c.inflight = nil
		c.mu.Unlock()
		close(done)
	}()
	return done
}

// fetch gets the document once. Its own deadline is the client's timeout,
// not a caller's: other requests may be waiting for it.
func (c *keyCache) fetch() (jwk.Set, error) {
	req, err := http.NewRequest(http.MethodGet, c.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, application/jwk-set+json")
	res, err := c.client.Do(req)
	if err != nil {
		return nil, errors.New("the JWKS URL did not answer")
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
		return nil, fmt.Errorf("the JWKS URL answered %d", res.StatusCode)
	}
	set, err := readKeySet(res.Body)
	if err != nil {
		return nil, fmt.Errorf("the JWKS URL's document: %w", err)
	}
	return set, nil
}
