// Package telemetry holds what memgate's packages share to report through
// OpenTelemetry: the names of spans, metrics and attributes (the MCP and
// GenAI memory conventions, and memgate's own), the providers a package is
// given, the keyed hash that stands for a namespace on a span, a carrier of
// trace context in an MCP request's _meta, and a log handler that adds the
// active span's ids to each line. See docs/OBSERVABILITY.md.
//
// It uses the OpenTelemetry API only, never the SDK or an exporter:
// cmd/memgate installs those. It imports nothing of the project, so that
// server, gateway and tenants can all use it.
//
// # Privacy
//
// Nothing here takes memory text, queries, ids, tags, namespaces, subjects
// or tokens as an attribute value: a namespace goes on a span only as
// StoreIDs.ID, a keyed hash, and never on a metric.
package telemetry
