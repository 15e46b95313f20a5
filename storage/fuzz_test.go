package storage

import (
	"context"
	"strings"
	"testing"

	"github.com/memgate/memgate"
)

// FuzzImport feeds arbitrary JSON Lines to Import: it must never panic, must
// answer with a typed error, and what it reports imported must be readable
// and findable.
func FuzzImport(f *testing.F) {
	for _, s := range []string{
		`{"memgate_export":1}` + "\n" + `{"id":"a","text":"hello world","tags":["x"],"metadata":{"k":1}}`,
		`{"type":"entity","name":"Ada","entityType":"person","observations":["math"]}`,
		`{"type":"relation","from":"a","to":"b","relationType":"knows"}`,
		`{"text":""}`, `{"text":"a","created_at":"2020-01-01T00:00:00Z"}`, `[1,2]`, `{"text":1}`, "\n\n{}",
		`{"type":"entity","name":"","observations":[]}`, `{"id":"a\u0000b","text":"x"}`,
	} {
		f.Add(s)
	}
	s := openTest(f)
	f.Fuzz(func(t *testing.T, input string) {
		ctx := context.Background()
		rep, err := s.Import(ctx, strings.NewReader(input), ImportOverwrite)
		if err != nil {
			if c := memgate.ErrorCode(err); c != memgate.CodeInvalidArgument && c != memgate.CodeTooLarge {
				t.Fatalf("Import: %v", err)
			}
			return
		}
		if rep.Imported < 0 || rep.Lines < 0 {
			t.Fatalf("report %+v", rep)
		}
	})
}
