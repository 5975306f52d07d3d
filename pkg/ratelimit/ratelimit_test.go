package ratelimit_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/testenv"
)

func TestAllowCountsDownThenRefuses(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	rdb := env.Redis(t)
	l := ratelimit.New(rdb, redisx.Keys{Prefix: env.RedisPrefix}, time.Minute)
	ctx := context.Background()

	for i, wantRemaining := range []int{2, 1, 0} {
		r, err := l.Allow(ctx, "ws-a", 3)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Allowed || r.Limit != 3 || r.Remaining != wantRemaining {
			t.Fatalf("request %d: got %+v, want allowed with %d remaining", i+1, r, wantRemaining)
		}
		if r.Reset <= 0 || r.Reset > time.Minute {
			t.Fatalf("request %d: reset %v out of (0, 1m]", i+1, r.Reset)
		}
	}
	r, err := l.Allow(ctx, "ws-a", 3)
	if err != nil {
		t.Fatal(err)
	}
	if r.Allowed || r.Remaining != 0 || r.RetryAfter() <= 0 || r.RetryAfter() > time.Minute {
		t.Fatalf("fourth request: got %+v (retry after %v), want refused", r, r.RetryAfter())
	}

	// Refused requests are not counted: the counter still says 3.
	if n, err := rdb.Get(ctx, l.Key("ws-a")).Int(); err != nil || n != 3 {
		t.Fatalf("counter = %d, %v; want 3", n, err)
	}
	// Another bucket has its own window.
	if r, err := l.Allow(ctx, "ws-b", 3); err != nil || !r.Allowed || r.Remaining != 2 {
		t.Fatalf("other bucket: %+v, %v", r, err)
	}
	// A raised limit applies to the current window at once.
	if r, err := l.Allow(ctx, "ws-a", 4); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("raised limit: %+v, %v", r, err)
	}
}

func TestKeysLiveUnderThePrefixAndExpire(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	rdb := env.Redis(t)
	window := 300 * time.Millisecond
	l := ratelimit.New(rdb, redisx.Keys{Prefix: env.RedisPrefix}, window)
	ctx := context.Background()

	if !strings.HasPrefix(l.Key("ws"), env.RedisPrefix) {
		t.Fatalf("key %q does not start with %q", l.Key("ws"), env.RedisPrefix)
	}
	if _, err := l.Allow(ctx, "ws", 1); err != nil {
		t.Fatal(err)
	}
	keys, err := rdb.Keys(ctx, env.RedisPrefix+"*").Result()
	if err != nil || len(keys) != 1 || keys[0] != l.Key("ws") {
		t.Fatalf("keys under prefix = %v, %v", keys, err)
	}
	if ttl := rdb.PTTL(ctx, l.Key("ws")).Val(); ttl <= 0 || ttl > window {
		t.Fatalf("ttl = %v, want in (0, %v]", ttl, window)
	}
	if r, _ := l.Allow(ctx, "ws", 1); r.Allowed {
		t.Fatal("second request in the window allowed")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := l.Allow(ctx, "ws", 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("window never ended")
		}
		time.Sleep(r.RetryAfter())
	}
}

func TestRejectsLimitBelowOne(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	l := ratelimit.New(env.Redis(t), redisx.Keys{Prefix: env.RedisPrefix}, time.Minute)
	if _, err := l.Allow(context.Background(), "ws", 0); err == nil {
		t.Fatal("limit 0 accepted")
	}
}

func TestSetHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give ratelimit.Result
		want map[string]string
	}{
		{
			name: "allowed",
			give: ratelimit.Result{Allowed: true, Limit: 120, Remaining: 7, Reset: 41200 * time.Millisecond},
			want: map[string]string{"RateLimit-Limit": "120", "RateLimit-Remaining": "7", "RateLimit-Reset": "42", "Retry-After": ""},
		},
		{
			name: "refused rounds up",
			give: ratelimit.Result{Allowed: false, Limit: 3, Remaining: 0, Reset: 1500 * time.Millisecond},
			want: map[string]string{"RateLimit-Limit": "3", "RateLimit-Remaining": "0", "RateLimit-Reset": "2", "Retry-After": "2"},
		},
		{
			name: "refused at the very end of the window waits at least a second",
			give: ratelimit.Result{Allowed: false, Limit: 3, Remaining: 0, Reset: 0},
			want: map[string]string{"RateLimit-Reset": "1", "Retry-After": "1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			tt.give.SetHeaders(h)
			for k, v := range tt.want {
				if got := h.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestAllowAllCountsInEveryBucketOrInNone(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	rdb := env.Redis(t)
	l := ratelimit.New(rdb, redisx.Keys{Prefix: env.RedisPrefix}, time.Minute)
	ctx := context.Background()
	visitor := func(v string) ratelimit.Bucket { return ratelimit.Bucket{Name: "visitor:" + v, Limit: 2} }
	addr := ratelimit.Bucket{Name: "addr:192.0.2.1", Limit: 3}

	// The tighter bucket is the one reported.
	r, err := l.AllowAll(ctx, visitor("a"), addr)
	if err != nil || !r.Allowed || r.Bucket != "visitor:a" || r.Remaining != 1 || r.Limit != 2 {
		t.Fatalf("first = %+v, %v", r, err)
	}
	if r, _ := l.AllowAll(ctx, visitor("a"), addr); !r.Allowed || r.Bucket != "visitor:a" || r.Remaining != 0 {
		t.Fatalf("second = %+v", r)
	}
	// The visitor is spent: refused, and the address is not charged.
	r, err = l.AllowAll(ctx, visitor("a"), addr)
	if err != nil || r.Allowed || r.Bucket != "visitor:a" || r.RetryAfter() <= 0 {
		t.Fatalf("third = %+v, %v", r, err)
	}
	if n, _ := rdb.Get(ctx, l.Key(addr.Name)).Int(); n != 2 {
		t.Fatalf("address count = %d, want 2", n)
	}
	// A fresh visitor from the same address gets the address's last one,
	// then the address refuses whoever comes.
	if r, _ := l.AllowAll(ctx, visitor("b"), addr); !r.Allowed || r.Bucket != "addr:192.0.2.1" || r.Remaining != 0 {
		t.Fatalf("fresh visitor = %+v", r)
	}
	r, _ = l.AllowAll(ctx, visitor("c"), addr)
	if r.Allowed || r.Bucket != "addr:192.0.2.1" || r.Limit != 3 {
		t.Fatalf("over the address = %+v", r)
	}
	if n, _ := rdb.Get(ctx, l.Key("visitor:c")).Int(); n != 0 {
		t.Fatalf("refused visitor charged: %d", n)
	}
	if _, err := l.AllowAll(ctx, visitor("d"), ratelimit.Bucket{Name: "x", Limit: 0}); err == nil {
		t.Fatal("limit 0 accepted")
	}
}

func TestPeekDoesNotCount(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	l := ratelimit.New(env.Redis(t), redisx.Keys{Prefix: env.RedisPrefix}, time.Minute)
	ctx := context.Background()

	r, err := l.Peek(ctx, "fail", 2)
	if err != nil || !r.Allowed || r.Remaining != 2 || r.Reset != time.Minute {
		t.Fatalf("peek of an empty bucket = %+v, %v", r, err)
	}
	for i := 0; i < 2; i++ {
		if r, _ := l.Peek(ctx, "fail", 2); !r.Allowed {
			t.Fatalf("peek %d refused", i)
		}
		if _, err := l.Allow(ctx, "fail", 2); err != nil {
			t.Fatal(err)
		}
	}
	r, err = l.Peek(ctx, "fail", 2)
	if err != nil || r.Allowed || r.Remaining != 0 || r.RetryAfter() <= 0 || r.RetryAfter() > time.Minute {
		t.Fatalf("peek of a full bucket = %+v, %v", r, err)
	}
	if _, err := l.Peek(ctx, "fail", 0); err == nil {
		t.Fatal("limit 0 accepted")
	}
}

// AllowIf counts the bucket only when the guard has room and the condition
// holds; otherwise it counts nothing, and a refusal of the bucket itself is
// Allow's.
func TestAllowIfCountsOnlyPastGuardAndCondition(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	rdb := env.Redis(t)
	keys := redisx.Keys{Prefix: env.RedisPrefix}
	l := ratelimit.New(rdb, keys, time.Minute)
	ctx := context.Background()
	guard := ratelimit.Bucket{Name: "guard", Limit: 1}
	bucket := ratelimit.Bucket{Name: "bucket", Limit: 2}
	cond := ratelimit.Condition{Key: keys.Key("cond"), Value: "v1"}
	counted := func(want int) {
		t.Helper()
		n, err := rdb.Get(ctx, l.Key(bucket.Name)).Int()
		if err != nil && want != 0 || n != want {
			t.Fatalf("bucket counted %d (%v), want %d", n, err, want)
		}
	}

	// A missing key holds nothing, not even "".
	for _, v := range []string{"v1", ""} {
		c, err := l.AllowIf(ctx, guard, ratelimit.Condition{Key: cond.Key, Value: v}, bucket)
		if err != nil || !c.Guard.Allowed || c.Guard.Remaining != 1 || c.Held {
			t.Fatalf("missing key, value %q: %+v, %v", v, c, err)
		}
	}
	counted(0)

	if err := rdb.Set(ctx, cond.Key, "v0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if c, err := l.AllowIf(ctx, guard, cond, bucket); err != nil || c.Held {
		t.Fatalf("other value: %+v, %v", c, err)
	}
	counted(0)

	if err := rdb.Set(ctx, cond.Key, "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for i, wantRemaining := range []int{1, 0} {
		c, err := l.AllowIf(ctx, guard, cond, bucket)
		if err != nil || !c.Held || !c.Result.Allowed || c.Result.Bucket != "bucket" || c.Result.Limit != 2 ||
			c.Result.Remaining != wantRemaining || c.Result.Reset <= 0 || c.Result.Reset > time.Minute {
			t.Fatalf("request %d: %+v, %v", i+1, c, err)
		}
	}
	c, err := l.AllowIf(ctx, guard, cond, bucket)
	if err != nil || !c.Held || c.Result.Allowed || c.Result.Remaining != 0 || c.Result.RetryAfter() <= 0 {
		t.Fatalf("past the limit: %+v, %v", c, err)
	}
	counted(2)

	// A full guard counts nothing, whatever the condition.
	if _, err := l.Allow(ctx, guard.Name, guard.Limit); err != nil {
		t.Fatal(err)
	}
	bucket.Limit = 10
	c, err = l.AllowIf(ctx, guard, cond, bucket)
	if err != nil || c.Guard.Allowed || c.Guard.RetryAfter() <= 0 || c.Guard.RetryAfter() > time.Minute || c.Held {
		t.Fatalf("full guard: %+v, %v", c, err)
	}
	counted(2)

	// A key that is not a string is an error, not a mismatch.
	if err := rdb.Del(ctx, l.Key(guard.Name)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, cond.Key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, cond.Key, "not", "a string").Err(); err != nil {
		t.Fatal(err)
	}
	if c, err := l.AllowIf(ctx, guard, cond, bucket); err == nil {
		t.Fatalf("hash as condition: %+v, no error", c)
	}
	counted(2)

	if _, err := l.AllowIf(ctx, ratelimit.Bucket{Name: "g", Limit: 0}, cond, bucket); err == nil {
		t.Fatal("guard limit 0 accepted")
	}
	if _, err := l.AllowIf(ctx, guard, cond, ratelimit.Bucket{Name: "b", Limit: 0}); err == nil {
		t.Fatal("bucket limit 0 accepted")
	}
}
