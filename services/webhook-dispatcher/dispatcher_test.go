package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/api"
	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters"
	svcconfig "github.com/parleyhq/parley/services/webhook-dispatcher/internal/config"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/envelope"
	"github.com/parleyhq/parley/services/webhook-dispatcher/migrations"
)

// The getting-started path: save a URL, get the secret, receive a
// customer's message as a signed message.received webhook.
func TestMessageReceivedIsDeliveredSigned(t *testing.T) {
	t.Parallel()
	h := start(t, nil, nil)
	rcv := receiver.New(t, receiver.Status(http.StatusOK))
	ws := uuid.NewString()
	secret := h.saveWebhook(ws, rcv.URL)

	ev := messageEvent(ws, true)
	h.publish(ev)
	got := rcv.Wait(t, 1)[0]

	if got.Method != http.MethodPost || got.Path != receiver.Path {
		t.Errorf("request %s %s", got.Method, got.Path)
	}
	headers := map[string]string{
		"Content-Type":       "application/json",
		"User-Agent":         "Parley-Webhooks/" + version,
		"X-Service-Event":    "message.received",
		"X-Service-Delivery": ev.GetId(),
	}
	for k, want := range headers {
		if g := got.Header.Get(k); g != want {
			t.Errorf("header %s = %q, want %q", k, g, want)
		}
	}
	if err := got.Verify(secret, time.Now()); err != nil {
		t.Errorf("signature: %v", err)
	}
	m := ev.GetMessageReceived()
	want := fmt.Sprintf(`{"id":%q,"event":"message.received","created_at":"2026-11-22T10:00:00.123Z","data":{`+
		`"workspace_id":%q,"conversation_id":%q,"platform":"telegram",`+
		`"channel":{"kind":"telegram","external_id":"parley_demo_bot"},`+
		`"contact":{"id":%q,"sender_id":"551234567","name":"Bat-Erdene","profile_pic":""},`+
		`"message":{"id":%q,"text":"Hi! Do you ship to Darkhan?","type":"image","external_id":"1042","created_at":"2026-11-22T09:59:59.123Z",`+
		`"attachment":{"url":"https://cdn.example.com/p.jpg","type":"image"}}}}`,
		ev.GetId(), ws, m.GetConversationId(), m.GetContact().GetId(), m.GetMessage().GetId())
	if string(got.Body) != want {
		t.Errorf("body:\n got %s\nwant %s", got.Body, want)
	}

	d := h.waitDelivery(ws, ev.GetId())
	if d.Status != "delivered" || d.Attempts != 1 || !is(d.ResponseStatus, 200) || d.LastError != nil || d.DeliveredAt == nil || d.Event != "message.received" {
		t.Errorf("log entry %s", jsonOf(d))
	}
	if d.Payload != string(got.Body) {
		t.Errorf("logged payload differs from the body sent:\n%s\n%s", d.Payload, got.Body)
	}

	// Without an attachment, the key is absent rather than null.
	ev2 := messageEvent(ws, false)
	h.publish(ev2)
	got2 := rcv.Wait(t, 2)[1]
	var env struct {
		Data struct {
			Message map[string]json.RawMessage `json:"message"`
		} `json:"data"`
	}
	if err := json.Unmarshal(got2.Body, &env); err != nil {
		t.Fatal(err)
	}
	if _, ok := env.Data.Message["attachment"]; ok || env.Data.Message["type"] == nil {
		t.Errorf("message without attachment rendered as %s", got2.Body)
	}
	if err := got2.Verify(secret, time.Now()); err != nil {
		t.Errorf("second signature: %v", err)
	}
	h.waitDelivery(ws, ev2.GetId())

	// Probes and metrics on the public address.
	resp, err := http.Get("http://" + h.cfg.Addr + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get("http://" + h.cfg.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range []string{
		`parley_dispatcher_deliveries_total{event="message.received",outcome="delivered"} 2`,
		`parley_dispatcher_attempt_duration_seconds_count{result="success"} 2`,
	} {
		if !strings.Contains(string(metrics), line) {
			t.Errorf("metrics lack %q", line)
		}
	}
}

// A receiver failing twice: the third attempt delivers the same delivery
// id and byte-identical body, each attempt signed with a fresh timestamp.
func TestRetriesUntilSuccess(t *testing.T) {
	t.Parallel()
	// Every reading of this clock is a second later than the last, so
	// fresh timestamps are visible without waiting.
	var tick atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(tick.Add(1)) * time.Second) }
	h := start(t, nil, clock)
	rcv := receiver.New(t, func(n int, w http.ResponseWriter) {
		if n < 3 {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":"database is down"}`))
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	ws := uuid.NewString()
	secret := h.saveWebhook(ws, rcv.URL)
	ev := messageEvent(ws, false)
	h.publish(ev)

	hits := rcv.Wait(t, 3)
	d := h.waitDelivery(ws, ev.GetId())
	var last int64
	for i, got := range hits {
		if got.Header.Get("X-Service-Delivery") != ev.GetId() {
			t.Errorf("attempt %d: delivery id %q", i+1, got.Header.Get("X-Service-Delivery"))
		}
		if !bytes.Equal(got.Body, hits[0].Body) {
			t.Errorf("attempt %d: body differs from the first", i+1)
		}
		ts, _ := strconv.ParseInt(got.Header.Get("X-Service-Timestamp"), 10, 64)
		if ts <= last {
			t.Errorf("attempt %d: timestamp %d not after %d", i+1, ts, last)
		}
		last = ts
		if err := got.Verify(secret, clock()); err != nil {
			t.Errorf("attempt %d: %v", i+1, err)
		}
	}
	if d.Status != "delivered" || d.Attempts != 3 || !is(d.ResponseStatus, 202) || d.LastError != nil {
		t.Errorf("log entry %s", jsonOf(d))
	}
	if d.Payload != string(hits[0].Body) {
		t.Error("logged payload differs from the body sent")
	}
	history := h.history(ev.GetId())
	if len(history) != 3 {
		t.Fatalf("history %v", history)
	}
	for i, wantStatus := range []float64{500, 500, 202} {
		a := history[i]
		if a["number"] != float64(i+1) || a["response_status"] != wantStatus || a["started_at"] == nil || a["duration_ms"] == nil {
			t.Errorf("history[%d] = %v", i, a)
		}
	}
	if e, _ := history[0]["error"].(string); !strings.Contains(e, "500") || !strings.Contains(e, "database is down") {
		t.Errorf("history[0].error = %q, want the status and the receiver's body", e)
	}
	if history[2]["error"] != nil {
		t.Errorf("successful attempt has error %v", history[2]["error"])
	}
	// A success leaves no failure counted.
	if st, failures := h.webhookRow(ws); st != "active" || failures != 0 {
		t.Errorf("webhook %s with %d failures", st, failures)
	}
}

// A redirect is an answer, and a failing one: never followed, retried like
// any failure, counted against the webhook.
func TestRedirectIsAFailure(t *testing.T) {
	t.Parallel()
	h := start(t, nil, nil)
	var followed atomic.Int32
	target := receiver.New(t, func(int, http.ResponseWriter) { followed.Add(1) })
	rcv := receiver.New(t, func(_ int, w http.ResponseWriter) {
		w.Header().Set("Location", target.URL)
		w.WriteHeader(http.StatusFound)
	})
	ws := uuid.NewString()
	h.saveWebhook(ws, rcv.URL)
	ev := messageEvent(ws, false)
	h.publish(ev)

	d := h.waitDelivery(ws, ev.GetId())
	if d.Status != "failed" || d.Attempts != 4 || !is(d.ResponseStatus, 302) || d.DeliveredAt != nil {
		t.Errorf("log entry %s", jsonOf(d))
	}
	if e := text(d.LastError); !strings.Contains(e, "redirect") {
		t.Errorf("last_error = %q", e)
	}
	if n := len(rcv.Requests()); n != 4 {
		t.Errorf("receiver got %d attempts, want 4", n)
	}
	if followed.Load() != 0 {
		t.Error("the redirect was followed")
	}
	if st, failures := h.webhookRow(ws); st != "active" || failures != 1 {
		t.Errorf("webhook %s with %d failures, want active with 1", st, failures)
	}
}

func TestSaveWebhookValidation(t *testing.T) {
	t.Parallel()
	strict := start(t, func(c *svcconfig.Config) { c.AllowPrivateTargets = false }, nil)
	ws := uuid.NewString()
	for _, tt := range []struct {
		body    any
		mention string
	}{
		{body: map[string]string{"url": "http://hooks.example.com/in"}, mention: "url must use https"},
		{body: map[string]string{"url": "https://127.0.0.1/in"}, mention: "url must point to a public address"},
		{body: map[string]string{"url": "https://[::ffff:127.0.0.1]/in"}, mention: "url must point to a public address"},
		{body: map[string]string{"url": "https://169.254.169.254/latest/meta-data"}, mention: "url must point to a public address"},
		{body: map[string]string{"url": "https://localhost:8443/in"}, mention: "url must point to a public address"},
		{body: map[string]string{"url": "https://user:pw@hooks.example.com/in"}, mention: "url must not contain credentials"},
		{body: map[string]string{"url": "ftp://hooks.example.com/in"}, mention: "url must be an absolute http or https URL"},
		{body: map[string]string{"url": "hooks.example.com/in"}, mention: "url must be an absolute"},
		{body: map[string]string{"url": "https://hooks.example.com/" + strings.Repeat("a", 2048)}, mention: "url must be at most 2048 characters"},
		{body: map[string]string{}, mention: "url is required"},
		{body: map[string]any{"url": 42}, mention: "url must be a string"},
		{body: `{"url":`, mention: "not valid JSON"},
	} {
		strict.wantError(ws, http.MethodPut, "/v1/webhook", tt.body, http.StatusBadRequest, "invalid_request", tt.mention)
	}
	// Nothing was saved by the refused attempts.
	strict.wantError(ws, http.MethodGet, "/v1/webhook", nil, http.StatusNotFound, "webhook_not_found", "")

	// A public https URL is saved (the host's DNS answer, if any, is
	// checked again on every dial).
	out := call[dispatcherapi.SavedWebhook](strict, ws, http.MethodPut, "/v1/webhook", dispatcherapi.SaveWebhookRequest{URL: "https://hooks.example.com/parley"}, http.StatusOK)
	if out.Webhook.URL != "https://hooks.example.com/parley" || out.Webhook.Status != "active" {
		t.Errorf("saved %s", jsonOf(out))
	}
	// A request without an authenticated workspace did not come through
	// the gateway.
	strict.wantError("", http.MethodPut, "/v1/webhook", map[string]string{"url": "https://hooks.example.com/parley"}, http.StatusUnauthorized, "unauthorized", "")

	// With WEBHOOK_ALLOW_PRIVATE_TARGETS, http and loopback are fine.
	dev := start(t, nil, nil)
	out = call[dispatcherapi.SavedWebhook](dev, ws, http.MethodPut, "/v1/webhook", dispatcherapi.SaveWebhookRequest{URL: "http://127.0.0.1:9/in"}, http.StatusOK)
	if out.Webhook.URL != "http://127.0.0.1:9/in" {
		t.Errorf("saved %s", jsonOf(out))
	}
}

func TestWebhookLifecycle(t *testing.T) {
	t.Parallel()
	h := start(t, nil, nil)
	ws := uuid.NewString()
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/v1/webhook"},
		{http.MethodDelete, "/v1/webhook"},
		{http.MethodPost, "/v1/webhook/test"},
		{http.MethodPost, "/admin/webhooks/" + ws + "/resave"},
	} {
		h.wantError(ws, r.method, r.path, nil, http.StatusNotFound, "webhook_not_found", "")
	}
	h.wantError("", http.MethodPost, "/admin/webhooks/not-a-uuid/resave", nil, http.StatusBadRequest, "invalid_request", "workspace_id")

	first := h.doJSON(ws, http.MethodPut, "/v1/webhook", map[string]string{"url": "http://127.0.0.1:9/a"}, http.StatusOK)
	w1 := first["webhook"].(map[string]any)
	if keys := sortedKeys(w1); !slices.Equal(keys, []string{"created_at", "id", "status", "updated_at", "url"}) {
		t.Errorf("webhook object keys %v", keys)
	}
	if _, err := time.Parse(time.RFC3339, w1["created_at"].(string)); err != nil || !strings.HasSuffix(w1["created_at"].(string), "Z") {
		t.Errorf("created_at %v", w1["created_at"])
	}

	got := h.doJSON(ws, http.MethodGet, "/v1/webhook", nil, http.StatusOK)
	if _, ok := got["secret"]; ok {
		t.Error("GET returned the secret")
	}
	if g := got["webhook"].(map[string]any); g["id"] != w1["id"] || g["url"] != "http://127.0.0.1:9/a" {
		t.Errorf("GET %v", got)
	}
	if strings.Contains(fmt.Sprint(got), first["secret"].(string)) {
		t.Error("GET leaks the secret")
	}
	// The same answer, decoded strictly, is the declared body.
	if g := call[dispatcherapi.WebhookResponse](h, ws, http.MethodGet, "/v1/webhook", nil, http.StatusOK); g.Webhook.ID != w1["id"] {
		t.Errorf("GET %s", jsonOf(g))
	}

	// Saving again keeps the webhook's id and creation, with a new URL and
	// secret.
	second := call[dispatcherapi.SavedWebhook](h, ws, http.MethodPut, "/v1/webhook", dispatcherapi.SaveWebhookRequest{URL: "http://127.0.0.1:9/b"}, http.StatusOK)
	w2 := second.Webhook
	if w2.ID != w1["id"] || w2.CreatedAt != w1["created_at"] || w2.URL != "http://127.0.0.1:9/b" || second.Secret == first["secret"] {
		t.Errorf("second save %s after %v", jsonOf(second), first)
	}

	// Another workspace sees none of it.
	h.wantError(uuid.NewString(), http.MethodGet, "/v1/webhook", nil, http.StatusNotFound, "webhook_not_found", "")

	if out := call[api.OK](h, ws, http.MethodDelete, "/v1/webhook", nil, http.StatusOK); !out.OK {
		t.Errorf("DELETE %s", jsonOf(out))
	}
	h.wantError(ws, http.MethodGet, "/v1/webhook", nil, http.StatusNotFound, "webhook_not_found", "")
	h.wantError(ws, http.MethodDelete, "/v1/webhook", nil, http.StatusNotFound, "webhook_not_found", "")
}

// The test button: one synchronous attempt, the full delivery object, and
// neither retries nor the pause counter.
func TestTestEvent(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *svcconfig.Config) { c.PauseAfter = 2 }, nil)
	ok := receiver.New(t, receiver.Status(http.StatusNoContent))
	ws := uuid.NewString()
	secret := h.saveWebhook(ws, ok.URL)

	status, raw := h.do(ws, http.MethodPost, "/v1/webhook/test", nil)
	if status != http.StatusOK {
		t.Fatalf("POST /v1/webhook/test = %d %s", status, raw)
	}
	var keysOf struct {
		Delivery map[string]any `json:"delivery"`
	}
	if err := json.Unmarshal(raw, &keysOf); err != nil {
		t.Fatal(err)
	}
	if keys := sortedKeys(keysOf.Delivery); !slices.Equal(keys, []string{"attempts", "created_at", "delivered_at", "event", "id", "last_error", "payload", "response_status", "status"}) {
		t.Errorf("delivery object keys %v", keys)
	}
	d := apicheck.Body[dispatcherapi.DeliveryResponse](t, raw).Delivery
	if d.Event != "test" || d.Status != "delivered" || d.Attempts != 1 || !is(d.ResponseStatus, 204) || d.LastError != nil {
		t.Errorf("delivery %s", jsonOf(d))
	}
	for k, s := range map[string]string{"created_at": d.CreatedAt, "delivered_at": text(d.DeliveredAt)} {
		if _, err := time.Parse(time.RFC3339, s); err != nil || !strings.HasSuffix(s, "Z") {
			t.Errorf("%s = %q, want ISO 8601 UTC", k, s)
		}
	}
	hits := ok.Requests()
	if len(hits) != 1 {
		t.Fatalf("receiver got %d requests", len(hits))
	}
	if string(hits[0].Body) != d.Payload || hits[0].Header.Get("X-Service-Event") != "test" || hits[0].Header.Get("X-Service-Delivery") != d.ID {
		t.Errorf("receiver got %s %v", hits[0].Body, hits[0].Header)
	}
	if err := hits[0].Verify(secret, time.Now()); err != nil {
		t.Error(err)
	}
	var env struct {
		ID        string         `json:"id"`
		Event     string         `json:"event"`
		CreatedAt string         `json:"created_at"`
		Data      map[string]any `json:"data"`
	}
	if err := json.Unmarshal(hits[0].Body, &env); err != nil {
		t.Fatal(err)
	}
	if env.ID != d.ID || env.Event != "test" || env.Data["workspace_id"] != ws || env.Data["sent_at"] != env.CreatedAt || len(env.Data) != 2 {
		t.Errorf("test envelope %s", hits[0].Body)
	}
	// The envelope keeps its signed millisecond form; the API shows the
	// same instant at the precision stored.
	envAt, err := time.Parse(envelope.TimeFormat, env.CreatedAt)
	apiAt, _ := time.Parse(time.RFC3339Nano, d.CreatedAt)
	if err != nil || !envAt.Equal(apiAt.Truncate(time.Millisecond)) {
		t.Errorf("envelope created_at %s (%v), delivery created_at %v", env.CreatedAt, err, d.CreatedAt)
	}
	// The answer is the delivery as the log reads it back, delivered_at
	// included: the attempt's duration has nanoseconds, the log does not.
	logged := call[dispatcherapi.DeliveryPage](h, ws, http.MethodGet, "/v1/webhook/deliveries", nil, http.StatusOK).Deliveries
	if len(logged) != 1 || jsonOf(logged[0]) != jsonOf(d) {
		t.Errorf("the log holds %s, the answer was %s", jsonOf(logged), jsonOf(d))
	}

	// A failing receiver: one attempt only, failure shown, not counted.
	failing := receiver.New(t, func(_ int, w http.ResponseWriter) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("maintenance"))
	})
	h.saveWebhook(ws, failing.URL)
	for range 3 {
		d = call[dispatcherapi.DeliveryResponse](h, ws, http.MethodPost, "/v1/webhook/test", nil, http.StatusOK).Delivery
	}
	if d.Status != "failed" || d.Attempts != 1 || !is(d.ResponseStatus, 503) || d.DeliveredAt != nil {
		t.Errorf("failed test delivery %s", jsonOf(d))
	}
	if e := text(d.LastError); !strings.Contains(e, "503") || !strings.Contains(e, "maintenance") {
		t.Errorf("last_error %q", e)
	}
	if n := len(failing.Requests()); n != 3 {
		t.Errorf("receiver got %d requests for 3 tests; test events are not retried", n)
	}
	if st, failures := h.webhookRow(ws); st != "active" || failures != 0 {
		t.Errorf("after failed tests: webhook %s with %d failures", st, failures)
	}

	// No answer at all: response_status is null.
	h.saveWebhook(ws, "http://127.0.0.1:9/closed")
	d = call[dispatcherapi.DeliveryResponse](h, ws, http.MethodPost, "/v1/webhook/test", nil, http.StatusOK).Delivery
	if d.Status != "failed" || d.ResponseStatus != nil || d.LastError == nil {
		t.Errorf("unreachable test delivery %s", jsonOf(d))
	}

	// Test deliveries are in the log, newest first.
	log := h.deliveries(ws)
	if len(log) != 5 || log[0].ID != d.ID || log[4].Status != "delivered" {
		t.Errorf("log %s", jsonOf(log))
	}
}

// After WEBHOOK_PAUSE_AFTER consecutive failed deliveries the webhook is
// paused; events are then recorded as skipped and not sent. Saving again
// makes it active with a new secret; the old one no longer verifies.
func TestPauseAndResave(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *svcconfig.Config) {
		c.PauseAfter = 2
		c.RetryDelays = nil // one attempt per delivery keeps this short
	}, nil)
	var healthy atomic.Bool
	rcv := receiver.New(t, func(_ int, w http.ResponseWriter) {
		if healthy.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	})
	ws := uuid.NewString()
	oldSecret := h.saveWebhook(ws, rcv.URL)

	for i := range 2 {
		ev := messageEvent(ws, false)
		h.publish(ev)
		if d := h.waitDelivery(ws, ev.GetId()); d.Status != "failed" {
			t.Fatalf("delivery %d: %s", i+1, jsonOf(d))
		}
	}
	w := call[dispatcherapi.WebhookResponse](h, ws, http.MethodGet, "/v1/webhook", nil, http.StatusOK).Webhook
	if w.Status != "paused" {
		t.Fatalf("after 2 failures the webhook is %v", w.Status)
	}

	before := len(rcv.Requests())
	skipped := messageEvent(ws, false)
	h.publish(skipped)
	d := h.waitDelivery(ws, skipped.GetId())
	if d.Status != "skipped" || d.Attempts != 0 || d.ResponseStatus != nil || d.DeliveredAt != nil || d.Payload == "" {
		t.Errorf("event while paused: %s", jsonOf(d))
	}
	h.consumerSettled(3)
	if n := len(rcv.Requests()); n != before {
		t.Errorf("a paused webhook's receiver was called (%d requests, was %d)", n, before)
	}

	out := call[dispatcherapi.SavedWebhook](h, "", http.MethodPost, "/admin/webhooks/"+ws+"/resave", nil, http.StatusOK)
	newSecret := out.Secret
	if !strings.HasPrefix(newSecret, "whsec_") || newSecret == oldSecret || out.Webhook.Status != "active" || out.Webhook.URL != rcv.URL {
		t.Fatalf("resave %s", jsonOf(out))
	}
	if st, failures := h.webhookRow(ws); st != "active" || failures != 0 {
		t.Errorf("after resave: %s with %d failures", st, failures)
	}

	healthy.Store(true)
	ev := messageEvent(ws, false)
	h.publish(ev)
	if d := h.waitDelivery(ws, ev.GetId()); d.Status != "delivered" {
		t.Fatalf("after resave: %s", jsonOf(d))
	}
	hits := rcv.Requests()
	last := hits[len(hits)-1]
	if err := last.Verify(newSecret, time.Now()); err != nil {
		t.Errorf("new secret: %v", err)
	}
	if last.Verify(oldSecret, time.Now()) == nil {
		t.Error("the old secret still verifies")
	}
}

func TestListDeliveries(t *testing.T) {
	t.Parallel()
	h := start(t, nil, nil)
	ws := uuid.NewString()
	for _, q := range []string{"limit=0", "limit=101", "limit=abc", "limit=-1", "limit=1.5"} {
		h.wantError(ws, http.MethodGet, "/v1/webhook/deliveries?"+q, nil, http.StatusBadRequest, "invalid_request", "limit must be an integer from 1 to 100")
	}
	h.wantError(ws, http.MethodGet, "/v1/webhook/deliveries?status=lost", nil, http.StatusBadRequest, "invalid_request", "status must be one of")
	h.wantError(ws, http.MethodGet, "/v1/webhook/deliveries?event=message.sent", nil, http.StatusBadRequest, "invalid_request", "event must be one of")
	h.wantError(ws, http.MethodGet, "/v1/webhook/deliveries?before=yesterday", nil, http.StatusBadRequest, "invalid_request", "before must be an RFC 3339 timestamp")
	for _, name := range []string{"limit", "status", "event", "before"} {
		h.wantError(ws, http.MethodGet, "/v1/webhook/deliveries?"+name+"=1&"+name+"=2", nil, http.StatusBadRequest, "invalid_request", name+" is given more than once")
	}

	empty := h.doJSON(ws, http.MethodGet, "/v1/webhook/deliveries", nil, http.StatusOK)
	if list, ok := empty["deliveries"].([]any); !ok || len(list) != 0 || empty["next_before"] != nil {
		t.Errorf("empty log %v", empty)
	}

	rcv := receiver.New(t, func(n int, w http.ResponseWriter) {
		if n%2 == 0 {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	h.saveWebhook(ws, rcv.URL)
	var ids []string
	for range 5 {
		d := call[dispatcherapi.DeliveryResponse](h, ws, http.MethodPost, "/v1/webhook/test", nil, http.StatusOK).Delivery
		ids = append(ids, d.ID)
	}
	slices.Reverse(ids) // newest first

	page := func(q string) ([]string, *string) {
		out := call[dispatcherapi.DeliveryPage](h, ws, http.MethodGet, "/v1/webhook/deliveries?"+q, nil, http.StatusOK)
		var got []string
		for _, d := range out.Deliveries {
			got = append(got, d.ID)
		}
		return got, out.NextBefore
	}
	if got, next := page(""); !slices.Equal(got, ids) || next != nil {
		t.Errorf("default page %v next %v, want %v", got, next, ids)
	}
	got, next := page("limit=2")
	if !slices.Equal(got, ids[:2]) || next == nil {
		t.Fatalf("limit=2: %v next %v", got, next)
	}
	got, _ = page("limit=2&before=" + *next)
	if !slices.Equal(got, ids[2:4]) {
		t.Errorf("second page %v, want %v", got, ids[2:4])
	}
	// Attempts 1, 3, 5 were accepted, 2 and 4 refused.
	if got, _ := page("status=failed"); !slices.Equal(got, []string{ids[1], ids[3]}) {
		t.Errorf("status=failed: %v", got)
	}
	if got, _ := page("event=test&status=delivered"); len(got) != 3 {
		t.Errorf("event=test&status=delivered: %v", got)
	}
	if got, _ := page("event=message.received"); len(got) != 0 {
		t.Errorf("event=message.received: %v", got)
	}
	// Each workspace sees only its own log.
	other := call[dispatcherapi.DeliveryPage](h, uuid.NewString(), http.MethodGet, "/v1/webhook/deliveries", nil, http.StatusOK)
	if len(other.Deliveries) != 0 {
		t.Errorf("another workspace sees %s", jsonOf(other.Deliveries))
	}
}

// Deliveries created in the same microsecond (a burst of events) are never
// split across pages: following next_before meets each exactly once. The
// rows are stored directly so their created_at can tie.
func TestListDeliveriesWalksTiesExactlyOnce(t *testing.T) {
	t.Parallel()
	h := start(t, nil, nil)
	store := adapters.NewDeliveryStore(h.db)
	ws, other := uuid.NewString(), uuid.NewString()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 123456000, time.UTC)
	type stored struct {
		id     string
		at     time.Time
		failed bool
	}
	var rows []stored
	add := func(workspace string, secs int, failed bool) {
		d := delivery.New(uuid.NewString(), workspace, delivery.EventTest, []byte(`{}`), t0.Add(time.Duration(secs)*time.Second))
		if failed {
			d.Status = delivery.StatusFailed
		}
		if _, created, err := store.Create(context.Background(), d); err != nil || !created {
			t.Fatalf("store delivery: created %v, %v", created, err)
		}
		if workspace == ws {
			rows = append(rows, stored{id: d.ID, at: d.CreatedAt, failed: failed})
		}
	}
	// Seconds after t0: a group of three at :02 and a pair at :01, so that
	// with limit 2 groups cross page boundaries.
	for _, r := range []struct {
		secs   int
		failed bool
	}{{3, false}, {2, true}, {2, false}, {2, true}, {1, false}, {1, true}, {0, false}} {
		add(ws, r.secs, r.failed)
	}
	add(other, 2, false) // another workspace's delivery in the tie group
	// Newest first, ties by id descending: the log's order.
	slices.SortFunc(rows, func(a, b stored) int {
		if c := b.at.Compare(a.at); c != 0 {
			return c
		}
		return strings.Compare(b.id, a.id)
	})

	type page struct {
		ids  []string
		at   []string
		next any
	}
	get := func(query string) page {
		out := call[dispatcherapi.DeliveryPage](h, ws, http.MethodGet, "/v1/webhook/deliveries?"+query, nil, http.StatusOK)
		var p page
		for _, d := range out.Deliveries {
			p.ids = append(p.ids, d.ID)
			p.at = append(p.at, d.CreatedAt)
		}
		if out.NextBefore != nil {
			p.next = *out.NextBefore
		}
		return p
	}
	ids := func(rs []stored) []string {
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = r.id
		}
		return out
	}

	// limit 2, page by page: the :02 group would cross the first page's
	// edge, so that page stops before it, one microsecond above it; the
	// group (3 > limit) is then a page of its own; the :01 pair fits.
	want := []struct {
		ids  []string
		next any
	}{
		{ids(rows[0:1]), "2026-11-22T10:00:02.123457Z"},
		{ids(rows[1:4]), "2026-11-22T10:00:02.123456Z"},
		{ids(rows[4:6]), "2026-11-22T10:00:01.123456Z"},
		{ids(rows[6:7]), nil},
	}
	query := "limit=2"
	for i, w := range want {
		got := get(query)
		if !slices.Equal(got.ids, w.ids) || got.next != w.next {
			t.Fatalf("page %d (%s) = %v next %v, want %v next %v", i+1, query, got.ids, got.next, w.ids, w.next)
		}
		if i == 0 && got.at[0] != "2026-11-22T10:00:03.123456Z" {
			t.Errorf("created_at %s, want RFC 3339 UTC with the stored microseconds", got.at[0])
		}
		if w.next != nil {
			query = "limit=2&before=" + w.next.(string)
		}
	}

	// Any limit, with or without a filter: each delivery exactly once, in
	// the log's order.
	failed := slices.DeleteFunc(slices.Clone(rows), func(r stored) bool { return !r.failed })
	for _, filter := range []struct {
		query string
		want  []string
	}{{"", ids(rows)}, {"&status=failed", ids(failed)}} {
		for limit := 1; limit <= len(rows)+1; limit++ {
			var got []string
			query := fmt.Sprintf("limit=%d%s", limit, filter.query)
			for pages := 0; ; pages++ {
				if pages > len(rows) {
					t.Fatalf("%s: the walk does not end", query)
				}
				p := get(query)
				if len(p.ids) > limit && slices.ContainsFunc(p.at, func(at string) bool { return at != p.at[0] }) {
					t.Fatalf("%s: a page of %d spans several created_at", query, len(p.ids))
				}
				got = append(got, p.ids...)
				if p.next == nil {
					break
				}
				if len(p.ids) == 0 {
					t.Fatalf("%s: empty page with a next_before", query)
				}
				query = fmt.Sprintf("limit=%d%s&before=%s", limit, filter.query, p.next)
			}
			if !slices.Equal(got, filter.want) {
				t.Fatalf("limit %d%s: walk = %v, want %v", limit, filter.query, got, filter.want)
			}
		}
	}
}

// A second copy of an event in the stream (published again past the
// stream's duplicate window) is handed out as new: it is sent again under
// the same delivery id and body, which receivers deduplicate, and the log
// keeps one row, with both attempts. (A message JetStream redelivers reads
// the log first and is not sent again once settled: internal/app's
// TestARedeliveryReadsTheLogFirst.)
func TestSecondCopyOfAnEventKeepsOneRow(t *testing.T) {
	t.Parallel()
	h := start(t, nil, nil)
	rcv := receiver.New(t, receiver.Status(http.StatusOK))
	ws := uuid.NewString()
	h.saveWebhook(ws, rcv.URL)
	ev := messageEvent(ws, false)
	h.publish(ev)
	h.waitDelivery(ws, ev.GetId())
	h.publishRaw(h.env.Stream.Subject(ws, ev.GetType()), mustMarshal(t, ev), "")
	h.consumerSettled(2)
	hits := rcv.Requests()
	if len(hits) != 2 || hits[1].Header.Get("X-Service-Delivery") != ev.GetId() || !bytes.Equal(hits[0].Body, hits[1].Body) {
		t.Errorf("receiver got %d requests; the second must repeat the first's id and body", len(hits))
	}
	log := h.deliveries(ws)
	if len(log) != 1 || log[0].Status != "delivered" || log[0].Attempts != 2 {
		t.Errorf("log %s, want one row delivered after 2 attempts", jsonOf(log))
	}
}

// Malformed messages are terminated (not redelivered, not blocking the
// rest); events of workspaces without a webhook are acked unrecorded.
func TestMalformedAndUnroutedEvents(t *testing.T) {
	t.Parallel()
	h := start(t, nil, nil)
	rcv := receiver.New(t, receiver.Status(http.StatusOK))
	ws := uuid.NewString()
	h.saveWebhook(ws, rcv.URL)

	h.publishRaw(h.env.Stream.Subject(ws, "message.received"), []byte("\xff\xff not a protobuf"), "")
	// Body and subject name different workspaces: never delivered.
	stray := messageEvent(ws, false)
	h.publishRaw(h.env.Stream.Subject(uuid.NewString(), "message.received"), mustMarshal(t, stray), "")
	// An event that does not render (no conversation).
	broken := messageEvent(ws, false)
	broken.GetMessageReceived().ConversationId = ""
	h.publish(broken)
	// A workspace without a webhook.
	nobody := uuid.NewString()
	h.publish(messageEvent(nobody, false))
	// And a good one after all that.
	good := messageEvent(ws, false)
	h.publish(good)

	h.waitDelivery(ws, good.GetId())
	info := h.consumerSettled(5)
	if info.NumRedelivered != 0 {
		t.Errorf("%d messages redelivered", info.NumRedelivered)
	}
	hits := rcv.Requests()
	if len(hits) != 1 || hits[0].Header.Get("X-Service-Delivery") != good.GetId() {
		t.Errorf("receiver got %d requests", len(hits))
	}
	if log := h.deliveries(ws); len(log) != 1 {
		t.Errorf("log %s", jsonOf(log))
	}
	var rows int
	_ = h.db.Raw(`SELECT count(*) FROM dispatch.deliveries WHERE workspace_id = ?`, nobody).Row().Scan(&rows)
	if rows != 0 {
		t.Errorf("%d rows recorded for a workspace without a webhook", rows)
	}
}

// A database failure never loses an event: the message is nak'ed, comes
// back, and is delivered once the database answers again. Its first
// attempt goes out before the failed write (a first delivery is written
// once, after it is sent); the redeliveries read the log first and wait
// for it, then send it once more under the same id and body.
func TestDatabaseFailureRedeliversLater(t *testing.T) {
	t.Parallel()
	h := start(t, nil, nil)
	rcv := receiver.New(t, receiver.Status(http.StatusOK))
	ws := uuid.NewString()
	h.saveWebhook(ws, rcv.URL)

	if err := h.db.Exec(`ALTER TABLE dispatch.deliveries RENAME TO deliveries_away`).Error; err != nil {
		t.Fatal(err)
	}
	ev := messageEvent(ws, false)
	h.publish(ev)
	wait.For(t, 15*time.Second, "message handed out three times", func() error {
		c, err := h.js.Consumer(t.Context(), h.env.Stream.Name, h.cfg.Consumer)
		if err != nil {
			return err
		}
		info, err := c.Info(t.Context())
		if err != nil {
			return err
		}
		if info.Delivered.Consumer < 3 {
			return fmt.Errorf("delivered %d times", info.Delivered.Consumer)
		}
		return nil
	})
	if n := len(rcv.Requests()); n != 1 {
		t.Fatalf("sent %d times while the log was away; want once, before its write failed", n)
	}
	if err := h.db.Exec(`ALTER TABLE dispatch.deliveries_away RENAME TO deliveries`).Error; err != nil {
		t.Fatal(err)
	}
	d := h.waitDelivery(ws, ev.GetId())
	hits := rcv.Requests()
	if d.Status != "delivered" || len(hits) != 2 || hits[1].Header.Get("X-Service-Delivery") != ev.GetId() || !bytes.Equal(hits[0].Body, hits[1].Body) {
		t.Errorf("after recovery: %s, %d requests", jsonOf(d), len(hits))
	}
	h.consumerSettled(1)
}

// Every event kind reaches the receiver with its own X-Service-Event.
func TestEveryEventKindIsDelivered(t *testing.T) {
	t.Parallel()
	h := start(t, nil, nil)
	rcv := receiver.New(t, receiver.Status(http.StatusOK))
	ws := uuid.NewString()
	secret := h.saveWebhook(ws, rcv.URL)

	postback := messageEvent(ws, false)
	postback.Type = "postback.received"
	m := postback.GetMessageReceived()
	postback.Data = &eventsv1.Event_PostbackReceived{PostbackReceived: &eventsv1.PostbackReceived{
		WorkspaceId: ws, ConversationId: m.GetConversationId(), Platform: m.GetPlatform(), Channel: m.GetChannel(),
		Contact: m.GetContact(), Message: m.GetMessage(),
		Postback: &eventsv1.Postback{Payload: "ORDER_42", ReceivedAt: postback.GetCreatedAt()},
	}}
	comment := messageEvent(ws, false)
	comment.Type = "comment.received"
	comment.Data = &eventsv1.Event_CommentReceived{CommentReceived: &eventsv1.CommentReceived{
		WorkspaceId: ws, Platform: "instagram", Channel: &eventsv1.Channel{Kind: "instagram", ExternalId: "1784"},
		Comment: &eventsv1.Comment{Id: "c1", PostId: "p1", Text: "price?", From: &eventsv1.CommentAuthor{Id: "u1", Name: "carla"}, ReceivedAt: comment.GetCreatedAt()},
	}}
	h.publish(postback)
	h.publish(comment)
	hits := rcv.Wait(t, 2)
	kinds := map[string]string{}
	for _, got := range hits {
		if err := got.Verify(secret, time.Now()); err != nil {
			t.Error(err)
		}
		var env struct {
			Event string         `json:"event"`
			Data  map[string]any `json:"data"`
		}
		_ = json.Unmarshal(got.Body, &env)
		if env.Event != got.Header.Get("X-Service-Event") {
			t.Errorf("header %q, envelope %q", got.Header.Get("X-Service-Event"), env.Event)
		}
		kinds[env.Event] = fmt.Sprint(sortedKeys(env.Data))
	}
	want := map[string]string{
		"postback.received": "[channel contact conversation_id message platform postback workspace_id]",
		"comment.received":  "[channel comment platform workspace_id]",
	}
	for k, v := range want {
		if kinds[k] != v {
			t.Errorf("%s data keys %s, want %s", k, kinds[k], v)
		}
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// A dispatcher stopped between attempts hands the event back; the next one
// delivers it under the same delivery id, with the stored body byte for
// byte, and the attempt numbering goes on.
func TestStoppedMidDeliveryIsFinishedByAnotherInstance(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	first := startOn(t, env, func(c *svcconfig.Config) {
		c.AttemptTimeout = 200 * time.Millisecond
		c.RetryDelays = []time.Duration{time.Minute} // it will be stopped while waiting
	}, nil)
	rcv := receiver.New(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			time.Sleep(400 * time.Millisecond) // past the first instance's attempt timeout
		}
		w.WriteHeader(http.StatusOK)
	})
	ws := uuid.NewString()
	secret := first.saveWebhook(ws, rcv.URL)
	ev := messageEvent(ws, false)
	first.publish(ev)
	wait.For(t, 10*time.Second, "first attempt recorded", func() error {
		for _, d := range first.deliveries(ws) {
			if d.ID == ev.GetId() && d.Status == "pending" && d.Attempts == 1 {
				return nil
			}
		}
		return fmt.Errorf("not yet")
	})
	stopped := time.Now()
	first.stop()
	if took := time.Since(stopped); took > 5*time.Second {
		t.Errorf("stopping took %s; a delivery waiting to retry should not hold it", took)
	}

	second := startOn(t, env, nil, nil)
	d := second.waitDelivery(ws, ev.GetId())
	if d.Status != "delivered" || d.Attempts != 2 {
		t.Errorf("log entry %s", jsonOf(d))
	}
	hits := rcv.Wait(t, 2)
	if len(hits) != 2 || hits[1].Header.Get("X-Service-Delivery") != ev.GetId() || !bytes.Equal(hits[0].Body, hits[1].Body) {
		t.Errorf("receiver got %d requests; the second must repeat the first's id and body", len(hits))
	}
	if err := hits[1].Verify(secret, time.Now()); err != nil {
		t.Error(err)
	}
	history := second.history(ev.GetId())
	if len(history) != 2 || history[0]["number"] != 1.0 || history[1]["number"] != 2.0 || history[1]["response_status"] != 200.0 {
		t.Errorf("history %v", history)
	}
	if e, _ := history[0]["error"].(string); !strings.Contains(e, "no complete response within 200ms") {
		t.Errorf("first attempt error %q", e)
	}
	second.consumerSettled(1)
}

// Instances share one durable consumer: every event is delivered once, not
// once per instance.
func TestInstancesShareTheConsumer(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	a := startOn(t, env, nil, nil)
	startOn(t, env, nil, nil)
	rcv := receiver.New(t, receiver.Status(http.StatusOK))
	ws := uuid.NewString()
	a.saveWebhook(ws, rcv.URL)
	const n = 30
	for range n {
		a.publish(messageEvent(ws, false))
	}
	a.consumerSettled(n)
	seen := map[string]int{}
	for _, got := range rcv.Requests() {
		seen[got.Header.Get("X-Service-Delivery")]++
	}
	if len(seen) != n {
		t.Errorf("receiver saw %d distinct deliveries, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("delivery %s arrived %d times", id, c)
		}
	}
}
