package main

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/rpc"
	gwconfig "github.com/parleyhq/parley/services/gateway/internal/config"
)

// redisCalls records the commands a gateway's Redis client sends, one
// entry a round trip (a pipeline is one).
type redisCalls struct {
	mu    sync.Mutex
	calls []string
}

func (r *redisCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *redisCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.record(cmd.Name())
		return next(ctx, cmd)
	}
}

func (r *redisCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		names := make([]string, len(cmds))
		for i, c := range cmds {
			names[i] = c.Name()
		}
		r.record("pipeline(" + strings.Join(names, " ") + ")")
		return next(ctx, cmds)
	}
}

func (r *redisCalls) record(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, name)
}

// during is the calls made while f ran.
func (r *redisCalls) during(f func()) []string {
	r.mu.Lock()
	before := len(r.calls)
	r.mu.Unlock()
	f()
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls[before:])
}

// admitting is a gateway pair on one environment: h, and counted, another
// instance whose Redis calls are recorded; messaging answers every
// request 200.
type admitting struct {
	h, counted *harness
	calls      *redisCalls
	limiter    *ratelimit.Limiter
}

func newAdmitting(t *testing.T, mutate ...func(*gwconfig.Config)) *admitting {
	t.Helper()
	h := newHarness(t, mutate...)
	a := &admitting{h: h, calls: &redisCalls{}, limiter: ratelimit.New(h.env.Redis(t), redisx.Keys{Prefix: h.env.RedisPrefix}, time.Minute)}
	a.counted = h.anotherWith(t, seams{redisHook: a.calls})
	h.fakeService(t, rpc.ServiceMessaging, echoBack)
	return a
}

// get sends GET /v1/channels with key to the counted instance and says
// which Redis calls it made.
func (a *admitting) get(t *testing.T, key string) (response, []string) {
	t.Helper()
	var r response
	calls := a.calls.during(func() { r = a.counted.call(t, http.MethodGet, "/v1/channels", key, nil, nil) })
	return r, calls
}

// wantUsed fails unless workspace id's per-minute window counted want
// requests.
func (a *admitting) wantUsed(t *testing.T, id string, want int) {
	t.Helper()
	n, err := a.h.env.Redis(t).Get(t.Context(), a.limiter.Key("api:"+id)).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	if n != want {
		t.Fatalf("workspace counted %d requests, want %d", n, want)
	}
}

// inOneCall is get that fails unless the request took the one Redis call
// of a cached credential.
func (a *admitting) inOneCall(t *testing.T, key string) response {
	t.Helper()
	r, calls := a.get(t, key)
	if len(calls) != 1 || calls[0] != "evalsha" {
		t.Fatalf("Redis calls %v, want one evalsha", calls)
	}
	return r
}

// wantOneCall fails unless a request with key is served in one Redis call.
func (a *admitting) wantOneCall(t *testing.T, key string) {
	t.Helper()
	if r := a.inOneCall(t, key); r.status != http.StatusOK {
		t.Fatalf("GET /v1/channels = %d %s", r.status, r.body)
	}
}

// cache makes the counted instance hold key's credential and run the
// one-call script once (Redis may not have loaded it yet).
func (a *admitting) cache(t *testing.T, key string) {
	t.Helper()
	for range 2 {
		if r, _ := a.get(t, key); r.status != http.StatusOK {
			t.Fatalf("GET /v1/channels = %d %s", r.status, r.body)
		}
	}
}

// A request whose credential the instance holds costs one Redis call: the
// failed authentications, the change token and the workspace's limit,
// counted as before.
func TestCachedCredentialCostsOneRedisCall(t *testing.T) {
	t.Parallel()
	a := newAdmitting(t)
	id, key := a.h.workspace(t, map[string]any{"name": "Acme"})

	r, calls := a.get(t, key)
	if r.status != http.StatusOK || len(calls) < 3 {
		t.Fatalf("first request: %d, Redis calls %v; want 200 after the full path's three or more", r.status, calls)
	}
	a.cache(t, key)
	for i := range 3 {
		r := a.inOneCall(t, key)
		wantRemaining := strconv.Itoa(defaultRate - 4 - i)
		if r.status != http.StatusOK || r.header.Get("RateLimit-Limit") != strconv.Itoa(defaultRate) ||
			r.header.Get("RateLimit-Remaining") != wantRemaining || r.header.Get("RateLimit-Reset") == "" {
			t.Fatalf("request %d: %d, headers %v; want 200 with %s remaining", i+4, r.status, r.header, wantRemaining)
		}
	}
	a.wantUsed(t, id, 6)
}

// An address past its failed authentications is refused without the
// workspace's request being counted, in the same one call, with
// Retry-After and no RateLimit-* as before.
func TestThrottledAddressIsNotCountedAgainstTheWorkspace(t *testing.T) {
	t.Parallel()
	a := newAdmitting(t, authFailuresPerMinute(1))
	id, key := a.h.workspace(t, map[string]any{"name": "Acme"})
	a.cache(t, key)
	a.counted.call(t, http.MethodGet, "/v1/me", "pk_"+strings.Repeat("U", 43), nil, nil).expectError(t, http.StatusUnauthorized, "unauthorized")

	r := a.inOneCall(t, key)
	wantAuthThrottled(t, r)
	if r.header.Get("RateLimit-Limit") != "" {
		t.Fatalf("RateLimit-Limit on an address refused: %v", r.header)
	}
	a.wantUsed(t, id, 2)
}

// A key revoked through the admin endpoint (answered by either instance)
// is refused at the next request although its credential was cached, and
// that refusal is not counted against its workspace; another key of the
// workspace is read again once, then served in one call again.
func TestRevokedCachedKeyIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	a := newAdmitting(t)
	id, kept := a.h.workspace(t, map[string]any{"name": "Acme"})
	revokedID, revoked := a.h.newKey(t, id)
	a.cache(t, kept)
	a.cache(t, revoked)

	a.h.mustAdmin(t, http.StatusOK, http.MethodDelete, "/admin/api-keys/"+revokedID, nil)
	r, _ := a.get(t, revoked)
	r.expectError(t, http.StatusUnauthorized, "unauthorized")
	a.wantUsed(t, id, 4)

	if r, calls := a.get(t, kept); r.status != http.StatusOK || len(calls) < 3 {
		t.Fatalf("kept key after the change: %d, Redis calls %v; want 200 after the full path", r.status, calls)
	}
	a.wantOneCall(t, kept)
}

// A workspace past its limit is refused 429 with RateLimit-* and
// Retry-After by the one call, and the refusal is not counted.
func TestRateLimitedWorkspaceOnTheCachedPath(t *testing.T) {
	t.Parallel()
	a := newAdmitting(t)
	id, key := a.h.workspace(t, map[string]any{"name": "Small", "rate_per_minute": 2})
	a.cache(t, key)

	r := a.inOneCall(t, key)
	r.expectError(t, http.StatusTooManyRequests, "rate_limited")
	if retry, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || retry < 1 || retry > 60 {
		t.Fatalf("Retry-After %q, want whole seconds in 1..60", r.header.Get("Retry-After"))
	}
	if r.header.Get("RateLimit-Limit") != "2" || r.header.Get("RateLimit-Remaining") != "0" || r.header.Get("RateLimit-Reset") == "" {
		t.Fatalf("RateLimit headers %v", r.header)
	}
	a.wantUsed(t, id, 2)
}

// A change token lost from Redis (flushed) is started again by the full
// path, never matched by what was cached under the old one.
func TestLostChangeTokenTakesTheFullPath(t *testing.T) {
	t.Parallel()
	a := newAdmitting(t)
	_, key := a.h.workspace(t, map[string]any{"name": "Acme"})
	a.cache(t, key)

	rdb := a.h.env.Redis(t)
	token := redisx.Keys{Prefix: a.h.env.RedisPrefix}.Key("accounts", "token")
	if err := rdb.Del(t.Context(), token).Err(); err != nil {
		t.Fatal(err)
	}
	r, calls := a.get(t, key)
	// go-redis sends SetNX as SET … NX: the token's start.
	if r.status != http.StatusOK || !slices.Contains(calls, "set") {
		t.Fatalf("after the token was lost: %d, Redis calls %v; want 200 after the token's SET NX", r.status, calls)
	}
	if n, err := rdb.Exists(t.Context(), token).Result(); err != nil || n != 1 {
		t.Fatalf("token not started again: %d, %v", n, err)
	}
	a.wantOneCall(t, key)
}

// A cached request whose one Redis call fails (here the change token is
// no string) is refused 503 with Retry-After after that call alone: the
// full path would only ask the same Redis again. Nothing is counted.
func TestFailedOneCallIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	a := newAdmitting(t)
	id, key := a.h.workspace(t, map[string]any{"name": "Acme"})
	a.cache(t, key)

	rdb := a.h.env.Redis(t)
	token := redisx.Keys{Prefix: a.h.env.RedisPrefix}.Key("accounts", "token")
	if err := rdb.Del(t.Context(), token).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(t.Context(), token, "not", "a string").Err(); err != nil {
		t.Fatal(err)
	}
	r := a.inOneCall(t, key)
	r.expectError(t, http.StatusServiceUnavailable, "service_unavailable")
	if r.header.Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After: %v", r.header)
	}
	a.wantUsed(t, id, 2)
}
