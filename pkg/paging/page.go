package paging

import (
	"errors"
	"time"
)

// Page sizes of the read APIs (docs/api.md "Paging").
const (
	DefaultLimit = 50
	MaxLimit     = 100
)

// Cut says which part of a fetched page to return. Pages are ordered by a
// timestamp, newest first, and the cursor (next_before) is a bare timestamp:
// the next page holds everything strictly older. Rows sharing a timestamp (a
// tie group; Telegram stamps whole seconds, and a busy log stamps several
// rows in one microsecond) must therefore never be split across pages, or
// the cursor would skip the rest of the group.
type Cut struct {
	// Keep is how many of the fetched rows make the page.
	Keep int
	// Next is the cursor for the following page; nil when there is none or,
	// with WholeGroup, when still to be decided.
	Next *time.Time
	// WholeGroup means the first row's tie group fills the page and goes on
	// past it: the page must be that whole group (more than the limit, the
	// only case where a page exceeds it), with Next its timestamp if older
	// rows exist.
	WholeGroup bool
}

// CutPage decides a page from the timestamps of up to limit+1 rows fetched
// newest first:
//   - at most limit rows: all of them, no next page;
//   - the row after the limit is older than the last kept one: limit rows,
//     next_before = the last kept row's timestamp;
//   - it shares the last kept row's timestamp: the page stops before that
//     tie group, and next_before is one microsecond (the store's precision)
//     above the group's timestamp, so the next page starts with the group;
//   - the group starts the page: WholeGroup.
//
// limit must be at least 1.
func CutPage(stamps []time.Time, limit int) Cut {
	if len(stamps) <= limit {
		return Cut{Keep: len(stamps)}
	}
	last := stamps[limit-1]
	if !stamps[limit].Equal(last) {
		return Cut{Keep: limit, Next: &last}
	}
	start := limit - 1
	for start > 0 && stamps[start-1].Equal(last) {
		start--
	}
	if start == 0 {
		return Cut{WholeGroup: true}
	}
	next := last.Add(time.Microsecond)
	return Cut{Keep: start, Next: &next}
}

// Fetch reads rows newest first. Called with at nil, it returns up to limit
// rows stamped strictly before before (every row when before is nil);
// called with at set, it returns every row stamped exactly at, ignoring
// before and limit.
type Fetch[T any] func(before, at *time.Time, limit int) ([]T, error)

// errLimit guards CutPage, which would index out of range.
var errLimit = errors.New("paging: limit must be at least 1")

// Paginate returns one page of rows newest first, and the cursor to the
// next page (nil on the last), such that following the cursor walks every
// row exactly once (CutPage). It fetches limit+1 rows to know whether more
// follow; when one tie group fills the page and runs past it, it fetches
// that whole group instead, which is then the page (the only case where a
// page holds more than limit rows). stamp gives a row's timestamp.
func Paginate[T any](before *time.Time, limit int, fetch Fetch[T], stamp func(T) time.Time) ([]T, *time.Time, error) {
	if limit < 1 {
		return nil, nil, errLimit
	}
	rows, err := fetch(before, nil, limit+1)
	if err != nil {
		return nil, nil, err
	}
	stamps := make([]time.Time, len(rows))
	for i, r := range rows {
		stamps[i] = stamp(r)
	}
	cut := CutPage(stamps, limit)
	if !cut.WholeGroup {
		return rows[:cut.Keep], cut.Next, nil
	}
	at := stamps[0]
	group, err := fetch(nil, &at, 0)
	if err != nil {
		return nil, nil, err
	}
	older, err := fetch(&at, nil, 1)
	if err != nil {
		return nil, nil, err
	}
	if len(older) == 0 {
		return group, nil, nil
	}
	return group, &at, nil
}
