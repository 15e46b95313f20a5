package memgate_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/memgate/memgate"
)

func TestErrorCarriesCodeNotCause(t *testing.T) {
	cause := errors.New("disk on fire at /secret/path")
	err := fmt.Errorf("wrapped: %w", memgate.Internal("storage.Put", cause))
	if got := memgate.ErrorCode(err); got != memgate.CodeInternal {
		t.Fatalf("code = %s", got)
	}
	e := memgate.AsError("x", err)
	if e.Message != memgate.InternalMessage || strings.Contains(e.Message, "secret") {
		t.Fatalf("client message %q leaks the cause", e.Message)
	}
	if !errors.Is(err, cause) {
		t.Fatal("the cause must stay reachable for the log")
	}
	if memgate.ErrorCode(errors.New("plain")) != memgate.CodeInternal || memgate.ErrorCode(nil) != "" {
		t.Fatal("a plain error is internal; nil has no code")
	}
	if got := memgate.AsError("op", errors.New("plain")); got.Code != memgate.CodeInternal || got.Op != "op" {
		t.Fatalf("AsError(plain) = %+v", got)
	}
}

func TestEveryCodeIsListed(t *testing.T) {
	want := "invalid_argument not_found version_conflict too_large secret_detected forbidden store_locked too_many_stores quota_exceeded unavailable internal"
	var got []string
	for _, c := range memgate.Codes {
		got = append(got, string(c))
	}
	if strings.Join(got, " ") != want {
		t.Fatalf("codes = %v", got)
	}
}

func TestPrincipal(t *testing.T) {
	p := memgate.Principal{Scopes: []string{"memory:read"}, Namespaces: []string{"a"}}
	if !p.HasScope("memory:read") || p.HasScope("memory:write") {
		t.Fatal("HasScope")
	}
	if !p.MayUse("a") || p.MayUse("b") || !(memgate.Principal{}).MayUse("b") {
		t.Fatal("MayUse")
	}
}

func TestMemoryJSONShape(t *testing.T) {
	m := memgate.Memory{ID: "x", Text: "t", Bytes: 1, Tags: []string{}, Metadata: map[string]any{}}
	b, _ := json.Marshal(m)
	want := `{"id":"x","text":"t","bytes":1,"tags":[],"metadata":{},"created_at":"0001-01-01T00:00:00Z","updated_at":"0001-01-01T00:00:00Z","version":0}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

func FuzzValidateID(f *testing.F) {
	for _, s := range []string{"a", "", "a\x00b", strings.Repeat("x", 257), "é", "\xff", "../../etc/passwd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := memgate.ValidateID("id", id)
		ok := id != "" && len(id) <= memgate.MaxIDBytes && utf8.ValidString(id) && strings.IndexFunc(id, unicode.IsControl) < 0
		if (err == nil) != ok {
			t.Fatalf("ValidateID(%q) = %v, want ok=%v", id, err, ok)
		}
		if err != nil && memgate.ErrorCode(err) != memgate.CodeInvalidArgument {
			t.Fatalf("code %s", memgate.ErrorCode(err))
		}
	})
}

func FuzzNormalizeMetadata(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":{"b":1}}`, `{"a":[1]}`, `{"a b":1}`, `{"k":"` + strings.Repeat("v", 9000) + `"}`, `{"n":null,"b":true,"f":1.5e300}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		var md map[string]any
		if json.Unmarshal([]byte(doc), &md) != nil {
			return
		}
		out, err := memgate.NormalizeMetadata("metadata", md)
		if err != nil {
			if memgate.ErrorCode(err) != memgate.CodeInvalidArgument {
				t.Fatalf("code %s", memgate.ErrorCode(err))
			}
			return
		}
		b, err := json.Marshal(out)
		if err != nil || len(b) > memgate.MaxMetadataBytes || len(out) > memgate.MaxMetadataKeys {
			t.Fatalf("accepted metadata breaks a rule: %d bytes, %d keys, %v", len(b), len(out), err)
		}
		for k, v := range out {
			if !memgate.ValidMetadataKey(k) {
				t.Fatalf("accepted key %q", k)
			}
			switch v.(type) {
			case nil, bool, string, float64:
			default:
				t.Fatalf("accepted value of type %T", v)
			}
		}
	})
}

func TestMetadataSizeCountsCharactersAsWritten(t *testing.T) {
	// 8 bytes of {"k":""} and 8184 of value: exactly 8192, with characters
	// that JSON may HTML-escape.
	at := map[string]any{"k": strings.Repeat("<", 8184)}
	if _, err := memgate.NormalizeMetadata("metadata", at); err != nil {
		t.Fatalf("8192 bytes: %v", err)
	}
	over := map[string]any{"k": strings.Repeat("&", 8185)}
	if _, err := memgate.NormalizeMetadata("metadata", over); memgate.ErrorCode(err) != memgate.CodeInvalidArgument {
		t.Fatalf("8193 bytes: %v", err)
	}
}
