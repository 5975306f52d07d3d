package e2e

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestAbuseLimitsThroughTheBinaries drives the limits a client meets
// without a good key through the built binaries: uniform 401s (Bearer
// pk_wrong is an unknown key, not a malformed header), failed
// authentications per address refused with 429 before any lookup, and one
// body limit for every /v1 route, 413 payload_too_large over it. Also
// channel secrets of 16 characters at least, and parleyctl's group usage.
func TestAbuseLimitsThroughTheBinaries(t *testing.T) {
	t.Parallel()
	s := startSuite(t, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true", "AUTH_FAILURES_PER_MINUTE=4")
	wsID, key := s.developer(t)

	// Bodies: at the limit the webhook is saved; a valid JSON body one byte
	// over it, or of 600 KB, is 413 naming the limit.
	const limit = 512 << 10
	body := func(n int) json.RawMessage {
		const frame = `{"url":"http://127.0.0.1:9/hook","pad":""}`
		return json.RawMessage(`{"url":"http://127.0.0.1:9/hook","pad":"` + strings.Repeat("x", n-len(frame)) + `"}`)
	}
	if status, _, out := s.api(t, key, http.MethodPut, "/v1/webhook", body(limit)); status != http.StatusOK || out["secret"] == nil {
		t.Fatalf("PUT /v1/webhook of %d bytes = %d %v", limit, status, out)
	}
	for _, n := range []int{limit + 1, 600_000} {
		status, _, out := s.api(t, key, http.MethodPut, "/v1/webhook", body(n))
		if status != http.StatusRequestEntityTooLarge || out["code"] != "payload_too_large" || !strings.Contains(out["message"].(string), "524288 bytes") {
			t.Fatalf("PUT /v1/webhook of %d bytes = %d %v", n, status, out)
		}
	}

	// Refused keys, one body whatever the reason.
	_, _, unknown := s.api(t, "pk_"+strings.Repeat("Z", 43), http.MethodGet, "/v1/me", nil)
	status, _, wrong := s.api(t, "pk_wrong", http.MethodGet, "/v1/me", nil)
	if status != http.StatusUnauthorized || wrong["code"] != "unauthorized" || wrong["message"] != unknown["message"] {
		t.Fatalf("Bearer pk_wrong = %d %v; unknown key: %v", status, wrong, unknown)
	}
	if status, _, out := s.api(t, "", http.MethodGet, "/v1/me", nil); status != http.StatusUnauthorized {
		t.Fatalf("no key = %d %v", status, out)
	}
	if status, _, out := s.api(t, key, http.MethodGet, "/v1/me?api_key=x", nil); status != http.StatusUnauthorized {
		t.Fatalf("key in the query = %d %v", status, out)
	}
	// Four failures; the address is refused now, the good key too.
	for _, k := range []string{"pk_wrong", key} {
		status, header, out := s.api(t, k, http.MethodGet, "/v1/me", nil)
		if status != http.StatusTooManyRequests || out["code"] != "rate_limited" {
			t.Fatalf("after 4 failures = %d %v", status, out)
		}
		if retry, err := strconv.Atoi(header.Get("Retry-After")); err != nil || retry < 1 || retry > 60 {
			t.Fatalf("Retry-After %q", header.Get("Retry-After"))
		}
	}

	// A channel secret keys the widget's visitor tokens: a short one is
	// refused, none gets one generated.
	_, stderr, err := s.ctlRaw("channel", "create", "--workspace", wsID, "--kind", "webchat", "--secret", "only-15-chars-x")
	if err == nil || !strings.Contains(string(stderr), "secret must be 16 to 256 characters") {
		t.Fatalf("a 15-character secret: %v %s", err, stderr)
	}
	var ch struct {
		Channel struct{ Secret string } `json:"channel"`
	}
	s.ctl(t, &ch, "channel", "create", "--workspace", wsID, "--kind", "webchat")
	if len(ch.Channel.Secret) != 64 {
		t.Fatalf("generated secret %q", ch.Channel.Secret)
	}

	// parleyctl: a group alone prints its commands.
	stdout, stderr, err := s.ctlRaw("channel")
	if err != nil || !strings.Contains(string(stdout), "parleyctl channel create") || !strings.Contains(string(stdout), "parleyctl channel set-mode") {
		t.Fatalf("parleyctl channel: %v\n%s%s", err, stdout, stderr)
	}
}
