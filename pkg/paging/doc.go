// Package paging is how Parley's read APIs page newest-first lists: the
// limit and before query parameters, and a cursor (next_before) that is a
// bare timestamp yet walks every row exactly once, even when rows share a
// timestamp.
//
// The timestamps are those of a PostgreSQL timestamptz column, so they have
// microsecond precision; the cursor arithmetic relies on that.
package paging
