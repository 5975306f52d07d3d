package parley

import (
	"context"
	"errors"
	"math"
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{" 3 ", 3 * time.Second},
		{"0", 0},
		{"-5", 0},
		{"1.5", 0},
		{"soon", 0},
		{"0x10", 0},
		{"Wed, 21 Oct 2015 07:28:00 GMT", 0}, // past
		// Seconds whose product overflows a Duration: the longest wait, not
		// one wrapped around (18446744074 s is 2^64 ns and 0.29 s).
		{"18446744074", math.MaxInt64},
		{"9223372037", math.MaxInt64},
		{"99999999999999999999999999", math.MaxInt64},
	} {
		if got := parseRetryAfter(tt.in); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if got := parseRetryAfter(time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)); got < 59*time.Minute || got > time.Hour {
		t.Errorf("an hour ahead: %v", got)
	}
}

// TestAbsurdRetryAfter: a Retry-After beyond MaxWait, however written, is
// returned at once; an unreadable one is as none.
func TestAbsurdRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, after string
		status      int
		attempts    int
	}{
		{"429 wrapped-around seconds", "18446744074", 429, 1},
		{"429 huge seconds", "99999999999999999999999999", 429, 1},
		{"429 negative", "-1", 429, 1},
		{"429 garbage", "soon", 429, 1},
		{"429 a past date", "Wed, 21 Oct 2015 07:28:00 GMT", 429, 1},
		{"503 wrapped-around seconds", "18446744074", 503, 1},
		{"503 garbage backs off", "soon", 503, 4},
		{"503 a past date backs off", "Wed, 21 Oct 2015 07:28:00 GMT", 503, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, rec, waits := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
				apiError(w, tt.status, "rate_limited", tt.after)
			})
			_, err := c.Flows(context.Background())
			var perr *Error
			if !errors.As(err, &perr) || perr.Status != tt.status {
				t.Fatalf("error %v", err)
			}
			if n := len(rec.all()); n != tt.attempts {
				t.Errorf("%d attempts, want %d", n, tt.attempts)
			}
			for _, d := range *waits {
				if d <= 0 || d > defaultMaxWait {
					t.Errorf("a wait of %v", d)
				}
			}
		})
	}
}
