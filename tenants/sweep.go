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
// committer, in transactions of a few hundred memories, like any write).
// A store this pool closed with such work to come (evicted, idle) is
// reopened for it once it is due (SweepDue). A store that opens is swept
// at the next tick: its expired memories are hidden from every reader
// meanwhile, not deleted. A store no pool of this process has had open
// (since a restart) is swept when it next opens.
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
		p.SweepDue(ctx)
	}
}

// sweepRetention is the retention a sweep purges the trash by: negative
// (none) with Options.KeepTrash.
func (p *Pool) sweepRetention() time.Duration {
	if p.opts.KeepTrash || p.opts.Shared != nil && p.opts.TrashRetention == 0 {
		// A replica that keeps no trash leaves the trash of the replicas
		// that do to their sweeps, which know its retention.
		return -1
	}
	return p.opts.TrashRetention
}

// now is the stores' clock (Options.Store.Now), or the time.
func (p *Pool) now() time.Time {
	if p.opts.Store.Now != nil {
		return p.opts.Store.Now()
	}
	return time.Now()
}

// SweepDue opens, sweeps and releases each store this pool closed whose
// sweep has come due, and returns how many expired memories and trash
// entries it deleted. One it cannot open now (every slot leased, say) is
// tried again at the next tick.
func (p *Pool) SweepDue(ctx context.Context) (expired, purged int) {
	now := p.now()
	var due []memgate.Namespace
	p.mu.Lock()
	for ns, t := range p.due {
		if _, open := p.lru.Peek(ns); open {
			delete(p.due, ns) // the sweep of the open stores has it
		} else if !t.After(now) {
			due = append(due, ns)
		}
	}
	p.mu.Unlock()
	for _, ns := range due {
		select {
		case <-p.stop:
			return expired, purged
		default:
		}
		_, release, err := p.LeaseRead(ctx, ns)
		if err != nil {
			p.log.Warn("sweep of a closed store put off", "op", "tenants.sweep", "error", err)
			continue
		}
		p.mu.Lock()
		delete(p.due, ns) // closing it again records what is still to come
		p.mu.Unlock()
		e, tr, err := p.sweepOne(ctx, ns)
		release()
		expired, purged = expired+e, purged+tr
		if err != nil {
			p.log.Warn("sweep failed", "op", "tenants.sweep", "error", err)
		}
	}
	return expired, purged
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
	expired, purged, err := st.Sweep(ctx, p.sweepRetention())
	if expired > 0 && p.m.expired.Enabled(ctx) {
		p.m.expired.Add(ctx, int64(expired))
	}
	return expired, purged, err
}

func newExpiredCounter(meter metric.Meter) (metric.Int64Counter, error) {
	return meter.Int64Counter(telemetry.MetricMemoryExpired, metric.WithUnit("{memory}"),
		metric.WithDescription("Expired memories the sweeper deleted."))
}
