package memgate_test

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/memgate/memgate"
)

// admits reports whether string schema sc admits s, as a JSON Schema
// validator would: length in characters, then the pattern.
func admits(t *testing.T, sc memgate.Schema, s string) bool {
	t.Helper()
	n := utf8.RuneCountInString(s)
	if sc.MinLength > 0 && n < sc.MinLength || sc.MaxLength > 0 && n > sc.MaxLength {
		return false
	}
	if sc.Pattern == "" {
		return true
	}
	re, err := regexp.Compile(sc.Pattern)
	if err != nil {
		t.Fatalf("pattern %s: %v", sc.Pattern, err)
	}
	return re.MatchString(s)
}

// TestSchemasStateTheirRules: each rule's schema admits what the rule
// admits and refuses what it refuses, at the edges of each bound; where a
// rule counts bytes, the schema (which counts characters) may admit more.
func TestSchemasStateTheirRules(t *testing.T) {
	rep := strings.Repeat
	tag := *memgate.TagsSchema().Items
	key := *memgate.MetadataSchema().PropertyNames
	for _, tc := range []struct {
		name    string
		schema  memgate.Schema
		rule    func(string) bool
		samples []string
		// bytes: the rule counts bytes, so the schema may admit a value
		// the rule refuses, never the other way round.
		bytes bool
	}{
		{"id", memgate.IDSchema(), func(s string) bool { return memgate.ValidateID("id", s) == nil },
			[]string{"a", "", rep("i", 256), rep("i", 257), rep("é", 128), rep("é", 129), "a\x07b", "a\u0085b", "a\u007fb", "../x"}, true},
		{"title", memgate.TitleSchema(), func(s string) bool { return memgate.ValidateTitle("title", s) == nil },
			[]string{"a", "", rep("é", 256), rep("é", 257), "a\nb", "a\u009fb", "tab\there"}, false},
		{"tag", tag, func(s string) bool { return memgate.ValidateTag("tags", s) == nil },
			[]string{"a", "", rep("é", 64), rep("é", 65), "ns:a/b.c_d-e", "Ünïcode9", "a b", "٣", "Ⅻ", "a+b", "日本"}, false},
		{"metadata key", key, memgate.ValidMetadataKey,
			[]string{"a", "", rep("k", 64), rep("k", 65), "a.b-c_D9", "a b", "é", "a:b"}, false},
		{"namespace", memgate.NamespaceSchema(), func(s string) bool { _, err := memgate.ParseNamespace("namespace", s); return err == nil },
			[]string{"a", "", rep("n", 64), rep("n", 65), "team_a-1", "Team", "a.b", "é"}, false},
	} {
		for _, s := range tc.samples {
			schema, rule := admits(t, tc.schema, s), tc.rule(s)
			if schema != rule && !(tc.bytes && schema && !rule) {
				t.Errorf("%s %q: schema admits it %v, rule %v", tc.name, s, schema, rule)
			}
		}
	}
}

func TestTagsSchemaBoundsTheList(t *testing.T) {
	sc := memgate.TagsSchema()
	if sc.Type != "array" || sc.MaxItems != memgate.MaxTags || sc.Items == nil {
		t.Fatalf("%+v", sc)
	}
	if md := memgate.MetadataSchema(); md.MaxProperties != memgate.MaxMetadataKeys || md.AdditionalProperties == nil {
		t.Fatalf("%+v", md)
	}
	if sc := memgate.TextSchema(0); sc.MaxLength != memgate.DefaultMaxTextBytes {
		t.Fatalf("TextSchema(0) = %+v", sc)
	}
}
