// Package ratelimit counts requests per key in Redis over a fixed window, so
// that every instance of a service shares one count (the gateway's
// per-minute limit per workspace, docs/limits-and-errors.md "Rate limits
// and their headers").
//
// Why a fixed window of our own rather than github.com/go-redis/redis_rate:
//
//   - redis_rate v10 (v10.0.1, its latest release) puts a hard-coded "rate:"
//     in front of every key. Our rule is that every Redis key starts with
//     REDIS_PREFIX, which is what keeps checkouts and parallel test runs
//     (pkg/testenv) apart and lets them clean up after themselves; a library
//     that writes "rate:parley:..." breaks both.
//   - Its GCRA reports Remaining as instantaneous burst capacity that refills
//     continuously, and ResetAfter as the time until the bucket is full
//     again. The API publishes a plain "per minute" number
//     (rate_limit.per_minute), and a fixed window maps onto the headers one
//     to one: RateLimit-Limit is that number, RateLimit-Remaining is what is
//     left in this window, RateLimit-Reset and Retry-After are the seconds
//     until the window ends, when the full limit is back.
//
// The cost of a fixed window is that a client may fit up to twice the limit
// around a window boundary, which is acceptable for an API quota. The window
// starts at a key's first request rather than on the wall-clock minute, so
// workspaces do not all reset at the same instant, and Redis alone keeps the
// time (PEXPIRE/PTTL): the clocks of the gateway instances play no part.
package ratelimit

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/redisx"
)

// Header names of the limit (IETF draft "RateLimit header fields for HTTP",
// the split-header form docs/limits-and-errors.md "Rate limits and their
// headers" documents).
const (
	HeaderLimit      = "RateLimit-Limit"
	HeaderRemaining  = "RateLimit-Remaining"
	HeaderReset      = "RateLimit-Reset"
	HeaderRetryAfter = "Retry-After"
)

// luaWindow is the fixed window in Lua, shared by the limiter's scripts so
// that each of them keeps the same rules:
//
//   - peek(key) reads key's count and the milliseconds left in its window,
//     without counting: {count, ttl} (ttl -2 when there is no window);
//   - allowAll(keys, limits, window) counts one request in every key of
//     keys, whose limits are limits, unless one of them already reached its
//     limit (then nothing is counted anywhere, so counts stay the number of
//     requests served). window is in milliseconds. It returns {allowed
//     (0/1), index of the key reported, its count, milliseconds left in its
//     window}: the key that refused, or the one with the least left.
//
// Each script is one call, so its checks and increments are atomic across
// instances.
const luaWindow = `
local function ttlOf(key, window)
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then
    -- first request of a window (or a key that somehow lost its expiry)
    redis.call('PEXPIRE', key, window)
    ttl = window
  end
  return ttl
end
local function peek(key)
  return {tonumber(redis.call('GET', key) or '0'), redis.call('PTTL', key)}
end
local function allowAll(keys, limits, window)
  for i = 1, #keys do
    local count = tonumber(redis.call('GET', keys[i]) or '0')
    if count >= limits[i] then
      return {0, i, count, ttlOf(keys[i], window)}
    end
  end
  local best, bestLeft, bestCount, bestTTL = 1, nil, 0, 0
  for i = 1, #keys do
    local count = redis.call('INCR', keys[i])
    local ttl = ttlOf(keys[i], window)
    local left = limits[i] - count
    if bestLeft == nil or left < bestLeft then
      best, bestLeft, bestCount, bestTTL = i, left, count, ttl
    end
  end
  return {1, best, bestCount, bestTTL}
end
`

// allowScript is allowAll over KEYS: ARGV[1] is the window in
// milliseconds, ARGV[2..] the keys' limits.
var allowScript = redis.NewScript(luaWindow + `
local limits = {}
for i = 1, #KEYS do
  limits[i] = tonumber(ARGV[i + 1])
end
return allowAll(KEYS, limits, tonumber(ARGV[1]))
`)

// peekScript is peek of KEYS[1].
var peekScript = redis.NewScript(luaWindow + `
return peek(KEYS[1])
`)

// allowIfScript peeks the guard KEYS[1] (limit ARGV[2]); only when it has
// room and the string key KEYS[2] holds ARGV[3] does it count one request in
// KEYS[3] (limit ARGV[4], window ARGV[1] ms). It returns {the guard's count,
// its ttl, held (0/1)} and, when held, allowAll's four values after them.
var allowIfScript = redis.NewScript(luaWindow + `
local guard = peek(KEYS[1])
if guard[1] >= tonumber(ARGV[2]) or redis.call('GET', KEYS[2]) ~= ARGV[3] then
  return {guard[1], guard[2], 0}
end
local r = allowAll({KEYS[3]}, {tonumber(ARGV[4])}, tonumber(ARGV[1]))
return {guard[1], guard[2], 1, r[1], r[2], r[3], r[4]}
`)

// Limiter limits requests per bucket within a fixed window.
type Limiter struct {
	rdb    redis.Scripter
	keys   redisx.Keys
	window time.Duration
}

// New returns a limiter whose keys are keys.Key("ratelimit", bucket) and whose
// windows last window (time.Minute for a per-minute limit).
func New(rdb redis.Scripter, keys redisx.Keys, window time.Duration) *Limiter {
	return &Limiter{rdb: rdb, keys: keys, window: window}
}

// Result is the outcome of one Allow.
type Result struct {
	// Allowed reports whether the request may proceed.
	Allowed bool
	// Bucket is the bucket the other fields describe: for AllowAll, the one
	// that refused, or the one with the least left.
	Bucket string
	// Limit is the number of requests a window allows.
	Limit int
	// Remaining is how many more requests this window allows.
	Remaining int
	// Reset is the time until the window ends and the full limit is back.
	Reset time.Duration
}

// Allow counts one request against bucket, whose window allows limit
// requests (limit must be at least 1). The limit is read on every call, so a
// changed limit applies at once to the current window.
func (l *Limiter) Allow(ctx context.Context, bucket string, limit int) (Result, error) {
	return l.AllowAll(ctx, Bucket{Name: bucket, Limit: limit})
}

// Bucket is one count a request is held to.
type Bucket struct {
	Name  string
	Limit int
}

// AllowAll counts one request against every bucket, or against none when
// one of them is at its limit: a request that must stay within several
// limits (per visitor and per client address) is refused without using up
// the others.
func (l *Limiter) AllowAll(ctx context.Context, buckets ...Bucket) (Result, error) {
	if len(buckets) == 0 {
		return Result{}, fmt.Errorf("rate limit: no bucket")
	}
	keys := make([]string, len(buckets))
	args := make([]any, 0, len(buckets)+1)
	args = append(args, l.window.Milliseconds())
	for i, b := range buckets {
		if b.Limit < 1 {
			return Result{}, fmt.Errorf("rate limit for %s: limit %d is below 1", b.Name, b.Limit)
		}
		keys[i] = l.Key(b.Name)
		args = append(args, b.Limit)
	}
	vals, err := allowScript.Run(ctx, l.rdb, keys, args...).Int64Slice()
	if err != nil {
		return Result{}, fmt.Errorf("rate limit for %s: %w", buckets[0].Name, err)
	}
	return allowResult(buckets, vals)
}

// allowResult reads allowAll's reply {allowed, index, count, ttl} for
// buckets.
func allowResult(buckets []Bucket, vals []int64) (Result, error) {
	if len(vals) != 4 || vals[1] < 1 || int(vals[1]) > len(buckets) {
		return Result{}, fmt.Errorf("rate limit for %s: unexpected reply %v", buckets[0].Name, vals)
	}
	b := buckets[vals[1]-1]
	return Result{
		Allowed:   vals[0] == 1,
		Bucket:    b.Name,
		Limit:     b.Limit,
		Remaining: max(b.Limit-int(vals[2]), 0),
		Reset:     time.Duration(vals[3]) * time.Millisecond,
	}, nil
}

// Peek reports whether bucket has room for another request, without
// counting one. With Allow after the fact it limits events known only once
// they happened (failed authentications): Peek before the work, Allow when
// it failed.
func (l *Limiter) Peek(ctx context.Context, bucket string, limit int) (Result, error) {
	if limit < 1 {
		return Result{}, fmt.Errorf("rate limit for %s: limit %d is below 1", bucket, limit)
	}
	vals, err := peekScript.Run(ctx, l.rdb, []string{l.Key(bucket)}).Int64Slice()
	if err != nil {
		return Result{}, fmt.Errorf("rate limit for %s: %w", bucket, err)
	}
	if len(vals) != 2 {
		return Result{}, fmt.Errorf("rate limit for %s: unexpected reply %v", bucket, vals)
	}
	return l.peekResult(Bucket{Name: bucket, Limit: limit}, vals[0], vals[1]), nil
}

// peekResult is what peek's reply, count and ttl, says of b.
func (l *Limiter) peekResult(b Bucket, count, ttl int64) Result {
	reset := l.window
	if ttl >= 0 {
		reset = time.Duration(ttl) * time.Millisecond
	}
	return Result{
		Allowed:   count < int64(b.Limit),
		Bucket:    b.Name,
		Limit:     b.Limit,
		Remaining: max(b.Limit-int(count), 0),
		Reset:     reset,
	}
}

// Condition is a Redis string key, outside the limiter's own keys, and the
// value it must hold.
type Condition struct {
	Key   string
	Value string
}

// Conditional is the outcome of one AllowIf.
type Conditional struct {
	// Guard is the guard bucket, peeked. When it has no room, nothing
	// else was looked at.
	Guard Result
	// Held reports whether the guard had room and the condition's key
	// held its value (a missing key holds nothing): then, and only then,
	// the request was counted in Result.
	Held bool
	// Result is Allow's result for the bucket, when Held.
	Result Result
}

// AllowIf is Peek of guard, a read of cond and Allow of bucket in one round
// trip: bucket is counted only when guard has room and cond.Key holds
// cond.Value, atomically. A caller whose request must pass a Peek'd bound
// and a check of shared state before it is counted pays one round trip
// instead of three; when the condition does not hold it does the work its
// own way. cond.Key holding something other than a string is an error,
// and then nothing is counted.
func (l *Limiter) AllowIf(ctx context.Context, guard Bucket, cond Condition, bucket Bucket) (Conditional, error) {
	for _, b := range []Bucket{guard, bucket} {
		if b.Limit < 1 {
			return Conditional{}, fmt.Errorf("rate limit for %s: limit %d is below 1", b.Name, b.Limit)
		}
	}
	vals, err := allowIfScript.Run(ctx, l.rdb, []string{l.Key(guard.Name), cond.Key, l.Key(bucket.Name)},
		l.window.Milliseconds(), guard.Limit, cond.Value, bucket.Limit).Int64Slice()
	if err != nil {
		return Conditional{}, fmt.Errorf("rate limit for %s if %s: %w", bucket.Name, cond.Key, err)
	}
	held := len(vals) == 7 && vals[2] == 1
	if !held && (len(vals) != 3 || vals[2] != 0) {
		return Conditional{}, fmt.Errorf("rate limit for %s if %s: unexpected reply %v", bucket.Name, cond.Key, vals)
	}
	out := Conditional{Guard: l.peekResult(guard, vals[0], vals[1]), Held: held}
	if held {
		if out.Result, err = allowResult([]Bucket{bucket}, vals[3:]); err != nil {
			return Conditional{}, err
		}
	}
	return out, nil
}

// Key is the Redis key of bucket.
func (l *Limiter) Key(bucket string) string {
	return l.keys.Key("ratelimit", bucket)
}

// RetryAfter is how long a refused caller should wait: until the window
// ends. It is zero for an allowed request.
func (r Result) RetryAfter() time.Duration {
	if r.Allowed {
		return 0
	}
	return r.Reset
}

// SetHeaders writes RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset
// (whole seconds), and Retry-After (whole seconds, at least 1) when the
// request was refused.
func (r Result) SetHeaders(h http.Header) {
	h.Set(HeaderLimit, strconv.Itoa(r.Limit))
	h.Set(HeaderRemaining, strconv.Itoa(r.Remaining))
	h.Set(HeaderReset, strconv.Itoa(Seconds(r.Reset)))
	if !r.Allowed {
		h.Set(HeaderRetryAfter, strconv.Itoa(Seconds(r.RetryAfter())))
	}
}

// Seconds rounds d up to whole seconds, and to at least 1: a caller told to
// wait 0 seconds would retry at once and be refused again.
func Seconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}
