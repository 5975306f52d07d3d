package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/api"
	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
	svcconfig "github.com/parleyhq/parley/services/webhook-dispatcher/internal/config"
)

// An operator reads the webhook with the pause rule's state: the failure
// count, and paused_at, null until the rule pauses it and again once it is
// saved anew. The secret is never in the answer.
func TestAdminWebhookShowsThePause(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *svcconfig.Config) { c.PauseAfter = 2 }, nil)
	rcv := receiver.New(t, receiver.Status(http.StatusInternalServerError))
	ws := uuid.NewString()
	path := "/admin/webhooks/" + ws

	h.wantError("", http.MethodGet, path, nil, http.StatusNotFound, "webhook_not_found", "no webhook")
	h.wantError("", http.MethodGet, "/admin/webhooks/nope", nil, http.StatusBadRequest, "invalid_request", "workspace_id")
	secret := h.saveWebhook(ws, rcv.URL)

	w := h.doJSON("", http.MethodGet, path, nil, http.StatusOK)["webhook"].(map[string]any)
	if w["status"] != "active" || w["consecutive_failures"] != 0.0 || w["paused_at"] != nil || w["url"] != rcv.URL {
		t.Fatalf("saved webhook %v", w)
	}
	if _, ok := w["paused_at"]; !ok {
		t.Fatal("paused_at is missing, want null")
	}
	if _, ok := w["secret"]; ok || bytes.Contains([]byte(fmt.Sprint(w)), []byte(secret)) {
		t.Fatalf("the answer shows the secret: %v", w)
	}

	before := time.Now().UTC()
	first, second := messageEvent(ws, false), messageEvent(ws, false)
	h.publish(first)
	h.waitDelivery(ws, first.GetId())
	status := func() dispatcherapi.WebhookStatus {
		return call[dispatcherapi.WebhookStatusResponse](h, "", http.MethodGet, path, nil, http.StatusOK).Webhook
	}
	if w := status(); w.Status != "active" || w.ConsecutiveFailures != 1 || w.PausedAt != nil {
		t.Fatalf("after one failure %s", jsonOf(w))
	}
	h.publish(second)
	h.waitDelivery(ws, second.GetId())
	paused := status()
	pausedAt, err := time.Parse(time.RFC3339Nano, text(paused.PausedAt))
	if paused.Status != "paused" || paused.ConsecutiveFailures != 2 || err != nil || pausedAt.Before(before) || pausedAt.After(time.Now()) {
		t.Fatalf("after the pause %s", jsonOf(paused))
	}

	call[dispatcherapi.SavedWebhook](h, "", http.MethodPost, path+"/resave", nil, http.StatusOK)
	if w := status(); w.Status != "active" || w.ConsecutiveFailures != 0 || w.PausedAt != nil {
		t.Fatalf("after the re-save %s", jsonOf(w))
	}
}

// An operator reads one delivery with every attempt; another workspace's
// delivery is missing, a malformed id a bad request.
func TestAdminDeliveryShowsItsAttempts(t *testing.T) {
	t.Parallel()
	h := start(t, nil, nil)
	rcv := receiver.New(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	ws := uuid.NewString()
	h.saveWebhook(ws, rcv.URL)
	ev := messageEvent(ws, true)
	h.publish(ev)
	logged := h.waitDelivery(ws, ev.GetId())
	hits := rcv.Wait(t, 2)

	d := call[dispatcherapi.DeliveryDetailResponse](h, "", http.MethodGet, "/admin/webhooks/"+ws+"/deliveries/"+ev.GetId(), nil, http.StatusOK).Delivery
	if !reflect.DeepEqual(d.Delivery, logged) {
		t.Errorf("delivery %s, the log says %s", jsonOf(d.Delivery), jsonOf(logged))
	}
	if d.Payload != string(hits[1].Body) {
		t.Errorf("payload %v, the receiver got %s", d.Payload, hits[1].Body)
	}
	attempts := d.AttemptHistory
	if len(attempts) != 2 {
		t.Fatalf("attempt_history %s, want 2 attempts", jsonOf(attempts))
	}
	a1, a2 := attempts[0], attempts[1]
	if a1.Number != 1 || !is(a1.ResponseStatus, 503) || a1.Error == nil {
		t.Errorf("attempt 1 %s", jsonOf(a1))
	}
	if a2.Number != 2 || !is(a2.ResponseStatus, 202) || a2.Error != nil {
		t.Errorf("attempt 2 %s", jsonOf(a2))
	}
	for _, a := range attempts {
		if _, err := time.Parse(time.RFC3339Nano, a.StartedAt); err != nil {
			t.Errorf("started_at %v", a.StartedAt)
		}
		if a.DurationMS <= 0 {
			t.Errorf("duration_ms %v", a.DurationMS)
		}
	}

	other := uuid.NewString()
	h.wantError("", http.MethodGet, "/admin/webhooks/"+other+"/deliveries/"+ev.GetId(), nil, http.StatusNotFound, "delivery_not_found", "no delivery")
	h.wantError("", http.MethodGet, "/admin/webhooks/"+ws+"/deliveries/"+uuid.NewString(), nil, http.StatusNotFound, "delivery_not_found", "no delivery")
	h.wantError("", http.MethodGet, "/admin/webhooks/"+ws+"/deliveries/42", nil, http.StatusBadRequest, "invalid_request", "id must be a delivery id (UUID)")
}

// Replaying one delivery sends that event again, under its id with the
// body first sent and the current secret, and not its neighbours of the
// same kind stored around it.
func TestReplayOneDelivery(t *testing.T) {
	t.Parallel()
	h := start(t, nil, nil)
	rcv := receiver.New(t, receiver.Status(http.StatusOK))
	ws := uuid.NewString()
	h.saveWebhook(ws, rcv.URL)
	evs := []*eventsv1.Event{messageEvent(ws, false), messageEvent(ws, true), messageEvent(ws, false)}
	for _, ev := range evs {
		h.publish(ev)
	}
	first := rcv.Wait(t, 3)
	target := evs[1]
	h.waitDelivery(ws, target.GetId())
	secret := call[dispatcherapi.SavedWebhook](h, "", http.MethodPost, "/admin/webhooks/"+ws+"/resave", nil, http.StatusOK).Secret

	r := h.startReplay(dispatcherapi.ReplayRequest{WorkspaceID: ws, DeliveryID: new(target.GetId())})
	if r.Queued != 1 || !is(r.DeliveryID, target.GetId()) || !is(r.Event, "message.received") || r.WorkspaceID != ws || r.Until == nil {
		t.Fatalf("replay %s", jsonOf(r))
	}
	h.replaysSettled()
	got := rcv.Requests()[3:]
	if len(got) != 1 || got[0].Delivery() != target.GetId() {
		t.Fatalf("replayed %v, want only %s", deliveryIDs(got), target.GetId())
	}
	if !bytes.Equal(got[0].Body, firstHit(first, target.GetId()).Body) {
		t.Errorf("replayed body differs from the first:\n%s\n%s", got[0].Body, firstHit(first, target.GetId()).Body)
	}
	if err := got[0].Verify(secret, time.Now()); err != nil {
		t.Errorf("replayed with the old secret: %v", err)
	}
	if history := h.history(target.GetId()); len(history) != 2 || history[1]["response_status"] != 200.0 {
		t.Errorf("history %v", history)
	}
	for _, ev := range []*eventsv1.Event{evs[0], evs[2]} {
		if n := len(h.history(ev.GetId())); n != 1 {
			t.Errorf("neighbour %s has %d attempts, want 1", ev.GetId(), n)
		}
	}
}

// A replay of one delivery is refused in words: a delivery the log does not
// hold, a test event's (never in the stream), one whose event the stream
// no longer holds, one to a paused webhook or to a deleted one, and a
// request mixing a delivery with any part of a range.
func TestReplayOneDeliveryRefusals(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *svcconfig.Config) { c.PauseAfter = 1 }, nil)
	rcv := receiver.New(t, nil)
	ws := uuid.NewString()
	h.saveWebhook(ws, rcv.URL)
	replay := func(id string) map[string]any { return map[string]any{"workspace_id": ws, "delivery_id": id} }

	h.wantError("", http.MethodPost, "/admin/replays", replay(uuid.NewString()), http.StatusNotFound, "delivery_not_found", "no delivery")
	h.wantError("", http.MethodPost, "/admin/replays", replay("nope"), http.StatusBadRequest, "invalid_request", "delivery_id must be a delivery id (UUID)")
	for field, value := range map[string]any{
		"since":  rfc3339(time.Now()),
		"until":  rfc3339(time.Now()),
		"event":  "message.received",
		"resume": map[string]any{"replay_id": uuid.NewString(), "from_seq": 1, "end_seq": 2},
	} {
		h.wantError("", http.MethodPost, "/admin/replays",
			map[string]any{"workspace_id": ws, "delivery_id": uuid.NewString(), field: value},
			http.StatusBadRequest, "invalid_request", "without since, until, event or resume")
	}

	test := call[dispatcherapi.DeliveryResponse](h, ws, http.MethodPost, "/v1/webhook/test", nil, http.StatusOK).Delivery
	h.wantError("", http.MethodPost, "/admin/replays", replay(test.ID), http.StatusConflict, "test_event_not_replayable", "test event")

	gone := messageEvent(ws, false)
	seq := h.publish(gone)
	h.waitDelivery(ws, gone.GetId())
	st, err := h.js.Stream(context.Background(), h.env.Stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(context.Background(), seq); err != nil { // as the stream's age limit would
		t.Fatal(err)
	}
	h.wantError("", http.MethodPost, "/admin/replays", replay(gone.GetId()), http.StatusNotFound, "event_not_in_stream", "retention")

	rcv.SetStatus(http.StatusInternalServerError)
	failed := messageEvent(ws, false)
	h.publish(failed)
	h.waitDelivery(ws, failed.GetId())
	h.wantError("", http.MethodPost, "/admin/replays", replay(failed.GetId()), http.StatusConflict, "webhook_paused", "save it again")

	// The log outlives the webhook, but a delivery has nowhere to go
	// again once the webhook is deleted.
	call[api.OK](h, ws, http.MethodDelete, "/v1/webhook", nil, http.StatusOK)
	h.wantError("", http.MethodPost, "/admin/replays", replay(failed.GetId()), http.StatusNotFound, "webhook_not_found", "no webhook")
}
