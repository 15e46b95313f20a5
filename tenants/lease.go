package tenants

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/telemetry"
)

// A lease is observed when a tracer or a meter is installed: a span
// (memgate.lease, whose duration is the lease's wait, with how it ended)
// and memgate.pool.lease.duration. Neither names the namespace: the
// store operations that follow carry its hash.

// observeLease is leaseOpened with its span and duration.
func (p *Pool) observeLease(ctx context.Context, ns memgate.Namespace) (*storage.Store, func(), bool, error) {
	start := time.Now()
	var span trace.Span
	if p.tracer != nil {
		ctx, span = p.tracer.Start(ctx, telemetry.SpanLease, trace.WithSpanKind(trace.SpanKindInternal))
	}
	s, release, opened, err := p.leaseOpened(ctx, ns)
	outcome := telemetry.LeaseHit
	switch {
	case memgate.ErrorCode(err) == memgate.CodeTooManyStores:
		outcome = telemetry.LeaseRefused
	case err != nil:
		outcome = telemetry.LeaseFailed
	case opened:
		outcome = telemetry.LeaseOpen
	}
	p.endLease(ctx, span, start, outcome, err)
	return s, release, opened, err
}

// observeEmpty observes a read lease of a namespace with no store.
func (p *Pool) observeEmpty(ctx context.Context) {
	if p.tracer == nil && !p.m.lease.Enabled(ctx) {
		return
	}
	start := time.Now()
	var span trace.Span
	if p.tracer != nil {
		ctx, span = p.tracer.Start(ctx, telemetry.SpanLease, trace.WithSpanKind(trace.SpanKindInternal))
	}
	p.endLease(ctx, span, start, telemetry.LeaseEmpty, nil)
}

// endLease ends a lease's span and records its duration.
func (p *Pool) endLease(ctx context.Context, span trace.Span, start time.Time, outcome string, err error) {
	if span != nil {
		span.SetAttributes(telemetry.LeaseOutcome.String(outcome))
		if err != nil {
			span.SetAttributes(telemetry.ErrorType.String(string(memgate.ErrorCode(err))))
			span.SetStatus(codes.Error, "")
		}
		span.End()
	}
	if p.m.lease.Enabled(ctx) {
		p.m.lease.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(telemetry.LeaseOutcome.String(outcome)))
	}
}
