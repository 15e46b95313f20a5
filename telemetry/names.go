package telemetry

import "go.opentelemetry.io/otel/attribute"

// Instrumentation scopes: the name of the tracer and the meter of each
// package.
const (
	ScopeServer  = "github.com/memgate/memgate/server"
	ScopeGateway = "github.com/memgate/memgate/server/gateway"
	ScopeTenants = "github.com/memgate/memgate/tenants"
)

// Attributes of the MCP conventions (semantic-conventions-genai,
// docs/gen-ai/mcp.md). None is a Go constant of otel's semconv packages
// after v1.41.0, where they left the core conventions.
const (
	MCPMethodName      = attribute.Key("mcp.method.name")
	MCPProtocolVersion = attribute.Key("mcp.protocol.version")
	JSONRPCRequestID   = attribute.Key("jsonrpc.request.id")
	RPCResponseStatus  = attribute.Key("rpc.response.status_code")
	GenAIToolName      = attribute.Key("gen_ai.tool.name")
	GenAIPromptName    = attribute.Key("gen_ai.prompt.name")
	GenAIOperationName = attribute.Key("gen_ai.operation.name")
	NetworkTransport   = attribute.Key("network.transport")
	ErrorType          = attribute.Key("error.type")
)

// Attributes of the GenAI memory conventions (semantic-conventions-genai,
// docs/gen-ai/gen-ai-spans.md, Memory).
const (
	MemoryStoreID     = attribute.Key("gen_ai.memory.store.id")
	MemoryRecordCount = attribute.Key("gen_ai.memory.record.count")
)

// memgate's own attributes.
const (
	// StoreOperation is the store method a memory span or metric stands
	// for: get, list, search, stats, put, propose, delete, export.
	StoreOperation = attribute.Key("memgate.store.operation")
	// ErrorCode is memgate's error code of a failed call (not_found,
	// invalid_argument, ...), beside error.type.
	ErrorCode = attribute.Key("memgate.error.code")
	// LeaseOutcome says how a lease ended: LeaseHit, LeaseOpen, LeaseEmpty,
	// LeaseRefused or LeaseFailed.
	LeaseOutcome = attribute.Key("memgate.lease.outcome")
)

// Values of LeaseOutcome.
const (
	LeaseHit     = "hit"     // the store was open (or opening, and the lease waited for it)
	LeaseOpen    = "open"    // this lease opened the store
	LeaseEmpty   = "empty"   // a read of a namespace with no store on disk: nothing opened
	LeaseRefused = "refused" // every slot leased: too_many_stores
	LeaseFailed  = "failed"  // the open failed, or the request ended while it waited
)

// Values of gen_ai.operation.name.
const (
	OpExecuteTool  = "execute_tool"
	OpSearchMemory = "search_memory"
	OpUpsertMemory = "upsert_memory"
	OpCreateMemory = "create_memory"
	OpDeleteMemory = "delete_memory"
)

// ToolError is the error.type of a tools/call answered with isError.
const ToolError = "tool_error"

// Span names besides the conventions' own ({mcp.method.name} {target},
// {gen_ai.operation.name}, {http.request.method} {http.route}).
const (
	SpanLease = "memgate.lease"
	// SpanStats and SpanExport stand for the store operations that no
	// GenAI memory operation describes.
	SpanStats  = "memgate.stats"
	SpanExport = "memgate.export"
)

// Metric names.
const (
	// MetricMCPOperationDuration is the MCP conventions' server operation
	// duration (s), by mcp.method.name, gen_ai.tool.name, error.type,
	// mcp.protocol.version and network.transport.
	MetricMCPOperationDuration = "mcp.server.operation.duration"

	// The memory-semconv v0.1.0 names (memory_operation_duration_seconds,
	// memory_recall_results_count, memory_items_total, memory_bytes_total
	// in Prometheus), by gen_ai.operation.name, memgate.store.operation and
	// error.type.
	MetricMemoryOperationDuration = "memory.operation.duration"
	MetricMemoryRecallResults     = "memory.recall.results"
	MetricMemoryItems             = "memory.items"
	MetricMemoryBytes             = "memory.bytes"

	// MetricLeaseDuration is the time a call waited for its store, by
	// memgate.lease.outcome.
	MetricLeaseDuration = "memgate.pool.lease.duration"

	// MetricMemoryExpired and MetricMemoryDeduplicated are the names of the
	// counters of memories deleted by expiry and of remembers answered with
	// an existing memory, for the parts that do those to report through.
	MetricMemoryExpired      = "memgate.memory.expired"
	MetricMemoryDeduplicated = "memgate.memory.deduplicated"
)
