package main

import (
	"context"
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/rpc"
)

// TestUnreadableChangeTokenIs503: a request whose key was cached a moment
// ago is refused 503 service_unavailable with Retry-After, not let through
// on what was cached, when the accounts change token cannot be read; it is
// served again once the token can be. The token's key is made a Redis hash,
// so GET fails (WRONGTYPE) while the rate limiter's scripts still work:
// this test alone reaches the gateway's own refusal, not the limiter's.
func TestUnreadableChangeTokenIs503(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, key := h.workspace(t, map[string]any{"name": "Acme"})
	h.fakeService(t, rpc.ServiceMessaging, func(c echo.Context) error {
		return c.JSONBlob(http.StatusOK, []byte(`{"channels":[]}`))
	})
	if r := h.call(t, http.MethodGet, "/v1/channels", key, nil, nil); r.status != http.StatusOK {
		t.Fatalf("before: GET /v1/channels = %d %s", r.status, r.body)
	}

	ctx := context.Background()
	rdb := h.env.Redis(t)
	token := redisx.Keys{Prefix: h.env.RedisPrefix}.Key("accounts", "token")
	if err := rdb.Del(ctx, token).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, token, "not", "a string").Err(); err != nil {
		t.Fatal(err)
	}
	r := h.call(t, http.MethodGet, "/v1/channels", key, nil, nil)
	r.expectError(t, http.StatusServiceUnavailable, "service_unavailable")
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}

	if err := rdb.Del(ctx, token).Err(); err != nil {
		t.Fatal(err)
	}
	if r := h.call(t, http.MethodGet, "/v1/channels", key, nil, nil); r.status != http.StatusOK {
		t.Fatalf("after: GET /v1/channels = %d %s", r.status, r.body)
	}
}
