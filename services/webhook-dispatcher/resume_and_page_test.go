package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters"
	svcconfig "github.com/parleyhq/parley/services/webhook-dispatcher/internal/config"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
)

// TestPutResumesAPausedWebhook: the developer's own PUT /v1/webhook of a
// paused webhook is the "save again" of docs/webhooks.md "Pausing after 20
// failed deliveries, and saving again": active, a new secret, the failure
// count back at zero, and deliveries sent again, signed with the new
// secret only.
func TestPutResumesAPausedWebhook(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *svcconfig.Config) {
		c.PauseAfter = 2
		c.RetryDelays = nil // one attempt per delivery keeps this short
	}, nil)
	rcv := receiver.New(t, nil)
	rcv.SetStatus(http.StatusInternalServerError)
	ws := uuid.NewString()
	oldSecret := h.saveWebhook(ws, rcv.URL)
	h.failDelivery(ws)
	h.failDelivery(ws)
	if w := call[dispatcherapi.WebhookResponse](h, ws, http.MethodGet, "/v1/webhook", nil, http.StatusOK).Webhook; w.Status != "paused" {
		t.Fatalf("after 2 failures with WEBHOOK_PAUSE_AFTER=2 the webhook is %q", w.Status)
	}

	saved := call[dispatcherapi.SavedWebhook](h, ws, http.MethodPut, "/v1/webhook", dispatcherapi.SaveWebhookRequest{URL: rcv.URL}, http.StatusOK)
	if saved.Webhook.Status != "active" || !strings.HasPrefix(saved.Secret, "whsec_") || saved.Secret == oldSecret || saved.Webhook.URL != rcv.URL {
		t.Fatalf("PUT /v1/webhook of a paused webhook = %s, want it active with a new secret", jsonOf(saved))
	}
	if st, failures := h.webhookRow(ws); st != "active" || failures != 0 {
		t.Fatalf("stored after the PUT: %s with %d failures, want active with 0", st, failures)
	}
	if w := call[dispatcherapi.WebhookResponse](h, ws, http.MethodGet, "/v1/webhook", nil, http.StatusOK).Webhook; w.Status != "active" {
		t.Fatalf("GET /v1/webhook after the PUT shows %q", w.Status)
	}

	// The count starts again from zero: one failure does not pause it.
	h.failDelivery(ws)
	if st, failures := h.webhookRow(ws); st != "active" || failures != 1 {
		t.Fatalf("one failure after the PUT: %s with %d failures, want active with 1", st, failures)
	}

	rcv.SetStatus(http.StatusOK)
	ev := messageEvent(ws, false)
	h.publish(ev)
	if d := h.waitDelivery(ws, ev.GetId()); d.Status != dispatcherapi.DeliveryDelivered || d.Attempts != 1 {
		t.Fatalf("after the PUT: %s, want delivered at the first attempt", jsonOf(d))
	}
	hits := rcv.Requests()
	last := hits[len(hits)-1]
	if last.Delivery() != ev.GetId() {
		t.Fatalf("the receiver's last request is delivery %s, want %s", last.Delivery(), ev.GetId())
	}
	if err := last.Verify(saved.Secret, time.Now()); err != nil {
		t.Errorf("with the new secret: %v", err)
	}
	if last.Verify(oldSecret, time.Now()) == nil {
		t.Error("the secret from before the pause still verifies")
	}
}

// TestDeliveryLogPageIsFiftyByDefault: GET /v1/webhook/deliveries without
// limit answers 50 deliveries and a next_before to the rest; limit 100
// answers them all (docs/webhooks.md "The delivery log").
func TestDeliveryLogPageIsFiftyByDefault(t *testing.T) {
	t.Parallel()
	h := start(t, nil, nil)
	store := adapters.NewDeliveryStore(h.db)
	ws := uuid.NewString()
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	for i := range 51 {
		d := delivery.New(uuid.NewString(), ws, delivery.EventTest, []byte(`{}`), base.Add(time.Duration(i)*time.Second))
		if _, created, err := store.Create(context.Background(), d); err != nil || !created {
			t.Fatalf("store delivery %d: created %v, %v", i, created, err)
		}
	}
	first := call[dispatcherapi.DeliveryPage](h, ws, http.MethodGet, "/v1/webhook/deliveries", nil, http.StatusOK)
	if len(first.Deliveries) != 50 || first.NextBefore == nil {
		t.Fatalf("default page: %d deliveries, next_before %v; want 50 and a next_before", len(first.Deliveries), first.NextBefore)
	}
	rest := call[dispatcherapi.DeliveryPage](h, ws, http.MethodGet, "/v1/webhook/deliveries?before="+*first.NextBefore, nil, http.StatusOK)
	if len(rest.Deliveries) != 1 || rest.NextBefore != nil {
		t.Fatalf("second page: %d deliveries, next_before %v; want the 1 left and none", len(rest.Deliveries), rest.NextBefore)
	}
	if all := call[dispatcherapi.DeliveryPage](h, ws, http.MethodGet, "/v1/webhook/deliveries?limit=100", nil, http.StatusOK); len(all.Deliveries) != 51 || all.NextBefore != nil {
		t.Fatalf("limit=100: %d deliveries, next_before %v; want all 51", len(all.Deliveries), all.NextBefore)
	}
}

// TestTestEventLeavesThePauseCountAlone: a test event that succeeds does
// not reset the count of failed deliveries, and one to a paused webhook
// is sent all the same, leaving it paused (docs/webhooks.md "The test
// event").
func TestTestEventLeavesThePauseCountAlone(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *svcconfig.Config) {
		c.PauseAfter = 3
		c.RetryDelays = nil
	}, nil)
	rcv := receiver.New(t, nil)
	rcv.SetStatus(http.StatusInternalServerError)
	ws := uuid.NewString()
	h.saveWebhook(ws, rcv.URL)
	test := func(wantStatus string, wantFailures int) {
		t.Helper()
		before := len(rcv.Requests())
		rcv.SetStatus(http.StatusOK)
		d := call[dispatcherapi.DeliveryResponse](h, ws, http.MethodPost, "/v1/webhook/test", nil, http.StatusOK).Delivery
		rcv.SetStatus(http.StatusInternalServerError)
		if d.Status != dispatcherapi.DeliveryDelivered || len(rcv.Requests()) != before+1 {
			t.Fatalf("test event: %s, the receiver got %d requests; want it delivered", jsonOf(d), len(rcv.Requests())-before)
		}
		if st, failures := h.webhookRow(ws); st != wantStatus || failures != wantFailures {
			t.Fatalf("after a delivered test event: %s with %d failures, want %s with %d", st, failures, wantStatus, wantFailures)
		}
	}
	h.failDelivery(ws)
	h.failDelivery(ws)
	test("active", 2)
	h.failDelivery(ws)
	if st, _ := h.webhookRow(ws); st != "paused" {
		t.Fatalf("the third failure in a row left the webhook %s", st)
	}
	test("paused", 3)
}

// failDelivery publishes a message event of ws, whose webhook's receiver
// refuses every attempt, and waits for its delivery to fail.
func (h *harness) failDelivery(ws string) {
	h.t.Helper()
	ev := messageEvent(ws, false)
	h.publish(ev)
	if d := h.waitDelivery(ws, ev.GetId()); d.Status != dispatcherapi.DeliveryFailed {
		h.t.Fatalf("delivery to a failing receiver: %s", jsonOf(d))
	}
}
