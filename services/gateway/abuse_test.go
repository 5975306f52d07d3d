package main

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv/dribble"
	gwconfig "github.com/parleyhq/parley/services/gateway/internal/config"
)

// wantAuthThrottled checks a 429 for too many failed authentications.
func wantAuthThrottled(t *testing.T, r response) {
	t.Helper()
	msg := r.expectError(t, http.StatusTooManyRequests, "rate_limited")
	if !strings.Contains(msg, "failed authentications") {
		t.Fatalf("message %q", msg)
	}
	if retry, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || retry < 1 || retry > 60 {
		t.Fatalf("Retry-After %q, want whole seconds in 1..60", r.header.Get("Retry-After"))
	}
}

// TestFailedAuthenticationsPerAddressAre429: past AUTH_FAILURES_PER_MINUTE
// failures, an address is refused before any key is looked up, valid keys
// included; successes never count; a forged X-Forwarded-For changes
// nothing.
func TestFailedAuthenticationsPerAddressAre429(t *testing.T) {
	t.Parallel()
	h := newHarness(t, authFailuresPerMinute(3))
	h.fakeService(t, rpc.ServiceMessaging, echoBack)
	_, key := h.workspace(t, map[string]any{"name": "Acme"})
	unknown := "pk_" + strings.Repeat("U", 43)

	// Successes are not failures.
	for i := 0; i < 5; i++ {
		if r := h.call(t, http.MethodGet, "/v1/channels", key, nil, nil); r.status != http.StatusOK {
			t.Fatalf("valid request %d = %d %s", i, r.status, r.body)
		}
	}
	// Three failures of any kind, each a plain 401.
	h.call(t, http.MethodGet, "/v1/me", unknown, nil, nil).expectError(t, http.StatusUnauthorized, "unauthorized")
	h.call(t, http.MethodGet, "/v1/me", "", nil, nil).expectError(t, http.StatusUnauthorized, "unauthorized")
	h.call(t, http.MethodGet, "/v1/me", "wrong", nil, nil).expectError(t, http.StatusUnauthorized, "unauthorized")

	// Then the address is refused, whatever the key and whatever it claims
	// to be.
	forged := http.Header{"X-Forwarded-For": {"198.51.100.77"}, "X-Real-Ip": {"198.51.100.78"}}
	wantAuthThrottled(t, h.call(t, http.MethodGet, "/v1/me", unknown, nil, nil))
	wantAuthThrottled(t, h.call(t, http.MethodGet, "/v1/me", unknown, nil, forged))
	wantAuthThrottled(t, h.call(t, http.MethodGet, "/v1/channels", key, nil, nil))
	wantAuthThrottled(t, h.call(t, http.MethodGet, "/api/v1/me", key, nil, forged))

	// The count lives under the test's REDIS_PREFIX and ends with the
	// minute.
	keys, err := h.env.Redis(t).Keys(t.Context(), h.env.RedisPrefix+"*authfail*").Result()
	if err != nil || len(keys) != 1 || !strings.HasSuffix(keys[0], "authfail:127.0.0.1") {
		t.Fatalf("failure counters = %v, %v", keys, err)
	}
	if ttl := h.env.Redis(t).PTTL(t.Context(), keys[0]).Val(); ttl <= 0 {
		t.Fatalf("failure counter without expiry: %v", ttl)
	}
}

// TestFailedAuthenticationsBehindATrustedProxy: behind a proxy named in
// TRUSTED_PROXIES, each client is counted by the address the proxy saw, and
// what a client writes into X-Forwarded-For itself is not believed.
func TestFailedAuthenticationsBehindATrustedProxy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, authFailuresPerMinute(2), func(c *gwconfig.Config) { c.TrustedProxies = "127.0.0.1" })
	unknown := "pk_" + strings.Repeat("U", 43)
	from := func(xff string) http.Header { return http.Header{"X-Forwarded-For": {xff}} }

	for i := 0; i < 2; i++ {
		h.call(t, http.MethodGet, "/v1/me", unknown, nil, from("203.0.113.1")).expectError(t, http.StatusUnauthorized, "unauthorized")
	}
	wantAuthThrottled(t, h.call(t, http.MethodGet, "/v1/me", unknown, nil, from("203.0.113.1")))
	// A client that prepends a fresh address is still the one the proxy saw.
	wantAuthThrottled(t, h.call(t, http.MethodGet, "/v1/me", unknown, nil, from("10.9.9.9, 203.0.113.1")))
	// Another client behind the same proxy has its own count.
	h.call(t, http.MethodGet, "/v1/me", unknown, nil, from("203.0.113.2")).expectError(t, http.StatusUnauthorized, "unauthorized")
}

// TestFailedAuthenticationsBehindAProxyThatWritesPorts: a proxy that
// writes the client's port into X-Forwarded-For (203.0.113.7:51234,
// [2001:db8::1]:443) names the client by its address alone, so its
// connections share one count, neither the balancer's nor one per port;
// an entry that is no address counts as the proxy that passed it on
// (docs/operations.md "Behind a load balancer"). Before, an entry with a
// port was taken for garbage and every such client counted as the
// balancer.
func TestFailedAuthenticationsBehindAProxyThatWritesPorts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, authFailuresPerMinute(2), func(c *gwconfig.Config) { c.TrustedProxies = "127.0.0.1" })
	unknown := "pk_" + strings.Repeat("U", 43)
	from := func(xff string) http.Header { return http.Header{"X-Forwarded-For": {xff}} }
	fail := func(xff string) {
		t.Helper()
		h.call(t, http.MethodGet, "/v1/me", unknown, nil, from(xff)).expectError(t, http.StatusUnauthorized, "unauthorized")
	}

	fail("203.0.113.7:51234")
	fail("10.9.9.9, 203.0.113.7:51235")
	wantAuthThrottled(t, h.call(t, http.MethodGet, "/v1/me", unknown, nil, from("203.0.113.7:51236")))
	wantAuthThrottled(t, h.call(t, http.MethodGet, "/v1/me", unknown, nil, from("203.0.113.7")))

	fail("[2001:db8::1]:443")
	fail("[2001:db8::1]:444")
	wantAuthThrottled(t, h.call(t, http.MethodGet, "/v1/me", unknown, nil, from("2001:db8::1")))

	// Neither client was counted as the balancer: its own count is
	// untouched until entries that are no address, which it passed on.
	fail("203.0.113.8:51234")
	fail("203.0.113.9:http")
	fail("garbage")
	wantAuthThrottled(t, h.call(t, http.MethodGet, "/v1/me", unknown, nil, nil))
	fail("203.0.113.8")

	keys, err := h.env.Redis(t).Keys(t.Context(), h.env.RedisPrefix+"*authfail*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var counted []string
	for _, k := range keys {
		counted = append(counted, k[strings.LastIndex(k, "authfail:")+len("authfail:"):])
	}
	slices.Sort(counted)
	if want := []string{"127.0.0.1", "2001:db8::/64", "203.0.113.7", "203.0.113.8"}; !slices.Equal(counted, want) {
		t.Fatalf("counted addresses %v, want %v", counted, want)
	}
}

// A request refused before its body is read (no key, a wrong one, an
// address throttled) is answered at once and its connection closed: a
// client dribbling the body holds nothing while HTTP_READ_TIMEOUT (30 s
// here) runs.
func TestRefusedRequestsDoNotWaitForTheirBody(t *testing.T) {
	t.Parallel()
	h := newHarness(t, authFailuresPerMinute(2))
	addr := strings.TrimPrefix(h.url, "http://")
	for _, key := range []string{"", "pk_" + strings.Repeat("U", 43), "pk_" + strings.Repeat("U", 43)} {
		header := http.Header{"Content-Type": {"application/json"}}
		if key != "" {
			header.Set("Authorization", "Bearer "+key)
		}
		res, err := dribble.Send(addr, dribble.Request{Method: http.MethodPost, Path: "/v1/messages", Header: header,
			ContentLength: 100_000, Every: 100 * time.Millisecond}, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != http.StatusUnauthorized && res.Status != http.StatusTooManyRequests || !res.Closed || res.After > 5*time.Second {
			t.Fatalf("key %q: answered %d %s, closed %v after %s; want a refusal at once, then closed", key, res.Status, res.Body, res.Closed, res.After)
		}
	}
	// With a good key, the body is read and the request goes on as usual.
	h.fakeService(t, rpc.ServiceMessaging, echoBack)
	_, key := h.workspace(t, map[string]any{"name": "Acme"})
	h.call(t, http.MethodPost, "/v1/messages", key, []byte(`{}`), nil).json(t)
}
