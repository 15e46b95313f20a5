package gateway

import (
	"fmt"
	"testing"
	"time"
)

// The buckets never pass their bound, whatever the number of callers, and
// a bucket gives exactly its burst at once.
func TestRateLimiterIsBounded(t *testing.T) {
	l := newRateLimiter(1, 2, 8)
	now := time.Now()
	for i := range 10000 {
		l.allow(fmt.Sprint("caller-", i), now)
	}
	if n := l.buckets.Len(); n > 8 {
		t.Fatalf("%d buckets, bound 8", n)
	}
	for i := range 2 {
		if ok, _ := l.allow("same", now); !ok {
			t.Fatalf("request %d of a burst of 2 refused", i+1)
		}
	}
	ok, wait := l.allow("same", now)
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("request 3: %v, wait %v", ok, wait)
	}
	if ok, _ := l.allow("same", now.Add(time.Second)); !ok {
		t.Fatal("a token a second later was refused")
	}
}

// BenchmarkRateLimiter is the limiter's own cost per request: one
// principal's bucket taken, as a noop call through the gateway pays it.
func BenchmarkRateLimiter(b *testing.B) {
	l := newRateLimiter(1e9, 0, 0)
	b.ReportAllocs()
	for b.Loop() {
		l.allow("sub:alice", time.Now())
	}
}
