package conversation

import (
	"testing"
	"time"
)

func TestCutPage(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(secs ...int) []time.Time {
		out := make([]time.Time, len(secs))
		for i, s := range secs {
			out[i] = base.Add(time.Duration(s) * time.Second)
		}
		return out
	}
	ts := func(s int) *time.Time { v := base.Add(time.Duration(s) * time.Second); return &v }
	above := func(s int) *time.Time { v := base.Add(time.Duration(s)*time.Second + time.Microsecond); return &v }
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

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
