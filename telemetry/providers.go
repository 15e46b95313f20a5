package telemetry

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Providers are what a package reports through. The zero value makes no
// span at all and records metrics through the global meter provider, which
// does nothing until one is installed: with nothing configured, a call
// costs a nil check and an Enabled check per instrument.
type Providers struct {
	// Tracer makes the spans; nil makes none (not even non-recording ones,
	// which would cost a context per span).
	Tracer trace.TracerProvider
	// Meter records the metrics; nil means the global provider.
	Meter metric.MeterProvider
	// Propagator reads a caller's trace context from HTTP headers and from
	// an MCP request's _meta; nil means W3C trace context and baggage.
	Propagator propagation.TextMapPropagator
	// StoreKey keys the hash that stands for a namespace on a span
	// (gen_ai.memory.store.id); nil means a random key made once per
	// process, so the same namespace has the same id within a process only.
	StoreKey []byte
}

// MeterProvider is p.Meter, or the global provider.
func (p Providers) MeterProvider() metric.MeterProvider {
	if p.Meter != nil {
		return p.Meter
	}
	return otel.GetMeterProvider()
}

// TextMapPropagator is p.Propagator, or W3C trace context and baggage.
func (p Providers) TextMapPropagator() propagation.TextMapPropagator {
	if p.Propagator != nil {
		return p.Propagator
	}
	return defaultPropagator
}

var defaultPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// StoreIDs turns namespaces into the values of gen_ai.memory.store.id: the
// first 16 bytes of HMAC-SHA256 under a key, in hex. Whoever reads the
// traces without the key learns neither the namespace nor whether two
// deployments serve the same one. It is safe for concurrent use.
type StoreIDs struct {
	key []byte
	mu  sync.Mutex
	ids map[string]string
}

// maxStoreIDs bounds the ids a StoreIDs keeps computed.
const maxStoreIDs = 4096

var (
	processKeyOnce sync.Once
	processKey     []byte
)

// NewStoreIDs returns the ids under key; an empty key means one made at
// random once per process.
func NewStoreIDs(key []byte) *StoreIDs {
	if len(key) == 0 {
		processKeyOnce.Do(func() {
			processKey = make([]byte, 32)
			rand.Read(processKey)
		})
		key = processKey
	}
	return &StoreIDs{key: key, ids: map[string]string{}}
}

// ID returns the store id of namespace ns.
func (s *StoreIDs) ID(ns string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.ids[ns]; ok {
		return id
	}
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(ns))
	id := hex.EncodeToString(m.Sum(nil)[:16])
	if len(s.ids) >= maxStoreIDs {
		clear(s.ids)
	}
	s.ids[ns] = id
	return id
}

// MetaCarrier carries trace context in an MCP request's params._meta: the
// traceparent, tracestate and baggage keys, as the MCP conventions read
// them (string values only).
type MetaCarrier map[string]any

// Get returns the string value of key, "" when there is none.
func (m MetaCarrier) Get(key string) string {
	v, _ := m[key].(string)
	return v
}

// Set sets key to value.
func (m MetaCarrier) Set(key, value string) { m[key] = value }

// Keys lists the keys.
func (m MetaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// HasTraceContext reports whether meta names a parent span.
func HasTraceContext(meta map[string]any) bool {
	_, ok := meta["traceparent"].(string)
	return ok
}
