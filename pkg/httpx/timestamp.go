package httpx

import "time"

// Timestamp renders t the one way timestamps appear in API bodies, public
// and admin alike: RFC 3339 in UTC with as many fractional digits as t has
// (time.RFC3339Nano, so 2026-11-22T10:00:00.123456Z, or 2026-11-22T10:00:00Z
// on a whole second). Stored times have microsecond precision, so a
// rendered cursor such as next_before, passed back as before, means exactly
// the stored time. Webhook envelopes are not API bodies: they keep the
// dispatcher's own signed, millisecond format.
func Timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// OptionalTimestamp is Timestamp for a field that is null when t is nil.
func OptionalTimestamp(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := Timestamp(*t)
	return &s
}
