package paging

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/pkg/errs"
)

// Once refuses a query that gives one of names (a list's parameters) more
// than once: 400 invalid_request naming it, as which of the values would
// count is a guess no client should have to make.
func Once(q url.Values, names ...string) error {
	for _, name := range names {
		if len(q[name]) > 1 {
			return errs.InvalidRequest("%s is given more than once; give it once", name)
		}
	}
	return nil
}

// ParseLimit reads the limit query parameter: def when s is empty, else an
// integer from 1 to max; anything else is 400 invalid_request naming limit.
func ParseLimit(s string, def, max int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, errs.InvalidRequest("limit must be an integer from 1 to %d", max)
	}
	return n, nil
}

// ParseBefore reads the before query parameter: nil when s is empty, else
// an RFC 3339 timestamp, returned in UTC and rounded up to the microsecond;
// anything else is 400 invalid_request naming before.
func ParseBefore(s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil && strings.Contains(s, " ") {
		// An unencoded "+01:00" offset arrives as " 01:00" once the query
		// string is decoded.
		t, err = time.Parse(time.RFC3339Nano, strings.ReplaceAll(s, " ", "+"))
	}
	if err != nil {
		return nil, errs.InvalidRequest("before must be an RFC 3339 timestamp such as 2026-11-22T10:00:00Z")
	}
	// The store keeps microseconds: "before" a time between two microseconds
	// includes the earlier one.
	if r := t.Sub(t.Truncate(time.Microsecond)); r > 0 {
		t = t.Add(time.Microsecond - r)
	}
	t = t.UTC()
	return &t, nil
}
