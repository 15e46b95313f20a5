package tenants

import (
	"context"

	"go.opentelemetry.io/otel/metric"

	"github.com/memgate/memgate/telemetry"
)

// poolMetrics are the instruments a Pool reports through.
type poolMetrics struct {
	opens       metric.Int64Counter
	evictions   metric.Int64Counter
	refusals    metric.Int64Counter
	openLatency metric.Float64Histogram
	lease       metric.Float64Histogram
	expired     metric.Int64Counter
}

func newPoolMetrics(m metric.Meter, open func() int) (*poolMetrics, error) {
	var pm poolMetrics
	var err error
	if pm.opens, err = m.Int64Counter("memgate.pool.opens",
		metric.WithDescription("Stores opened by the pool.")); err != nil {
		return nil, err
	}
	if pm.evictions, err = m.Int64Counter("memgate.pool.evictions",
		metric.WithDescription("Idle stores closed to make room or after the idle timeout.")); err != nil {
		return nil, err
	}
	if pm.expired, err = newExpiredCounter(m); err != nil {
		return nil, err
	}
	if pm.refusals, err = m.Int64Counter("memgate.pool.refusals",
		metric.WithDescription("Leases refused with too_many_stores.")); err != nil {
		return nil, err
	}
	if pm.openLatency, err = m.Float64Histogram("memgate.pool.open.duration", metric.WithUnit("s"),
		metric.WithDescription("Time to open a store.")); err != nil {
		return nil, err
	}
	if pm.lease, err = m.Float64Histogram(telemetry.MetricLeaseDuration, metric.WithUnit("s"),
		metric.WithDescription("Time a call waited for its store, by outcome (hit, open, empty, refused, failed)."),
		metric.WithExplicitBucketBoundaries(0.00001, 0.0001, 0.001, 0.01, 0.1, 1, 10)); err != nil {
		return nil, err
	}
	_, err = m.Int64ObservableGauge("memgate.pool.open_stores",
		metric.WithDescription("Stores open or opening."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(open()))
			return nil
		}))
	return &pm, err
}
