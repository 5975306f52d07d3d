package conversation

import "time"

// Page sizes of the read API (specification §8; the messages maximum is
// ARCHITECTURE.md §4's).
const (
	DefaultPageSize = 50
	MaxPageSize     = 100
)

// Cut says which part of a fetched page to return. Pages are ordered by a
// timestamp, newest first, and the cursor (next_before) is a bare timestamp:
// the next page holds everything strictly older. Rows sharing a timestamp (a
// tie group; Telegram stamps whole seconds) must therefore never be split
// across pages, or the cursor would skip the rest of the group.
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
