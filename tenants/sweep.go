package tenants

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/telemetry"
)

// DefaultSweepInterval is the default of --sweep-interval.
const DefaultSweepInterval = time.Minute

// sweep deletes, every Options.SweepInterval, the expired memories of the
// open stores and the trash entries past Options.TrashRetention. A store
// leased by a request is swept all the same (a sweep goes through its
// committer, in transactions of a few hundred memories, like any write);
// one that is closing, or idle past its time, is left to its next open.
// A store that opens is swept at the next tick: its expired memories are
// hidden from every reader meanwhile, not deleted.
func (p *Pool) sweep() {
	t := time.NewTicker(p.opts.SweepInterval)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.stop: // a shutdown ends a sweep under way
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		p.SweepOpen(ctx)
	}
}

// SweepOpen sweeps every open store once (see sweep) and returns how many
// expired memories and trash entries it deleted.
func (p *Pool) SweepOpen(ctx context.Context) (expired, purged int) {
	p.mu.Lock()
	namespaces := p.lru.Keys()
	p.mu.Unlock()
	for _, ns := range namespaces {
		select {
		case <-p.stop:
			return expired, purged
		default:
		}
		e, p2, err := p.sweepOne(ctx, ns)
		expired, purged = expired+e, purged+p2
		if err != nil {
			p.log.Warn("sweep failed", "op", "tenants.sweep", "error", err)
		}
	}
	return expired, purged
}

// sweepOne sweeps the store of ns if it is open, holding a lease so that it
// is not closed meanwhile.
func (p *Pool) sweepOne(ctx context.Context, ns memgate.Namespace) (int, int, error) {
	p.mu.Lock()
	e, ok := p.lru.Peek(ns)
	if ok && !p.closed {
		select {
		case <-e.ready:
			ok = e.store != nil
		default:
			ok = false // still opening
		}
	}
	if !ok || p.closed {
		p.mu.Unlock()
		return 0, 0, nil
	}
	e.leases++
	st := e.store
	p.mu.Unlock()
	defer p.release(e, false)
	expired, purged, err := st.Sweep(ctx, p.opts.TrashRetention)
	if expired > 0 && p.m.expired.Enabled(ctx) {
		p.m.expired.Add(ctx, int64(expired))
	}
	return expired, purged, err
}

func newExpiredCounter(meter metric.Meter) (metric.Int64Counter, error) {
	return meter.Int64Counter(telemetry.MetricMemoryExpired, metric.WithUnit("{memory}"),
		metric.WithDescription("Expired memories the sweeper deleted."))
}
