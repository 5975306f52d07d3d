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

// allowScript counts one request in every key of KEYS, whose limits are
// ARGV[2..], unless one of them already reached its limit (then nothing is
// counted anywhere, so counts stay the number of requests served). ARGV[1]
// is the window in milliseconds. It returns {allowed (0/1), index of the
// key reported, its count, milliseconds left in its window}: the key that
// refused, or the one with the least left. One script, so the checks and
// the increments are atomic across instances.
var allowScript = redis.NewScript(`
local window = tonumber(ARGV[1])
local function ttlOf(key)
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then
    -- first request of a window (or a key that somehow lost its expiry)
    redis.call('PEXPIRE', key, window)
    ttl = window
  end
  return ttl
end
for i = 1, #KEYS do
  local count = tonumber(redis.call('GET', KEYS[i]) or '0')
  if count >= tonumber(ARGV[i + 1]) then
    return {0, i, count, ttlOf(KEYS[i])}
  end
end
local best, bestLeft, bestCount, bestTTL = 1, nil, 0, 0
for i = 1, #KEYS do
  local count = redis.call('INCR', KEYS[i])
  local ttl = ttlOf(KEYS[i])
  local left = tonumber(ARGV[i + 1]) - count
  if bestLeft == nil or left < bestLeft then
    best, bestLeft, bestCount, bestTTL = i, left, count, ttl
  end
end
return {1, best, bestCount, bestTTL}
`)

// peekScript reads KEYS[1]'s count and the milliseconds left in its
// window, without counting: {count, ttl} (ttl -2 when there is no window).
var peekScript = redis.NewScript(`
return {tonumber(redis.call('GET', KEYS[1]) or '0'), redis.call('PTTL', KEYS[1])}
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
	reset := l.window
	if vals[1] >= 0 {
		reset = time.Duration(vals[1]) * time.Millisecond
	}
	return Result{
		Allowed:   vals[0] < int64(limit),
		Bucket:    bucket,
		Limit:     limit,
		Remaining: max(limit-int(vals[0]), 0),
		Reset:     reset,
	}, nil
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
