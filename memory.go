package memgate

import "time"

// Limits on a memory (SPEC §1). MaxTextBytes is the default of
// --max-memory-bytes; the others are fixed.
const (
	DefaultMaxTextBytes = 64 << 10
	MaxIDBytes          = 256
	MaxTitleChars       = 256
	MaxTags             = 32
	MaxTagChars         = 64
	MaxMetadataKeys     = 32
	MaxMetadataKeyChars = 64
	MaxMetadataBytes    = 8 << 10
)

// DefaultMaxResponseBytes is the default of --max-response-bytes: no
// answer of a tool is larger than this much JSON.
const DefaultMaxResponseBytes = 4 << 20

// MinResponseBytes is the smallest --max-response-bytes that holds the
// largest legal memory in a tool's answer, with a text of maxTextBytes (0:
// the default): a tool result carries its data twice, once as structured
// content and once as a JSON string inside the text content, so a text byte
// that JSON writes as an escape (\u0001) costs up to 13 bytes on the wire; id,
// title, tags and metadata together stay under responseFieldsBytes.
func MinResponseBytes(maxTextBytes int) int {
	if maxTextBytes <= 0 {
		maxTextBytes = DefaultMaxTextBytes
	}
	return 13*maxTextBytes + responseFieldsBytes
}

// responseFieldsBytes bounds what a memory's fields other than its text
// can cost on the wire (worst case about 125 KiB: metadata of 8 KiB of "<",
// each written \u003c twice), with room for the answer around it.
const responseFieldsBytes = 512 << 10

// Memory is one stored memory as clients see it.
type Memory struct {
	ID        string         `json:"id"`
	Text      string         `json:"text"`
	Bytes     int            `json:"bytes"`
	Title     string         `json:"title,omitempty"`
	Tags      []string       `json:"tags"`
	Metadata  map[string]any `json:"metadata"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
	Version   int64          `json:"version"`
	// ExpiresAt, when set, is when the memory stops being: from then on no
	// reader sees it, and the sweeper deletes it.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Source    *Source    `json:"source,omitempty"`
	// Namespace is the namespace the memory was read from, set where a
	// view reads several (--include-namespace).
	Namespace string `json:"namespace,omitempty"`
}

// Source says where a memory came from.
type Source struct {
	Kind       string     `json:"kind"` // conversation, file, url, tool, person, ...
	Reference  string     `json:"reference"`
	Actor      string     `json:"actor"`
	ObservedAt *time.Time `json:"observed_at,omitempty"`
}

// Write asks to create or replace one memory.
//
// An empty ID asks the store to make one. IfVersion, when set, makes the
// write a compare-and-set: it succeeds only if the memory's current version
// equals *IfVersion, where 0 means "does not exist yet".
type Write struct {
	ID         string
	Text       string
	Title      string
	Tags       []string
	Metadata   map[string]any
	IfVersion  *int64
	AllowEmpty bool
	// ExpiresAt or TTL (not both) make the memory expire: at that instant,
	// or that long after the write.
	ExpiresAt *time.Time
	TTL       time.Duration
	Source    *Source
	// AllowDuplicate stores the memory even when a live memory of the
	// namespace has the same text (see Duplicate).
	AllowDuplicate bool
}

// Written is what a write did: the memory as stored, whether it was
// created, and whether it was a duplicate, which stored nothing (Memory is
// then the live memory whose text it had).
type Written struct {
	Memory       Memory
	Created      bool
	Deduplicated bool
}

// Tag matching modes for Query.TagsMode.
const (
	TagsAll = "all"
	TagsAny = "any"
)

// Query asks for memories by words, tags and metadata. At least one of Text,
// Tags and Filter is needed.
type Query struct {
	Text     string
	Tags     []string
	TagsMode string         // TagsAll (default) or TagsAny
	Filter   map[string]any // metadata equality, every key must match
	// SourceKind, when set, keeps the memories whose source has this kind.
	SourceKind string
	Limit      int // 1..MaxSearchLimit; 0 means DefaultSearchLimit
	Budget     int // tokens; 0 means no budget
}

// Search bounds (SPEC §2).
const (
	DefaultSearchLimit = 10
	MaxSearchLimit     = 100
	MaxBudget          = 100000
)

// Hit is one search result: the memory, flat, and its scores.
type Hit struct {
	Memory
	Score         float64  `json:"score"`
	LexicalScore  float64  `json:"lexical_score"`
	SemanticScore *float64 `json:"semantic_score,omitempty"`
}

// Retrieval modes for Receipt.RetrievalMode.
const (
	RetrievalLexical = "lexical"
	RetrievalHybrid  = "hybrid"
)

// Receipt says how a search was answered.
type Receipt struct {
	RetrievalMode    string `json:"retrieval_mode"`
	EmbeddingModel   string `json:"embedding_model,omitempty"`
	EmbeddingVersion string `json:"embedding_version,omitempty"`
	SemanticFallback string `json:"semantic_fallback,omitempty"`
	Candidates       int    `json:"candidates"`
	Truncated        bool   `json:"truncated,omitempty"` // the budget or the size of the answer cut hits off
	// Namespaces are the namespaces a view searched, the primary first.
	Namespaces []string `json:"namespaces,omitempty"`
}

// Result is the answer to a Query.
type Result struct {
	Hits    []Hit   `json:"hits"`
	Receipt Receipt `json:"receipt"`
}

// List orders.
const (
	OrderUpdatedDesc = "updated_desc"
	OrderCreatedAsc  = "created_asc"
	OrderCreatedDesc = "created_desc"
)

// List bounds (SPEC §2).
const (
	DefaultListLimit = 50
	MaxListLimit     = 1000
)

// ListQuery asks for one page of memories.
type ListQuery struct {
	Cursor string // opaque, from a previous Page
	Limit  int    // 1..MaxListLimit; 0 means DefaultListLimit
	Order  string // one of the Order constants; "" means OrderUpdatedDesc
	Tags   []string
	Filter map[string]any
	// Take, when set, is asked about each memory before it joins the page,
	// with its index in the page: false ends the page before it, with a
	// cursor that starts the next page at it. The first memory of a page
	// joins it whatever Take says, so every page makes progress. A store may
	// start a page over (from index 0) while it builds it.
	Take func(i int, m Memory) bool
}

// Page is one page of a listing. NextCursor is empty on the last page.
type Page struct {
	Memories   []Memory `json:"memories"`
	NextCursor string   `json:"next_cursor,omitempty"`
}

// StoreStats describes one store.
type StoreStats struct {
	Count      int64 `json:"count"`
	Bytes      int64 `json:"bytes"`       // sum of the memories' text bytes
	StoreBytes int64 `json:"store_bytes"` // size of the store on disk
	// Embedded, with hybrid recall on, is how many memories have been
	// embedded by the current model; nil when it is off.
	Embedded *int64 `json:"embedded,omitempty"`
}

// Principal is who is calling, as established by authentication.
// Namespaces, when not empty, are the only namespaces it may use.
type Principal struct {
	Subject    string
	Namespaces []string
	Scopes     []string
	// Namespace is the namespace a token names for itself, if any.
	Namespace string
}

// HasScope reports whether p holds scope.
func (p Principal) HasScope(scope string) bool {
	for _, s := range p.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// MayUse reports whether p may use namespace ns: always, when p names no
// namespaces; otherwise only the ones it names.
func (p Principal) MayUse(ns string) bool {
	if len(p.Namespaces) == 0 {
		return true
	}
	for _, n := range p.Namespaces {
		if n == ns {
			return true
		}
	}
	return false
}
