package gateway

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/labstack/echo/v4"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/time/rate"

	"github.com/memgate/memgate/server"
)

// DefaultMaxRateKeys bounds the principals the rate limiter keeps a bucket
// for: past it, the least recently seen one's bucket is dropped (it starts
// full again when that principal comes back), so memory never grows with
// the number of distinct callers.
const DefaultMaxRateKeys = 16384

// rateLimiter is a token bucket per principal in a bounded LRU.
type rateLimiter struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex
	buckets *simplelru.LRU[string, *rate.Limiter]
}

func newRateLimiter(perSecond float64, burst, maxKeys int) *rateLimiter {
	if burst <= 0 {
		burst = max(1, int(math.Ceil(perSecond)))
	}
	if maxKeys <= 0 {
		maxKeys = DefaultMaxRateKeys
	}
	l, _ := simplelru.NewLRU[string, *rate.Limiter](maxKeys, nil)
	return &rateLimiter{limit: rate.Limit(perSecond), burst: burst, buckets: l}
}

// allow takes a token of key's bucket; when there is none it returns how
// long until there is.
func (l *rateLimiter) allow(key string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	b, ok := l.buckets.Get(key)
	if !ok {
		b = rate.NewLimiter(l.limit, l.burst)
		l.buckets.Add(key, b)
	}
	l.mu.Unlock()
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// limitRate answers 429 with Retry-After to a principal past its rate,
// before its body is read. The principal is the authenticated subject, or
// the client's address when the gateway authenticates nobody.
func (g *Gateway) limitRate(next echo.HandlerFunc) echo.HandlerFunc {
	if g.rates == nil {
		return next
	}
	return func(c echo.Context) error {
		r := c.Request()
		ok, wait := g.rates.allow(rateKey(r), time.Now())
		if !ok {
			g.refused(r.Context(), "rate limited")
			secs := int(math.Ceil(wait.Seconds()))
			c.Response().Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
			if r.ContentLength != 0 {
				c.Response().Header().Set("Connection", "close")
			}
			return c.String(http.StatusTooManyRequests, "rate limited\n")
		}
		return next(c)
	}
}

// rateKey names the principal of an authenticated request, else its
// client's address.
func rateKey(r *http.Request) string {
	if ti, ok := r.Context().Value(tokenInfoKey{}).(*sdkauth.TokenInfo); ok && ti.UserID != "" {
		return "sub:" + ti.UserID
	}
	if p := server.PrincipalFrom(r.Context()); p != nil {
		return "sub:" + p.Subject
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "addr:" + host
}
