package memgate

// Schema is the part of a JSON Schema that states one rule of a memory
// (SPEC §1) to a client: the tools' input schemas are built from it. Each
// rule's Schema sits beside the function that enforces it (IDSchema beside
// ValidateID, TagsSchema beside NormalizeTags), so that the two are read and
// changed together. memgate imports only the standard library, so this is
// not a JSON Schema library's type: the server turns it into one.
//
// A bound of 0 is left out. A JSON Schema counts characters where some rules
// count bytes (an id, a text): there the schema admits a little more than
// the rule does, never less.
type Schema struct {
	Type                 string   // a JSON type: string, array or object
	Types                []string // several JSON types, instead of Type
	MinLength, MaxLength int      // characters of a string
	Pattern              string   // a regular expression a string must match
	MaxItems             int      // of an array
	Items                *Schema  // every item of an array
	MaxProperties        int      // keys of an object
	PropertyNames        *Schema  // every key of an object
	AdditionalProperties *Schema  // every value of an object
	Format               string   // of a string: date-time
	Properties           []Property
	Required             []string // of an object's Properties
	Closed               bool     // an object with no keys but its Properties
}

// Property is one named property of an object's Schema.
type Property struct {
	Name   string
	Schema Schema
}

// Patterns of the schemas. Each says what the check beside its schema
// checks, in the syntax Go, ECMAScript (with the u flag, Ajv's default) and
// JSON Schema share.
const (
	NoControlPattern   = `^[^\x00-\x1F\x7F-\x9F]*$`
	TagPattern         = `^[\p{L}\p{Nd}_.:/-]+$`
	MetadataKeyPattern = `^[A-Za-z0-9_.-]{1,64}$`
	NamespacePattern   = `^[a-z0-9_-]{1,64}$`
	SourceKindPattern  = `^[a-z_]{1,32}$`
)
