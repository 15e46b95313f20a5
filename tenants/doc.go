// Package tenants decides which store a request uses and keeps those stores
// open within bounds.
//
// A Resolver turns the configured strategy (fixed, project, token) and an
// optional per-call namespace argument into a memgate.Namespace, checking it
// against what the calling principal may use. A Pool keeps at most MaxStores
// stores open or opening, in an LRU: a request leases its store for its whole
// duration; opening a new namespace closes the least recently used idle store
// first, never a leased one; when every slot is leased, Lease fails at once
// with too_many_stores. Opening and closing never hold the lock that guards
// the map.
//
// It owns the data folder's layout, <data-dir>/stores/<namespace>/memgate.db:
// StoresDir, StoreDir and StoreFile are its one spelling, which the pool,
// cmd/memgate (rekey, readiness) and the benchmarks call.
//
// This package knows namespaces as a policy and stores as files; it must
// never import server, auth or cmd, and knows nothing of MCP or HTTP.
package tenants
