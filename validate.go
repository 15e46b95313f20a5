package memgate

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ValidateID checks a memory id: 1–256 bytes of valid UTF-8 without control
// characters.
func ValidateID(field, id string) error {
	switch {
	case id == "":
		return Invalid(field, "id must not be empty")
	case len(id) > MaxIDBytes:
		return Invalid(field, "id must be at most %d bytes", MaxIDBytes)
	case !utf8.ValidString(id):
		return Invalid(field, "id must be valid UTF-8")
	case strings.IndexFunc(id, unicode.IsControl) >= 0:
		return Invalid(field, "id must not contain control characters")
	}
	return nil
}

// IDSchema states ValidateID's rule (the schema counts characters, the rule
// bytes).
func IDSchema() Schema {
	return Schema{Type: "string", MinLength: 1, MaxLength: MaxIDBytes, Pattern: NoControlPattern}
}

// ValidateTitle checks a title: 1–256 characters of valid UTF-8 without
// control characters. (A Write reads an empty Title as none, and Normalize
// checks only a title there is; a title given as an argument must not be
// empty.)
func ValidateTitle(field, title string) error {
	switch n := utf8.RuneCountInString(title); {
	case !utf8.ValidString(title):
		return Invalid(field, "title must be valid UTF-8")
	case n == 0 || n > MaxTitleChars:
		return Invalid(field, "title must be 1 to %d characters", MaxTitleChars)
	case strings.IndexFunc(title, unicode.IsControl) >= 0:
		return Invalid(field, "title must not contain control characters")
	}
	return nil
}

// TitleSchema states ValidateTitle's rule.
func TitleSchema() Schema {
	return Schema{Type: "string", MinLength: 1, MaxLength: MaxTitleChars, Pattern: NoControlPattern}
}

// validateText checks a text's size (too_large past maxTextBytes) and
// encoding.
func validateText(text string, maxTextBytes int) error {
	if len(text) > maxTextBytes {
		return &Error{
			Code: CodeTooLarge,
			Message: "text is larger than the limit of " + strconv.Itoa(maxTextBytes) +
				" bytes; split it into several memories",
			Details: map[string]any{"field": "text", "limit": maxTextBytes},
		}
	}
	if !utf8.ValidString(text) {
		return Invalid("text", "text must be valid UTF-8")
	}
	return nil
}

// TextSchema states the rule on a text of at most maxTextBytes (0 means the
// default); the schema counts characters, the rule bytes.
func TextSchema(maxTextBytes int) Schema {
	if maxTextBytes <= 0 {
		maxTextBytes = DefaultMaxTextBytes
	}
	return Schema{Type: "string", MaxLength: maxTextBytes}
}

// Normalize validates w against every rule of a memory and returns it with
// duplicate tags dropped (order kept) and metadata numbers as float64.
// maxTextBytes is the configured --max-memory-bytes (0 means the default).
//
// The rules are checked in the order in which remember lists its arguments
// (text, id, title, tags, metadata, if_version) and the one across fields,
// empty text without AllowEmpty, last: of several faults, the error names
// the first a caller reads.
func (w Write) Normalize(maxTextBytes int) (Write, error) {
	if maxTextBytes <= 0 {
		maxTextBytes = DefaultMaxTextBytes
	}
	if err := validateText(w.Text, maxTextBytes); err != nil {
		return w, err
	}
	if w.ID != "" {
		if err := ValidateID("id", w.ID); err != nil {
			return w, err
		}
	}
	if w.Title != "" {
		if err := ValidateTitle("title", w.Title); err != nil {
			return w, err
		}
	}
	tags, err := NormalizeTags("tags", w.Tags)
	if err != nil {
		return w, err
	}
	w.Tags = tags
	md, err := NormalizeMetadata("metadata", w.Metadata)
	if err != nil {
		return w, err
	}
	w.Metadata = md
	if w.IfVersion != nil && *w.IfVersion < 0 {
		return w, Invalid("if_version", "if_version must be 0 (create only) or a version read earlier")
	}
	if !w.AllowEmpty && strings.TrimSpace(w.Text) == "" {
		return w, Invalid("text", "text is empty or only white space; pass allow_empty: true to store it anyway")
	}
	switch {
	case w.ExpiresAt != nil && w.TTL != 0:
		return w, Invalid("ttl_seconds", "give expires_at or ttl_seconds, not both")
	case w.TTL != 0 && (w.TTL < time.Second || w.TTL > MaxTTLSeconds*time.Second):
		return w, Invalid("ttl_seconds", "ttl_seconds must be 1 to %d", MaxTTLSeconds)
	case w.ExpiresAt != nil:
		t := w.ExpiresAt.UTC()
		w.ExpiresAt = &t
	}
	if w.Source != nil {
		src, err := NormalizeSource("source", *w.Source)
		if err != nil {
			return w, err
		}
		w.Source = &src
	}
	return w, nil
}

// Expiry and provenance bounds (SPEC §1, §2).
const (
	MaxTTLSeconds       = 315360000 // ten years
	MaxSourceKindChars  = 32
	MaxSourceRefChars   = 1024
	MaxSourceActorChars = 256
)

// ExpiredBy reports whether a memory that expires at expires (nil: never)
// is gone at now: from its expiry instant on.
func ExpiredBy(expires *time.Time, now time.Time) bool {
	return expires != nil && !expires.After(now)
}

// ValidateSourceKind checks a source's kind: 1–32 of a-z and _.
func ValidateSourceKind(field, kind string) error {
	if len(kind) == 0 || len(kind) > MaxSourceKindChars {
		return Invalid(field, "a source kind must be 1 to %d characters of a-z and _", MaxSourceKindChars)
	}
	for i := 0; i < len(kind); i++ {
		if c := kind[i]; !('a' <= c && c <= 'z' || c == '_') {
			return Invalid(field, "a source kind must be 1 to %d characters of a-z and _", MaxSourceKindChars)
		}
	}
	return nil
}

// SourceKindSchema states ValidateSourceKind's rule.
func SourceKindSchema() Schema {
	return Schema{Type: "string", MinLength: 1, MaxLength: MaxSourceKindChars, Pattern: SourceKindPattern}
}

// NormalizeSource validates a memory's source (field names it, and its
// parts field.kind, field.reference, field.actor) and returns it with
// observed_at in UTC.
func NormalizeSource(field string, src Source) (Source, error) {
	if err := ValidateSourceKind(field+".kind", src.Kind); err != nil {
		return src, err
	}
	for _, part := range []struct {
		name, value string
		max         int
	}{{"reference", src.Reference, MaxSourceRefChars}, {"actor", src.Actor, MaxSourceActorChars}} {
		name := field + "." + part.name
		switch n := utf8.RuneCountInString(part.value); {
		case !utf8.ValidString(part.value):
			return src, Invalid(name, "%s must be valid UTF-8", name)
		case n == 0 || n > part.max:
			return src, Invalid(name, "%s must be 1 to %d characters", name, part.max)
		case strings.IndexFunc(part.value, unicode.IsControl) >= 0:
			return src, Invalid(name, "%s must not contain control characters", name)
		}
	}
	if src.ObservedAt != nil {
		t := src.ObservedAt.UTC()
		src.ObservedAt = &t
	}
	return src, nil
}

// SourceSchema states NormalizeSource's rule.
func SourceSchema() Schema {
	text := func(max int) Schema {
		return Schema{Type: "string", MinLength: 1, MaxLength: max, Pattern: NoControlPattern}
	}
	return Schema{Type: "object", Closed: true, Required: []string{"kind", "reference", "actor"},
		Properties: []Property{
			{"kind", SourceKindSchema()},
			{"reference", text(MaxSourceRefChars)},
			{"actor", text(MaxSourceActorChars)},
			{"observed_at", Schema{Type: "string", Format: "date-time"}},
		}}
}

// NormalizeTags validates tags (at most 32, each 1–64 letters, digits or
// `_ - . : /`) and drops duplicates, keeping the first of each. It never
// returns nil.
func NormalizeTags(field string, tags []string) ([]string, error) {
	out := make([]string, 0, len(tags))
	for i, t := range tags {
		if err := ValidateTag(field, t); err != nil {
			return nil, err
		}
		if contains(out, t) {
			continue
		}
		if len(out) == MaxTags {
			return nil, Invalid(field, "at most %d distinct tags are allowed (tag %d is one too many)", MaxTags, i+1)
		}
		out = append(out, t)
	}
	return out, nil
}

// ValidateTag checks one tag.
func ValidateTag(field, t string) error {
	if !utf8.ValidString(t) {
		return Invalid(field, "a tag must be valid UTF-8")
	}
	n := 0
	for _, r := range t {
		n++
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("_-.:/", r) {
			return Invalid(field, "a tag may hold only letters, digits and _ - . : /")
		}
	}
	if n == 0 || n > MaxTagChars {
		return Invalid(field, "a tag must be 1 to %d characters", MaxTagChars)
	}
	return nil
}

// TagsSchema states NormalizeTags' rule, for a list of tags given as an
// argument: it may not hold more than MaxTags items, duplicates included.
func TagsSchema() Schema {
	return Schema{Type: "array", MaxItems: MaxTags,
		Items: &Schema{Type: "string", MinLength: 1, MaxLength: MaxTagChars, Pattern: TagPattern}}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// NormalizeMetadata validates metadata (at most 32 keys [A-Za-z0-9_.-]{1,64},
// flat values, at most 8 KiB as JSON) and returns a copy whose numbers are
// float64. It never returns nil.
func NormalizeMetadata(field string, md map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(md))
	if len(md) > MaxMetadataKeys {
		return nil, Invalid(field, "metadata may have at most %d keys", MaxMetadataKeys)
	}
	for k, v := range md {
		if !ValidMetadataKey(k) {
			return nil, Invalid(field, "metadata keys must match [A-Za-z0-9_.-]{1,64}")
		}
		nv, ok := FlatValue(v)
		if !ok {
			return nil, Invalid(field, "metadata values must be a string, a finite number, a boolean or null")
		}
		out[k] = nv
	}
	if len(out) > 0 {
		// Measured as compact JSON without HTML escaping: "<" counts one
		// byte, as a client writes it, not six.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(out); err != nil {
			return nil, Invalid(field, "metadata must be encodable as JSON")
		}
		if buf.Len()-1 > MaxMetadataBytes { // Encode adds a newline
			return nil, Invalid(field, "metadata must be at most %d bytes as JSON", MaxMetadataBytes)
		}
	}
	return out, nil
}

// MetadataSchema states NormalizeMetadata's rule (all but the size as JSON).
func MetadataSchema() Schema {
	return Schema{Type: "object", MaxProperties: MaxMetadataKeys,
		PropertyNames:        &Schema{Pattern: MetadataKeyPattern},
		AdditionalProperties: &Schema{Types: []string{"string", "number", "boolean", "null"}}}
}

// ValidMetadataKey reports whether k is a valid metadata key.
func ValidMetadataKey(k string) bool {
	if len(k) == 0 || len(k) > MaxMetadataKeyChars {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// FlatValue returns v as one of the flat JSON kinds memgate stores — string,
// float64, bool or nil — and whether it is one.
func FlatValue(v any) (any, bool) {
	switch x := v.(type) {
	case nil, bool:
		return x, true
	case string:
		return x, utf8.ValidString(x)
	case float64:
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	case float32:
		return FlatValue(float64(x))
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return nil, false
		}
		return FlatValue(f)
	}
	return nil, false
}

// rfc3339 is a date-time of RFC 3339 (section 5.6): T and Z in either case,
// a fraction of any length, an offset or Z.
var rfc3339 = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$`)

// Times a memory may carry (expires_at, created_at, …): from 1970 through
// 2261, which the store orders as nanoseconds since the epoch.
var (
	minTime = time.Date(1970, 1, 1, 0, 0, 0, 1, time.UTC)
	maxTime = time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)
)

// ParseTime parses s, argument name, as an RFC 3339 date-time from 1970
// through 2261, in UTC. A leap second (:60) is the instant after :59.
func ParseTime(name, s string) (time.Time, error) {
	bad := Invalid(name, "%s must be an RFC 3339 time from 1970 through 2261, such as 2026-12-31T23:59:00Z", name)
	m := rfc3339.FindStringSubmatch(s)
	if m == nil || m[1] > "23" || m[2] > "59" || m[3] > "60" || m[6] > "23" || m[7] > "59" {
		return time.Time{}, bad
	}
	norm := strings.ToUpper(s)
	leap := m[3] == "60"
	if leap {
		norm = norm[:17] + "59" + norm[19:]
	}
	t, err := time.Parse(time.RFC3339Nano, norm)
	if err != nil {
		return time.Time{}, bad
	}
	if leap {
		t = t.Add(time.Second)
	}
	if t = t.UTC(); t.Before(minTime) || !t.Before(maxTime) {
		return time.Time{}, bad
	}
	return t, nil
}
