package dailycap_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/dailycap"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/testenv"
)

// clock is a settable time for the counter.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }
func utc(s string) time.Time     { t, _ := time.Parse(time.RFC3339, s); return t }
func ulaanbaatar(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Ulaanbaatar")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func newCounter(t *testing.T, clk *clock) (*dailycap.Counter, *testenv.Env) {
	t.Helper()
	env := testenv.New(t)
	rdb := env.Redis(t)
	return dailycap.New(rdb, redisx.Keys{Prefix: env.RedisPrefix}, dailycap.PrivateReply, ulaanbaatar(t), dailycap.WithClock(clk.now)), env
}

// TestDayIsTheCalendarDayInTheZone: Ulaanbaatar is UTC+8 all year, so its
// midnight is 16:00 UTC the day before.
func TestDayIsTheCalendarDayInTheZone(t *testing.T) {
	t.Parallel()
	c := dailycap.New(nil, redisx.Keys{}, dailycap.PrivateReply, ulaanbaatar(t))
	tests := []struct {
		name string
		give time.Time
		want string
	}{
		{"utc morning is ulaanbaatar afternoon", utc("2026-11-22T02:00:00Z"), "2026-11-22"},
		{"last second before ulaanbaatar midnight", utc("2026-11-22T15:59:59Z"), "2026-11-22"},
		{"ulaanbaatar midnight", utc("2026-11-22T16:00:00Z"), "2026-11-23"},
		{"still the 22nd in utc, already the 23rd there", utc("2026-11-22T23:59:59Z"), "2026-11-23"},
		{"new year", utc("2026-12-31T16:00:00Z"), "2027-01-01"},
		{"leap day", utc("2028-02-28T16:30:00Z"), "2028-02-29"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.Day(tt.give); got != tt.want {
				t.Errorf("Day(%s) = %s, want %s", tt.give, got, tt.want)
			}
		})
	}
	if got, want := c.ResetsAt(utc("2026-11-22T10:00:00Z")), utc("2026-11-22T16:00:00Z"); !got.Equal(want) {
		t.Errorf("ResetsAt = %s, want %s", got, want)
	}
	if got, want := c.ResetsAt(utc("2026-11-22T16:00:00Z")), utc("2026-11-23T16:00:00Z"); !got.Equal(want) {
		t.Errorf("ResetsAt at midnight = %s, want %s", got, want)
	}
}

func TestReserveUpToTheCapThenRefuse(t *testing.T) {
	t.Parallel()
	clk := &clock{t: utc("2026-11-22T10:00:00Z")}
	c, env := newCounter(t, clk)
	ctx := context.Background()

	tests := []struct {
		name      string
		subject   string
		limit     int
		wantOK    bool
		wantCount int
	}{
		{"first of three", "page-1", 3, true, 1},
		{"second of three", "page-1", 3, true, 2},
		{"third of three", "page-1", 3, true, 3},
		{"fourth refused", "page-1", 3, false, 3},
		{"still refused, not counted", "page-1", 3, false, 3},
		{"another page has its own count", "page-2", 3, true, 1},
		{"a raised cap applies at once", "page-1", 4, true, 4},
		{"a cap of zero refuses", "page-3", 0, false, 0},
	}
	for _, tt := range tests {
		r, ok, err := c.Reserve(ctx, tt.subject, tt.limit)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if ok != tt.wantOK || r.Count != tt.wantCount {
			t.Fatalf("%s: ok=%v count=%d, want ok=%v count=%d", tt.name, ok, r.Count, tt.wantOK, tt.wantCount)
		}
		if !ok && r.Units != 0 {
			t.Fatalf("%s: a refused reservation holds %d units", tt.name, r.Units)
		}
	}
	if n, err := c.Used(ctx, "page-1"); err != nil || n != 4 {
		t.Fatalf("Used(page-1) = %d, %v", n, err)
	}
	if n, err := c.Used(ctx, "page-never"); err != nil || n != 0 {
		t.Fatalf("Used(page-never) = %d, %v", n, err)
	}

	// The key lives under the prefix, named by counter, page and day, and
	// expires after two days.
	key := env.RedisPrefix + "privatereply:page-1:2026-11-22"
	if got := c.Key("page-1", "2026-11-22"); got != key {
		t.Fatalf("Key = %s, want %s", got, key)
	}
	rdb := env.Redis(t)
	ttl, err := rdb.TTL(ctx, key).Result()
	if err != nil || ttl <= 47*time.Hour || ttl > 48*time.Hour {
		t.Fatalf("TTL(%s) = %s, %v; want about 48h", key, ttl, err)
	}
	// Nothing was written without the prefix. Only the unprefixed name is
	// looked at: a pattern over all keys would also find other tests' and
	// other checkouts' counters, each under its own prefix.
	if n, err := rdb.Exists(ctx, "privatereply:page-1:2026-11-22").Result(); err != nil || n != 0 {
		t.Fatalf("an unprefixed counter exists (%d, %v)", n, err)
	}
}

// TestMidnightInUlaanbaatarResetsTheCap moves the injected clock across
// Ulaanbaatar's midnight (16:00 UTC): a cap reached at 23:59:59 there is
// lifted at 00:00:00, and a release after midnight gives the unit back to
// the day it was taken from.
func TestMidnightInUlaanbaatarResetsTheCap(t *testing.T) {
	t.Parallel()
	clk := &clock{t: utc("2026-11-22T15:59:58Z")}
	c, _ := newCounter(t, clk)
	ctx := context.Background()

	steps := []struct {
		name    string
		at      string
		release bool // release the first reservation instead of reserving
		wantOK  bool
		wantDay string
	}{
		{"23:59:58 first of two", "2026-11-22T15:59:58Z", false, true, "2026-11-22"},
		{"23:59:59 second of two", "2026-11-22T15:59:59Z", false, true, "2026-11-22"},
		{"23:59:59 cap reached", "2026-11-22T15:59:59Z", false, false, "2026-11-22"},
		{"00:00:00 a new day", "2026-11-22T16:00:00Z", false, true, "2026-11-23"},
		{"00:00:01 second of the new day", "2026-11-22T16:00:01Z", false, true, "2026-11-23"},
		{"00:00:02 new day's cap reached", "2026-11-22T16:00:02Z", false, false, "2026-11-23"},
		{"00:00:03 the 22nd's first unit released", "2026-11-22T16:00:03Z", true, false, ""},
		{"00:00:04 the new day stays full", "2026-11-22T16:00:04Z", false, false, "2026-11-23"},
	}
	var first dailycap.Reservation
	for i, st := range steps {
		clk.set(utc(st.at))
		if st.release {
			if err := c.Release(ctx, first); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			continue
		}
		r, ok, err := c.Reserve(ctx, "page-ub", 2)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if ok != st.wantOK || r.Day != st.wantDay {
			t.Fatalf("%s: ok=%v day=%s, want ok=%v day=%s", st.name, ok, r.Day, st.wantOK, st.wantDay)
		}
		if i == 0 {
			first = r
		}
	}
	// The 22nd now holds one unit, the 23rd two.
	clk.set(utc("2026-11-22T15:00:00Z"))
	if n, _ := c.Used(ctx, "page-ub"); n != 1 {
		t.Fatalf("the 22nd holds %d units, want 1", n)
	}
	clk.set(utc("2026-11-23T15:59:59Z"))
	if n, _ := c.Used(ctx, "page-ub"); n != 2 {
		t.Fatalf("the 23rd holds %d units, want 2", n)
	}
}

func TestReleaseGivesBackAndNeverGoesNegative(t *testing.T) {
	t.Parallel()
	clk := &clock{t: utc("2026-11-22T10:00:00Z")}
	c, env := newCounter(t, clk)
	ctx := context.Background()

	r, ok, err := c.Reserve(ctx, "page-1", 1)
	if err != nil || !ok {
		t.Fatalf("reserve: %v %v", ok, err)
	}
	if _, ok, _ := c.Reserve(ctx, "page-1", 1); ok {
		t.Fatal("second reservation under a cap of 1 was taken")
	}
	if err := c.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := c.Reserve(ctx, "page-1", 1); !ok {
		t.Fatal("the released unit was not available again")
	}
	// Releasing twice, or a refused reservation, takes nothing away from
	// others' reservations below zero.
	_ = c.Release(ctx, r)
	_ = c.Release(ctx, r)
	if n, _ := c.Used(ctx, "page-1"); n != 0 {
		t.Fatalf("used = %d after over-releasing, want 0 (never negative)", n)
	}
	if err := c.Release(ctx, dailycap.Reservation{}); err != nil {
		t.Fatalf("empty release: %v", err)
	}
	// A release of an expired day does not bring the key back.
	gone := dailycap.Reservation{Key: c.Key("page-1", "2026-11-01"), Day: "2026-11-01", Units: 1}
	if err := c.Release(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if n, _ := env.Redis(t).Exists(ctx, gone.Key).Result(); n != 0 {
		t.Fatal("release recreated an expired day's key")
	}
}

func TestReserveNIsAllOrNothing(t *testing.T) {
	t.Parallel()
	clk := &clock{t: utc("2026-11-22T10:00:00Z")}
	c, _ := newCounter(t, clk)
	ctx := context.Background()

	if _, _, err := c.ReserveN(ctx, "page-1", 0, 10); err != dailycap.ErrInvalid {
		t.Fatalf("n=0: %v", err)
	}
	if _, _, err := c.ReserveN(ctx, "page-1", 1, -1); err != dailycap.ErrInvalid {
		t.Fatalf("limit=-1: %v", err)
	}
	r, ok, err := c.ReserveN(ctx, "page-1", 7, 10)
	if err != nil || !ok || r.Count != 7 || r.Units != 7 {
		t.Fatalf("batch of 7: %+v %v %v", r, ok, err)
	}
	if r2, ok, _ := c.ReserveN(ctx, "page-1", 4, 10); ok || r2.Count != 7 {
		t.Fatalf("batch of 4 over 10 taken: %+v", r2)
	}
	if _, ok, _ := c.ReserveN(ctx, "page-1", 3, 10); !ok {
		t.Fatal("batch of 3 up to exactly 10 refused")
	}
	if err := c.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Used(ctx, "page-1"); n != 3 {
		t.Fatalf("used = %d after releasing the 7, want 3", n)
	}
}

// TestConcurrentReservationsNeverExceedTheCap: instances racing for the
// last units get exactly the cap between them.
func TestConcurrentReservationsNeverExceedTheCap(t *testing.T) {
	t.Parallel()
	clk := &clock{t: utc("2026-11-22T10:00:00Z")}
	c, _ := newCounter(t, clk)
	ctx := context.Background()

	var taken atomic.Int64
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok, err := c.Reserve(ctx, "page-hot", 15); err == nil && ok {
				taken.Add(1)
			}
		}()
	}
	wg.Wait()
	if taken.Load() != 15 {
		t.Fatalf("%d reservations taken under a cap of 15", taken.Load())
	}
}
