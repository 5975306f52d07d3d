package parley

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"time"
)

// RetryPolicy bounds how a call is retried. A call is retried when:
//   - the answer is 429 with Retry-After (rate_limited,
//     concurrency_limited): after Retry-After, plus jitter. A 429 without
//     it (daily_invoke_cap, the private-reply caps) is final.
//   - the answer is 503 and the request is safe to repeat (as below): after
//     Retry-After, or a short exponential backoff when it has none, plus
//     jitter. A 503 may come after the call reached its service (one that
//     did not answer in time), so TestWebhook and SendTyping are not
//     repeated.
//   - the answer is 409 idempotency_in_progress (an earlier attempt of the
//     same call still runs): after a short backoff.
//   - no answer came (a refused or reset connection) and the request is
//     safe to repeat: a GET, PUT or DELETE, or a call carrying an
//     Idempotency-Key (every send, comment reply and invoke carries one),
//     which the server runs once whatever the repeats.
//
// Every attempt of a call sends the same Idempotency-Key and the same body
// bytes. A stream is retried only until its events start. The call's
// context cancels a wait at once.
type RetryPolicy struct {
	// MaxAttempts is the most attempts of one call, the first included:
	// 1 disables retries. 0 means 4.
	MaxAttempts int
	// MaxWait is the longest single wait between attempts; an answer whose
	// Retry-After is longer is returned at once. 0 means 30 seconds.
	MaxWait time.Duration
}

const (
	defaultMaxAttempts = 4
	defaultMaxWait     = 30 * time.Second
	// firstBackoff is the first wait where the answer names none; each
	// next one doubles.
	firstBackoff = 250 * time.Millisecond
)

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = defaultMaxAttempts
	}
	if p.MaxWait <= 0 {
		p.MaxWait = defaultMaxWait
	}
	return p
}

// backoff is the wait after the attempt-th attempt when no Retry-After
// says: 250 ms doubling, plus up to a quarter of jitter, at most MaxWait.
func (p RetryPolicy) backoff(attempt int) time.Duration {
	d := firstBackoff << min(attempt-1, 16)
	d += jitter(d / 4)
	return min(d, p.MaxWait)
}

// delay says whether the error answer e to the attempt-th attempt is to be
// retried, and after how long.
func (p RetryPolicy) delay(e *Error, attempt int) (time.Duration, bool) {
	switch {
	case e.Status == http.StatusTooManyRequests:
		if e.RetryAfter <= 0 || p.tooLong(e.RetryAfter) {
			return 0, false
		}
		return p.withJitter(e.RetryAfter), true
	case e.Status == http.StatusServiceUnavailable:
		if p.tooLong(e.RetryAfter) {
			return 0, false
		}
		if e.RetryAfter > 0 {
			return p.withJitter(e.RetryAfter), true
		}
		return p.backoff(attempt), true
	case e.Status == http.StatusConflict && e.Code == ErrIdempotencyInProgress.Code:
		return p.backoff(attempt), true
	}
	return 0, false
}

// tooLong reports whether a Retry-After of d is beyond MaxWait. One too
// large for a Duration (parseRetryAfter's longest) is beyond any MaxWait,
// that longest one included.
func (p RetryPolicy) tooLong(d time.Duration) bool {
	return d > p.MaxWait || d == math.MaxInt64
}

// withJitter adds up to a tenth of d (at most a second) to d, so that
// clients told the same Retry-After do not all come back at once. The sum
// stops at the longest Duration: wrapped around, it would be no wait.
func (p RetryPolicy) withJitter(d time.Duration) time.Duration {
	j := jitter(min(d/10, time.Second))
	if d > math.MaxInt64-j {
		return math.MaxInt64
	}
	return d + j
}

func jitter(upTo time.Duration) time.Duration {
	if upTo <= 0 {
		return 0
	}
	return rand.N(upTo)
}

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
