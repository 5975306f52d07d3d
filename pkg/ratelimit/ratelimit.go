// Package ratelimit counts requests per key in Redis over a fixed window, so
// that every instance of a service shares one count (the gateway's
// per-minute limit per workspace, ARCHITECTURE.md §4).
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
//     again. The specification publishes a plain "per minute" number
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
// the split-header form ARCHITECTURE.md §4 names).
const (
	HeaderLimit      = "RateLimit-Limit"
	HeaderRemaining  = "RateLimit-Remaining"
	HeaderReset      = "RateLimit-Reset"
	HeaderRetryAfter = "Retry-After"
)

// allowScript counts one request in KEYS[1] unless the count already reached
// ARGV[1] (refused requests are not counted, so the count stays the number
// of requests served). ARGV[2] is the window in milliseconds. It returns
// {allowed (0/1), count, milliseconds left in the window}. One script, so the
// check and the increment are atomic across instances.
var allowScript = redis.NewScript(`
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
local allowed = 0
if count < limit then
  count = redis.call('INCR', KEYS[1])
  allowed = 1
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  -- first request of a window (or a key that somehow lost its expiry)
  redis.call('PEXPIRE', KEYS[1], window)
  ttl = window
end
return {allowed, count, ttl}
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
	if limit < 1 {
		return Result{}, fmt.Errorf("rate limit for %s: limit %d is below 1", bucket, limit)
	}
	vals, err := allowScript.Run(ctx, l.rdb, []string{l.Key(bucket)}, limit, l.window.Milliseconds()).Int64Slice()
	if err != nil {
		return Result{}, fmt.Errorf("rate limit for %s: %w", bucket, err)
	}
	if len(vals) != 3 {
		return Result{}, fmt.Errorf("rate limit for %s: unexpected reply %v", bucket, vals)
	}
	return Result{
		Allowed:   vals[0] == 1,
		Limit:     limit,
		Remaining: max(limit-int(vals[1]), 0),
		Reset:     time.Duration(vals[2]) * time.Millisecond,
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
