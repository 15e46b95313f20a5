package driver

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Hist records latencies in microseconds, from 1 µs to 10 minutes, to three
// significant digits. It is not safe for concurrent use: give each worker
// its own and Merge them.
type Hist struct{ h *hdrhistogram.Histogram }

// NewHist returns an empty histogram.
func NewHist() *Hist { return &Hist{hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)} }

// Record adds one latency; values outside the range are clamped into it.
func (h *Hist) Record(d time.Duration) {
	us := max(d.Microseconds(), 1)
	if err := h.h.RecordValue(us); err != nil {
		h.h.RecordValue(h.h.HighestTrackableValue())
	}
}

// Merge adds every value of o.
func (h *Hist) Merge(o *Hist) { h.h.Merge(o.h) }

// Count is the number of values recorded.
func (h *Hist) Count() int64 { return h.h.TotalCount() }

// P is the q-quantile (0 < q ≤ 1) in microseconds; 0 when empty.
func (h *Hist) P(q float64) float64 {
	if h.h.TotalCount() == 0 {
		return 0
	}
	return float64(h.h.ValueAtQuantile(q * 100))
}

// Mean is the mean in microseconds.
func (h *Hist) Mean() float64 { return h.h.Mean() }
