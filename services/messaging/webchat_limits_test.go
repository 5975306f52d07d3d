package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/testenv/proxy"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	svcconfig "github.com/parleyhq/parley/services/messaging/internal/config"
)

// wantLimited checks a 429 rate_limited with a Retry-After in 1..max
// seconds.
func wantLimited(t *testing.T, r widgetResp, messagePart string, max int) {
	t.Helper()
	wantWidgetErr(t, r, http.StatusTooManyRequests, "rate_limited", messagePart)
	if retry, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || retry < 1 || retry > max {
		t.Fatalf("Retry-After %q, want whole seconds in 1..%d", r.Header.Get("Retry-After"), max)
	}
}

// widgetCallFrom is widgetCall with extra headers (a forged or a trusted
// proxy's X-Forwarded-For).
func widgetCallFrom(t *testing.T, method, url, token, xff string) widgetResp {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Visitor-Token", token)
	}
	req.Header.Set("X-Forwarded-For", xff)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&raw)
	return widgetResp{Status: resp.StatusCode, Header: resp.Header, Body: raw}
}

// TestWebchatSessionsPerAddress: WEBCHAT_SESSIONS_PER_MINUTE new sessions
// (renewals too) per client address, then 429 with Retry-After, whatever
// X-Forwarded-For claims; behind a trusted proxy, per address the proxy saw.
func TestWebchatSessionsPerAddress(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *svcconfig.Config) { c.WebchatSessionsPerMinute = 3 })
	ch := h.webchatChannel(uuid.NewString(), "auto")
	base := h.base
	session := base + "/webchat/" + ch.ID + "/session"

	token, visitor := newVisitor(t, base, ch.ID)
	// A renewal: the same visitor, a fresh token; it counts too.
	r := widgetCall(t, http.MethodPost, session, token, "")
	if r.Status != http.StatusCreated || r.json(t)["visitor_id"] != visitor {
		t.Fatalf("renewal = %d %s", r.Status, r.Body)
	}
	newVisitor(t, base, ch.ID)
	wantLimited(t, widgetCall(t, http.MethodPost, session, "", ""), "at most 3 new chat sessions per minute", 60)
	wantLimited(t, widgetCallFrom(t, http.MethodPost, session, "", "198.51.100.7"), "sessions", 60)
	wantLimited(t, widgetCall(t, http.MethodPost, session, token, ""), "sessions", 60)
	// Refused before the channel is looked up: any channel id.
	wantLimited(t, widgetCall(t, http.MethodPost, base+"/webchat/"+uuid.NewString()+"/session", "", ""), "sessions", 60)
	// The visitor already in keeps writing.
	if r := say(t, base, ch.ID, token, map[string]any{"text": "still here"}); r.Status != http.StatusCreated {
		t.Fatalf("say = %d %s", r.Status, r.Body)
	}

	proxied := newHarness(t, func(c *svcconfig.Config) { c.WebchatSessionsPerMinute = 1; c.TrustedProxies = "127.0.0.1" })
	pch := proxied.webchatChannel(uuid.NewString(), "auto")
	psession := proxied.base + "/webchat/" + pch.ID + "/session"
	if r := widgetCallFrom(t, http.MethodPost, psession, "", "203.0.113.1"); r.Status != http.StatusCreated {
		t.Fatalf("first behind the proxy = %d %s", r.Status, r.Body)
	}
	wantLimited(t, widgetCallFrom(t, http.MethodPost, psession, "", "203.0.113.1"), "sessions", 60)
	// What the client prepends is not believed.
	wantLimited(t, widgetCallFrom(t, http.MethodPost, psession, "", "10.0.0.9, 203.0.113.1"), "sessions", 60)
	if r := widgetCallFrom(t, http.MethodPost, psession, "", "203.0.113.2"); r.Status != http.StatusCreated {
		t.Fatalf("another client behind the proxy = %d %s", r.Status, r.Body)
	}
}

// TestWebchatMessagesPerAddressAndAcrossInstances: fresh visitors from one
// address share WEBCHAT_ADDRESS_MESSAGES_PER_MINUTE, and a visitor's own
// bound holds across instances (Redis, not each instance's memory).
func TestWebchatMessagesPerAddressAndAcrossInstances(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *svcconfig.Config) {
		c.WebchatMessagesPerMinute = 2
		c.WebchatAddressMessagesPerMinute = 3
	})
	ch := h.webchatChannel(uuid.NewString(), "auto")
	a, b := h.base, h.secondInstance().base

	first, _ := newVisitor(t, a, ch.ID)
	for _, base := range []string{a, b} {
		if r := say(t, base, ch.ID, first, map[string]any{"text": "hi"}); r.Status != http.StatusCreated {
			t.Fatalf("say = %d %s", r.Status, r.Body)
		}
	}
	// Two instances, one visitor: their third is refused on either.
	wantLimited(t, say(t, a, ch.ID, first, map[string]any{"text": "again"}), "at most 2 messages per minute", 60)
	wantLimited(t, say(t, b, ch.ID, first, map[string]any{"text": "again"}), "at most 2 messages per minute", 60)
	// A fresh visitor gets the address's last message, then the address
	// refuses every visitor.
	second, _ := newVisitor(t, b, ch.ID)
	if r := say(t, b, ch.ID, second, map[string]any{"text": "hi"}); r.Status != http.StatusCreated {
		t.Fatalf("fresh visitor = %d %s", r.Status, r.Body)
	}
	third, _ := newVisitor(t, a, ch.ID)
	wantLimited(t, say(t, a, ch.ID, third, map[string]any{"text": "hi"}), "at most 3 messages per minute from one address", 60)
	wantLimited(t, widgetCall(t, http.MethodPost, a+"/webchat/"+ch.ID+"/postbacks", third, `{"payload":"X"}`), "from one address", 60)
	if n := h.count("messages", ""); n != 3 {
		t.Fatalf("messages = %d, want 3", n)
	}
}

// TestWebchatTokensExpireAndRenew: a token is taken until expires_at;
// renewing it keeps the visitor; once expired it is 401 everywhere and a
// new session is a new visitor. Tokens are read from X-Visitor-Token only.
func TestWebchatTokensExpireAndRenew(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *svcconfig.Config) { c.WebchatTokenTTL = 2 * time.Second })
	ch := h.webchatChannel(uuid.NewString(), "auto")
	base := h.base

	start := time.Now()
	r := widgetCall(t, http.MethodPost, base+"/webchat/"+ch.ID+"/session", "", "")
	body := r.json(t)
	token, visitor := body["visitor_token"].(string), body["visitor_id"].(string)
	expires, err := time.Parse(time.RFC3339Nano, body["expires_at"].(string))
	if err != nil || expires.Before(start.Add(time.Second-time.Millisecond)) || expires.After(start.Add(3*time.Second)) {
		t.Fatalf("expires_at %v for a 2 s token issued at %v", body["expires_at"], start)
	}
	// Never from a URL.
	wantWidgetErr(t, widgetCall(t, http.MethodGet, base+"/webchat/"+ch.ID+"/history?token="+token, "", ""), http.StatusUnauthorized, "unauthorized", "X-Visitor-Token")
	wantWidgetErr(t, widgetCall(t, http.MethodGet, base+"/webchat/"+ch.ID+"/events?token="+token, "", ""), http.StatusUnauthorized, "unauthorized", "X-Visitor-Token")

	renewed := widgetCall(t, http.MethodPost, base+"/webchat/"+ch.ID+"/session", token, "").json(t)
	if renewed["visitor_id"] != visitor || renewed["visitor_token"] == "" {
		t.Fatalf("renewal = %v", renewed)
	}
	// The first token runs out (the renewed one may too, a second later).
	wait.Until(t, 5*time.Second, "the token to expire", func() bool {
		return widgetCall(t, http.MethodGet, base+"/webchat/"+ch.ID+"/history", token, "").Status == http.StatusUnauthorized
	})
	wantWidgetErr(t, say(t, base, ch.ID, token, map[string]any{"text": "late"}), http.StatusUnauthorized, "unauthorized", "")
	wantWidgetErr(t, widgetCall(t, http.MethodGet, base+"/webchat/"+ch.ID+"/events", token, ""), http.StatusUnauthorized, "unauthorized", "")
	// An expired token is not renewed: the session is a new visitor.
	if again := widgetCall(t, http.MethodPost, base+"/webchat/"+ch.ID+"/session", token, "").json(t); again["visitor_id"] == visitor {
		t.Fatalf("an expired token was renewed: %v", again)
	}
}

// TestWebchatStreamBoundsHoldAcrossInstances: a visitor's, an address's and
// a channel's open streams are counted across instances, and the place of
// an instance that died (its lease no longer renewed) frees itself.
func TestWebchatStreamBoundsHoldAcrossInstances(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *svcconfig.Config) {
		c.WebchatStreamsPerVisitor = 2
		c.WebchatStreamsPerAddress = 3
		c.WebchatStreamsPerChannel = 4
		c.TrustedProxies = "127.0.0.1"
	})
	ch := h.webchatChannel(uuid.NewString(), "auto")
	second := h.secondInstance()
	a, b := h.base, second.base
	events := func(base, token, xff string) widgetResp {
		return widgetCallFrom(t, http.MethodGet, base+"/webchat/"+ch.ID+"/events", token, xff)
	}

	one, _ := newVisitor(t, a, ch.ID)
	openStream(t, a, ch.ID, one)
	openStream(t, b, ch.ID, one)
	wantLimited(t, events(a, one, ""), "too many open chat windows; close one", 5)
	wantLimited(t, events(b, one, ""), "too many open chat windows; close one", 5)

	two, _ := newVisitor(t, a, ch.ID)
	closing := openStream(t, b, ch.ID, two)
	three, _ := newVisitor(t, a, ch.ID)
	wantLimited(t, events(a, three, ""), "too many open chat windows from one address", 15)
	// Another address has its own count.
	if r := events(a, three, "203.0.113.1"); r.Status != http.StatusOK {
		t.Fatalf("from another address = %d %s", r.Status, r.Body)
	}
	// A closed stream gives its place back at once.
	closing.cancel()
	wait.Until(t, 5*time.Second, "the closed streams' places", func() bool {
		return second.streams() == 1 && h.streams() == 1
	})
	openStream(t, b, ch.ID, three)

	// Three open; an instance that died left a fourth place taken in the
	// channel. Its lease is never renewed, and runs out.
	dead := ratelimit.NewSlots(h.env.Redis(t), redisx.Keys{Prefix: h.env.RedisPrefix}, 500*time.Millisecond)
	if _, err := dead.Acquire(context.Background(), ratelimit.Slot{Name: "webchat:streams:channel:" + ch.ID, Limit: 4}); err != nil {
		t.Fatal(err)
	}
	four, _ := newVisitor(t, a, ch.ID)
	wantLimited(t, events(a, four, "203.0.113.2"), "as many visitors as it takes", 15)
	wait.Until(t, 5*time.Second, "the dead instance's place", func() bool {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a+"/webchat/"+ch.ID+"/events", nil)
		req.Header.Set("X-Visitor-Token", four)
		req.Header.Set("X-Forwarded-For", "203.0.113.2")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	})
}

// TestWebchatBoundsWhileRedisIsDown: a bound that cannot be counted is not
// waived: the widget's routes that count one answer 503 with Retry-After
// while Redis is away, and work again when it is back.
func TestWebchatBoundsWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ch := h.webchatChannel(uuid.NewString(), "auto")
	u, err := url.Parse(h.env.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	px := proxy.Start(t, u.Host)
	base := h.instanceWithRedis(px.URL(t, h.env.RedisURL)).base
	token, _ := newVisitor(t, base, ch.ID)

	px.Cut()
	for name, r := range map[string]widgetResp{
		"session": widgetCall(t, http.MethodPost, base+"/webchat/"+ch.ID+"/session", "", ""),
		"message": say(t, base, ch.ID, token, map[string]any{"text": "anyone?"}),
		"stream":  widgetCall(t, http.MethodGet, base+"/webchat/"+ch.ID+"/events", token, ""),
	} {
		c, _ := errorBody(t, r.Body)
		if r.Status != http.StatusServiceUnavailable || c != "service_unavailable" || r.Header.Get("Retry-After") == "" {
			t.Errorf("%s while Redis is down = %d %s, Retry-After %q", name, r.Status, r.Body, r.Header.Get("Retry-After"))
		}
	}
	if n := h.count("messages", ""); n != 0 {
		t.Fatalf("%d messages stored without their bound counted", n)
	}
	px.Restore()
	wait.Until(t, 10*time.Second, "the widget after Redis is back", func() bool {
		return say(t, base, ch.ID, token, map[string]any{"text": "anyone?"}).Status == http.StatusCreated
	})
}
