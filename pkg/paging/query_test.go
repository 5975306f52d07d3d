package paging_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/paging"
)

func TestParseLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		give    string
		want    int
		wantErr bool
	}{
		{"absent takes the default", "", 50, false},
		{"one", "1", 1, false},
		{"the maximum", "100", 100, false},
		{"zero", "0", 0, true},
		{"above the maximum", "101", 0, true},
		{"negative", "-1", 0, true},
		{"a fraction", "1.5", 0, true},
		{"a word", "ten", 0, true},
		{"padded", " 5", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := paging.ParseLimit(tt.give, paging.DefaultLimit, paging.MaxLimit)
			if tt.wantErr {
				wantInvalid(t, err, "limit must be an integer from 1 to 100")
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseLimit(%q) = %d, %v; want %d", tt.give, got, err, tt.want)
			}
		})
	}
	if got, err := paging.ParseLimit("20", 10, 20); got != 20 || err != nil {
		t.Fatalf("own bounds: %d %v", got, err)
	}
	_, err := paging.ParseLimit("21", 10, 20)
	wantInvalid(t, err, "limit must be an integer from 1 to 20")
}

func TestParseBefore(t *testing.T) {
	t.Parallel()
	utc := func(s string) *time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		v = v.UTC()
		return &v
	}
	tests := []struct {
		name    string
		give    string
		want    *time.Time
		wantErr bool
	}{
		{"absent", "", nil, false},
		{"UTC", "2026-11-22T10:00:00Z", utc("2026-11-22T10:00:00Z"), false},
		{"an offset, in UTC", "2026-11-22T12:00:00+02:00", utc("2026-11-22T10:00:00Z"), false},
		{"an unencoded plus", "2026-11-22T12:00:00 02:00", utc("2026-11-22T10:00:00Z"), false},
		{"a negative offset", "2026-11-22T05:00:00-05:00", utc("2026-11-22T10:00:00Z"), false},
		{"microseconds stay", "2026-11-22T10:00:00.000001Z", utc("2026-11-22T10:00:00.000001Z"), false},
		{"below a microsecond rounds up", "2026-11-22T10:00:00.0000001Z", utc("2026-11-22T10:00:00.000001Z"), false},
		{"just above a microsecond rounds up", "2026-11-22T10:00:00.000001001Z", utc("2026-11-22T10:00:00.000002Z"), false},
		{"a word", "yesterday", nil, true},
		{"a date only", "2026-11-22", nil, true},
		{"unix seconds", "1768471200", nil, true},
		{"no zone", "2026-11-22T10:00:00", nil, true},
		{"a space elsewhere", "2026-11-22 10:00:00Z", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := paging.ParseBefore(tt.give)
			if tt.wantErr {
				wantInvalid(t, err, "before must be an RFC 3339 timestamp")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tt.want == nil) || got != nil && (!got.Equal(*tt.want) || got.Location() != time.UTC) {
				t.Fatalf("ParseBefore(%q) = %v, want %v in UTC", tt.give, got, tt.want)
			}
		})
	}
}

func wantInvalid(t *testing.T, err error, message string) {
	t.Helper()
	e, ok := errs.As(err)
	if !ok || e.Status != http.StatusBadRequest || e.Code != errs.CodeInvalidRequest || !strings.HasPrefix(e.Message, message) {
		t.Fatalf("err = %v, want 400 invalid_request %q", err, message)
	}
}

// Whatever the query holds, the parsers answer a value in bounds or a 400,
// never a panic.
func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{"", "1", "100", "0", "101", "-1", "1.5", "ten", " 5", "9223372036854775808"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := paging.ParseLimit(s, paging.DefaultLimit, paging.MaxLimit)
		if err != nil {
			wantInvalid(t, err, "limit must be")
			return
		}
		if n < 1 || n > paging.MaxLimit {
			t.Fatalf("ParseLimit(%q) = %d", s, n)
		}
	})
}

func FuzzParseBefore(f *testing.F) {
	for _, s := range []string{"", "2026-11-22T10:00:00Z", "2026-11-22T12:00:00 02:00", "2026-11-22T10:00:00.0000001Z", "yesterday", "2026-11-22", " "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := paging.ParseBefore(s)
		if err != nil {
			wantInvalid(t, err, "before must be")
			return
		}
		if s == "" {
			if got != nil {
				t.Fatalf("ParseBefore(\"\") = %v", got)
			}
			return
		}
		if got == nil || got.Location() != time.UTC || !got.Equal(got.Truncate(time.Microsecond)) {
			t.Fatalf("ParseBefore(%q) = %v, want a UTC time in whole microseconds", s, got)
		}
	})
}

// A list parameter given twice is refused, naming it: which of the values
// would count is a guess no client should have to make.
func TestOnce(t *testing.T) {
	t.Parallel()
	for _, q := range []string{"", "limit=10", "limit=10&before=2026-11-22T10:00:00Z", "other=1&other=2"} {
		v, _ := url.ParseQuery(q)
		if err := paging.Once(v, "limit", "before"); err != nil {
			t.Errorf("Once(%q) = %v, want nil", q, err)
		}
	}
	for _, q := range []string{"limit=10&limit=20", "before=a&limit=1&before=b", "limit=&limit="} {
		v, _ := url.ParseQuery(q)
		name := "limit"
		if strings.HasPrefix(q, "before") {
			name = "before"
		}
		wantInvalid(t, paging.Once(v, "limit", "before"), name+" is given more than once")
	}
}
