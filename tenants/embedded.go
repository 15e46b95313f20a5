package tenants

import (
	"context"

	"go.opentelemetry.io/otel/metric"
)

// MetricEmbedded is the gauge of the memories of the open stores that
// hybrid recall has embedded with the current model; with memory.items it
// shows the catch-up's progress.
const MetricEmbedded = "memgate.embedding.embedded"

// observeEmbedded registers the gauge of the memories embedded in the open
// stores.
func (p *Pool) observeEmbedded(m metric.Meter) error {
	_, err := m.Int64ObservableGauge(MetricEmbedded, metric.WithUnit("{memory}"),
		metric.WithDescription("Memories of the open stores that hybrid recall has embedded with the current model."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			if p.opts.Store.Embedder == nil {
				return nil
			}
			var n int64
			p.mu.Lock()
			for _, e := range p.lru.Values() {
				if e.store != nil {
					n += e.store.Embedded()
				}
			}
			p.mu.Unlock()
			o.Observe(n)
			return nil
		}))
	return err
}
