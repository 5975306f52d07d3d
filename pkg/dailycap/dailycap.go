// Package dailycap counts, per subject and per calendar day, how much of a
// daily allowance has been used, in Redis, so that every instance of every
// service that spends the allowance shares one count.
//
// Its first user is the page's daily private-reply cap (docs/comments.md
// "Its limits": default 200 per page per day, reset at midnight Ulaanbaatar time, shared
// by comment private replies, comment auto-DM, post-commerce and bulk
// reply). Whoever sends a private reply reserves one unit under the
// PrivateReply counter and the page id before the send, and releases it
// when the send did not happen.
//
// Days are calendar days in a time.Location (DAILY_RESET_TZ), so the count
// resets at that zone's midnight rather than 24 hours after the first use.
// Each day has its own key, "<REDIS_PREFIX><counter>:<subject>:<yyyy-mm-dd>",
// which expires two days after its first use: long enough to outlive its
// day in any zone, short enough that old days clean themselves up.
package dailycap

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/redisx"
)

// PrivateReply names the counter of a page's private replies (subject: the
// page id, a channel's external_id). Every producer of private replies uses
// it, so they share one cap.
const PrivateReply = "privatereply"

// keyTTL is how long a day's key lives after its first reservation.
const keyTTL = 48 * time.Hour

// dayLayout names a day in keys.
const dayLayout = "2006-01-02"

// reserveScript adds ARGV[1] units to KEYS[1] unless that would take the
// count above ARGV[2]; a refused reservation adds nothing. ARGV[3] is the
// key's lifetime in seconds, set when the key is created. It returns
// {reserved (0/1), count after the call}. One script, so the check and the
// increment are atomic across every instance of every service.
var reserveScript = redis.NewScript(`
local n = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if count + n > limit then
  return {0, count}
end
count = redis.call('INCRBY', KEYS[1], n)
if redis.call('TTL', KEYS[1]) < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
return {1, count}
`)

// releaseScript gives ARGV[1] units back to KEYS[1], never below zero, and
// never recreates a key that expired meanwhile. It returns the new count.
var releaseScript = redis.NewScript(`
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if count <= 0 then
  return 0
end
local n = math.min(tonumber(ARGV[1]), count)
return redis.call('DECRBY', KEYS[1], n)
`)

// Counter is one named daily counter (PrivateReply, ...).
type Counter struct {
	rdb  redis.Cmdable
	keys redisx.Keys
	name string
	loc  *time.Location
	now  func() time.Time
}

// Option adjusts a Counter.
type Option func(*Counter)

// WithClock makes the counter read the time from now (tests move it across
// midnight).
func WithClock(now func() time.Time) Option {
	return func(c *Counter) { c.now = now }
}

// New returns the counter name, whose days are calendar days in loc
// (DAILY_RESET_TZ) and whose keys live under keys' prefix.
func New(rdb redis.Cmdable, keys redisx.Keys, name string, loc *time.Location, opts ...Option) *Counter {
	c := &Counter{rdb: rdb, keys: keys, name: name, loc: loc, now: time.Now}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Reservation is units reserved on one subject's day. Release it when what
// it paid for did not happen.
type Reservation struct {
	// Key is the Redis key of the day the units were taken from, so that a
	// release after midnight gives them back to that day, not the next.
	Key string
	// Day is that day, yyyy-mm-dd in the counter's zone.
	Day string
	// Units is how many units were reserved.
	Units int
	// Count is the day's count after the reservation (or, when refused,
	// the count that refused it).
	Count int
}

// ErrInvalid is a reservation that cannot be made whatever the count is.
var ErrInvalid = errors.New("dailycap: units must be at least 1 and limit at least 0")

// Reserve takes one unit of subject's allowance of limit per day. ok is
// false when the day's count already reached limit; nothing is taken then.
func (c *Counter) Reserve(ctx context.Context, subject string, limit int) (Reservation, bool, error) {
	return c.ReserveN(ctx, subject, 1, limit)
}

// ReserveN takes n units at once, or none: ok is false when the day's
// count plus n would exceed limit (a bulk producer reserves its batch).
func (c *Counter) ReserveN(ctx context.Context, subject string, n, limit int) (Reservation, bool, error) {
	if n < 1 || limit < 0 {
		return Reservation{}, false, ErrInvalid
	}
	day := c.Day(c.now())
	key := c.Key(subject, day)
	vals, err := reserveScript.Run(ctx, c.rdb, []string{key}, n, limit, int64(keyTTL/time.Second)).Int64Slice()
	if err != nil {
		return Reservation{}, false, fmt.Errorf("reserve %s for %s: %w", c.name, subject, err)
	}
	if len(vals) != 2 {
		return Reservation{}, false, fmt.Errorf("reserve %s for %s: unexpected reply %v", c.name, subject, vals)
	}
	r := Reservation{Key: key, Day: day, Units: n, Count: int(vals[1])}
	if vals[0] != 1 {
		r.Units = 0
		return r, false, nil
	}
	return r, true, nil
}

// Release gives r's units back to the day they were taken from.
func (c *Counter) Release(ctx context.Context, r Reservation) error {
	if r.Units < 1 || r.Key == "" {
		return nil
	}
	if err := releaseScript.Run(ctx, c.rdb, []string{r.Key}, r.Units).Err(); err != nil {
		return fmt.Errorf("release %s on %s: %w", c.name, r.Key, err)
	}
	return nil
}

// Used returns how many units subject has used today.
func (c *Counter) Used(ctx context.Context, subject string) (int, error) {
	n, err := c.rdb.Get(ctx, c.Key(subject, c.Day(c.now()))).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s for %s: %w", c.name, subject, err)
	}
	return n, nil
}

// Day names the calendar day of t in the counter's zone (yyyy-mm-dd).
func (c *Counter) Day(t time.Time) string {
	return t.In(c.loc).Format(dayLayout)
}

// Key is the Redis key of subject's count on day.
func (c *Counter) Key(subject, day string) string {
	return c.keys.Key(c.name, subject, day)
}

// ResetsAt is the next midnight in the counter's zone after t: when a cap
// reached at t is lifted.
func (c *Counter) ResetsAt(t time.Time) time.Time {
	l := t.In(c.loc)
	return time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, c.loc)
}
