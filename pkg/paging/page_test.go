package paging

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at returns base plus each offset in seconds.
func at(secs ...int) []time.Time {
	out := make([]time.Time, len(secs))
	for i, s := range secs {
		out[i] = base.Add(time.Duration(s) * time.Second)
	}
	return out
}

func ts(s int) *time.Time { v := base.Add(time.Duration(s) * time.Second); return &v }

// above is one microsecond above second s: the cursor just before a tie
// group at s.
func above(s int) *time.Time {
	v := base.Add(time.Duration(s)*time.Second + time.Microsecond)
	return &v
}

func TestCutPage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		give  []time.Time
		limit int
		want  Cut
	}{
		{"empty", nil, 2, Cut{}},
		{"fewer than the limit", at(5, 4), 3, Cut{Keep: 2}},
		{"exactly the limit", at(5, 4), 2, Cut{Keep: 2}},
		{"more, no tie at the edge", at(5, 4, 3), 2, Cut{Keep: 2, Next: ts(4)}},
		{"a tie inside the page is fine", at(5, 5, 3), 2, Cut{Keep: 2, Next: ts(5)}},
		{"a tie across the edge cuts before its group", at(5, 4, 4), 2, Cut{Keep: 1, Next: above(4)}},
		{"a longer group across the edge", at(6, 5, 4, 4, 4), 4, Cut{Keep: 2, Next: above(4)}},
		{"the group fills the page", at(4, 4, 4), 2, Cut{WholeGroup: true}},
		{"limit one with a tie", at(4, 4), 1, Cut{WholeGroup: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := CutPage(tt.give, tt.limit)
			if got.Keep != tt.want.Keep || got.WholeGroup != tt.want.WholeGroup || !sameTime(got.Next, tt.want.Next) {
				t.Fatalf("CutPage = %+v (next %v), want %+v (next %v)", got, got.Next, tt.want, tt.want.Next)
			}
		})
	}
}

// row is a stored row: an id and its timestamp.
type row struct {
	id    int
	stamp time.Time
}

func stampOf(r row) time.Time { return r.stamp }

// table holds rows newest first (ties by id descending), the order a
// store's ORDER BY stamp DESC, id DESC gives, and answers Fetch the way a
// store does.
type table struct {
	rows  []row
	calls int
}

func newTable(secs ...int) *table {
	tb := &table{}
	for i, s := range at(secs...) {
		tb.rows = append(tb.rows, row{id: len(secs) - i, stamp: s})
	}
	return tb
}

func (tb *table) fetch(before, at *time.Time, limit int) ([]row, error) {
	tb.calls++
	var out []row
	for _, r := range tb.rows {
		switch {
		case at != nil:
			if r.stamp.Equal(*at) {
				out = append(out, r)
			}
		case before == nil || r.stamp.Before(*before):
			if len(out) < limit {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func ids(rows []row) []int {
	out := make([]int, len(rows))
	for i, r := range rows {
		out[i] = r.id
	}
	return out
}

func TestPaginate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		give     []int // seconds, newest first
		before   *time.Time
		limit    int
		wantIDs  []int
		wantNext *time.Time
	}{
		{"empty", nil, nil, 2, []int{}, nil},
		{"all fit", []int{5, 4}, nil, 3, []int{2, 1}, nil},
		{"exactly the limit has no next page", []int{5, 4}, nil, 2, []int{2, 1}, nil},
		{"more rows", []int{5, 4, 3}, nil, 2, []int{3, 2}, ts(4)},
		{"before is exclusive", []int{5, 4, 3}, ts(4), 2, []int{1}, nil},
		{"a tie across the edge stops before its group", []int{5, 4, 4, 3}, nil, 2, []int{4}, above(4)},
		{"the next page starts with the group", []int{5, 4, 4, 3}, above(4), 2, []int{3, 2}, ts(4)},
		{"a group larger than the limit is one page", []int{4, 4, 4, 3}, nil, 2, []int{4, 3, 2}, ts(4)},
		{"a larger group that ends the list", []int{4, 4, 4}, nil, 2, []int{3, 2, 1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tb := newTable(tt.give...)
			got, next, err := Paginate(tt.before, tt.limit, tb.fetch, stampOf)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(got), tt.wantIDs) || !sameTime(next, tt.wantNext) {
				t.Fatalf("Paginate = %v next %v, want %v next %v", ids(got), next, tt.wantIDs, tt.wantNext)
			}
		})
	}
}

// Following next_before from the first page meets every row exactly once,
// in order, whatever the ties and the limit.
func TestPaginateWalksEveryRowOnce(t *testing.T) {
	t.Parallel()
	lists := [][]int{
		{},
		{1},
		{5, 4, 4, 4, 3, 2, 2, 1},
		{3, 3, 3, 3, 3},
		{9, 9, 8, 7, 7, 7, 7, 6, 5, 5},
		{4, 3, 3, 2, 2, 1, 1, 1},
	}
	for _, secs := range lists {
		for limit := 1; limit <= len(secs)+1; limit++ {
			t.Run(fmt.Sprintf("%v/limit=%d", secs, limit), func(t *testing.T) {
				t.Parallel()
				tb := newTable(secs...)
				var got []int
				var before *time.Time
				for pages := 0; ; pages++ {
					if pages > len(secs) {
						t.Fatal("the walk does not end")
					}
					page, next, err := Paginate(before, limit, tb.fetch, stampOf)
					if err != nil {
						t.Fatal(err)
					}
					if len(page) > limit {
						for _, r := range page {
							if !r.stamp.Equal(page[0].stamp) {
								t.Fatalf("page of %d over limit %d spans several timestamps", len(page), limit)
							}
						}
					}
					got = append(got, ids(page)...)
					if next == nil {
						break
					}
					if len(page) == 0 {
						t.Fatal("empty page with a next cursor")
					}
					before = next
				}
				if want := ids(tb.rows); !slices.Equal(got, want) {
					t.Fatalf("walk = %v, want %v", got, want)
				}
			})
		}
	}
}

func TestPaginateErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("store down")
	tests := []struct {
		name   string
		limit  int
		failAt int // the fetch call that fails, from 1; 0 for none
	}{
		{"limit zero", 0, 0},
		{"limit negative", -1, 0},
		{"first fetch", 2, 1},
		{"the whole group", 2, 2},
		{"the look past the group", 2, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tb := newTable(4, 4, 4, 3)
			fetch := func(before, at *time.Time, limit int) ([]row, error) {
				if tb.calls+1 == tt.failAt {
					tb.calls++
					return nil, boom
				}
				return tb.fetch(before, at, limit)
			}
			rows, next, err := Paginate(nil, tt.limit, fetch, stampOf)
			if err == nil || rows != nil || next != nil {
				t.Fatalf("Paginate = %v, %v, %v; want an error", rows, next, err)
			}
			if tt.failAt > 0 && !errors.Is(err, boom) {
				t.Fatalf("err = %v, want the store's", err)
			}
		})
	}
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
