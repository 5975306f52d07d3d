package httpx_test

import (
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/httpx"
)

func TestTimestamp(t *testing.T) {
	t.Parallel()
	plus2 := time.FixedZone("+02:00", 2*60*60)
	tests := []struct {
		name string
		give time.Time
		want string
	}{
		{"a whole second", time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), "2026-11-22T10:00:00Z"},
		{"milliseconds", time.Date(2026, 11, 22, 10, 0, 0, 123_000_000, time.UTC), "2026-11-22T10:00:00.123Z"},
		{"microseconds, as stored", time.Date(2026, 11, 22, 10, 0, 0, 123_456_000, time.UTC), "2026-11-22T10:00:00.123456Z"},
		{"trailing zeros dropped", time.Date(2026, 11, 22, 10, 0, 0, 120_000_000, time.UTC), "2026-11-22T10:00:00.12Z"},
		{"another zone, in UTC", time.Date(2026, 11, 22, 12, 0, 0, 1_000, plus2), "2026-11-22T10:00:00.000001Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := httpx.Timestamp(tt.give); got != tt.want {
				t.Fatalf("Timestamp = %q, want %q", got, tt.want)
			}
			back, err := time.Parse(time.RFC3339Nano, tt.want)
			if err != nil || !back.Equal(tt.give) {
				t.Fatalf("%q does not parse back to %v: %v", tt.want, tt.give, err)
			}
		})
	}
}

func TestOptionalTimestamp(t *testing.T) {
	t.Parallel()
	if got := httpx.OptionalTimestamp(nil); got != nil {
		t.Fatalf("OptionalTimestamp(nil) = %q, want nil", *got)
	}
	at := time.Date(2026, 11, 22, 10, 0, 0, 5_000, time.UTC)
	if got := httpx.OptionalTimestamp(&at); got == nil || *got != "2026-11-22T10:00:00.000005Z" {
		t.Fatalf("OptionalTimestamp = %v", got)
	}
}
