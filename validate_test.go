package memgate_test

import (
	"testing"
	"time"

	"github.com/memgate/memgate"
)

// ParseTime takes RFC 3339 as written (either case of T and Z, any
// fraction, a leap second), refuses what it does not allow (+24:00, a
// space), and bounds the year to 1970–2261, whatever the writer.
func TestParseTime(t *testing.T) {
	for s, want := range map[string]string{
		"2030-01-01T10:00:00Z":           "2030-01-01T10:00:00Z",
		"2030-01-01t10:00:00z":           "2030-01-01T10:00:00Z",
		"2030-01-01T10:00:00.5+02:00":    "2030-01-01T08:00:00.5Z",
		"2030-06-30T23:59:60Z":           "2030-07-01T00:00:00Z",
		"2261-12-31T23:59:59.999999999Z": "2261-12-31T23:59:59.999999999Z",
		"1970-01-01T00:00:00.000000001Z": "1970-01-01T00:00:00.000000001Z",
	} {
		got, err := memgate.ParseTime("expires_at", s)
		if err != nil || got.Format(time.RFC3339Nano) != want {
			t.Errorf("%s: %v %v, want %s", s, got, err, want)
		}
	}
	for _, s := range []string{"2030-01-01T10:00:00+24:00", "2030-01-01 10:00:00Z", "2030-01-01T24:00:00Z",
		"2030-02-30T10:00:00Z", "2262-01-01T00:00:00Z", "1970-01-01T00:00:00Z", "1969-12-31T23:59:59Z",
		"9999-12-31T23:59:59Z", "2030-01-01T10:00Z", "2030-01-01", "", "2030-01-01T10:00:61Z"} {
		if _, err := memgate.ParseTime("expires_at", s); memgate.ErrorCode(err) != memgate.CodeInvalidArgument {
			t.Errorf("%q: %v", s, err)
		}
	}
}
