package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/testenv/receiver"
)

// TestWebhookPauseAndResaveEndToEnd: with WEBHOOK_PAUSE_AFTER=3 and a
// receiver that fails every attempt, the webhook stays active through two
// failed deliveries and is paused by the third (GET /v1/webhook shows it);
// events that arrive while paused are logged as skipped and the receiver
// gets nothing; `parleyctl webhook resave` issues a new secret and makes it
// active; the next events are delivered signed with the new secret, which
// the old one no longer verifies.
func TestWebhookPauseAndResaveEndToEnd(t *testing.T) {
	t.Parallel()
	s := startSuite(t,
		"WEBHOOK_ALLOW_PRIVATE_TARGETS=true",
		"WEBHOOK_PAUSE_AFTER=3",
		"WEBHOOK_RETRY_DELAYS=10ms,10ms,10ms",
	)
	rcv := receiver.New(t, nil, checkDeliveries(t))
	rcv.SetStatus(http.StatusServiceUnavailable)
	ws, key := s.developer(t)
	oldSecret := s.saveWebhook(t, key, rcv.URL)

	// One failed delivery at a time, so the count is exact.
	for i := 1; i <= 3; i++ {
		ev := messageReceived(ws, i)
		s.publishEvents(t, ev)
		d := s.settledDelivery(t, key, ev.GetId())
		if d["status"] != "failed" || d["attempts"] != 4.0 || d["response_status"] != 503.0 {
			t.Fatalf("delivery %d: %v, want failed after 4 attempts with 503", i, d)
		}
		want := "active"
		if i == 3 {
			want = "paused"
		}
		if got := s.webhookStatus(t, key); got != want {
			t.Fatalf("after %d failed deliveries GET /v1/webhook shows %q, want %q", i, got, want)
		}
	}
	sent := len(rcv.Requests())
	if sent != 12 {
		t.Errorf("receiver got %d requests for 3 failed deliveries, want 12", sent)
	}

	// While paused: recorded, not sent. Each event is published once the
	// one before is settled: the log is newest first by when each was
	// recorded, and two events published together may be recorded in
	// either order by concurrent handlers.
	paused := []string{}
	for i := 4; i <= 5; i++ {
		ev := messageReceived(ws, i)
		s.publishEvents(t, ev)
		id := ev.GetId()
		paused = append(paused, id)
		d := s.settledDelivery(t, key, id)
		lastErr, _ := d["last_error"].(string)
		if d["status"] != "skipped" || d["attempts"] != 0.0 || d["response_status"] != nil || d["delivered_at"] != nil ||
			!strings.Contains(lastErr, "paused") || !strings.Contains(d["payload"].(string), id) {
			t.Errorf("event while paused: %v, want skipped, unsent, with its payload", d)
		}
	}
	if got := len(rcv.Requests()); got != sent {
		t.Errorf("the paused webhook's receiver got %d more requests", got-sent)
	}
	skipped := s.deliveries(t, key, "status=skipped")
	if len(skipped) != 2 || skipped[0]["id"] != paused[1] || skipped[1]["id"] != paused[0] {
		t.Errorf("GET /v1/webhook/deliveries?status=skipped = %v, want the 2 events that arrived while paused, newest first", skipped)
	}

	// The operator's "save again".
	var resaved struct {
		Webhook struct {
			URL    string `json:"url"`
			Status string `json:"status"`
		} `json:"webhook"`
		Secret string `json:"secret"`
	}
	s.ctl(t, &resaved, "webhook", "resave", "--workspace", ws)
	if resaved.Secret == "" || resaved.Secret == oldSecret || resaved.Webhook.Status != "active" || resaved.Webhook.URL != rcv.URL {
		t.Fatalf("parleyctl webhook resave: %+v", resaved)
	}
	if got := s.webhookStatus(t, key); got != "active" {
		t.Fatalf("after resave GET /v1/webhook shows %q", got)
	}

	rcv.SetStatus(http.StatusOK)
	ev := messageReceived(ws, 6)
	s.publishEvents(t, ev)
	if d := s.settledDelivery(t, key, ev.GetId()); d["status"] != "delivered" || d["attempts"] != 1.0 {
		t.Fatalf("after resave: %v", d)
	}
	hits := rcv.Requests()
	if len(hits) != sent+1 {
		t.Fatalf("receiver got %d requests after resave, want 1", len(hits)-sent)
	}
	last := hits[len(hits)-1]
	if last.Delivery() != ev.GetId() {
		t.Fatalf("receiver got delivery %s, want %s", last.Delivery(), ev.GetId())
	}
	if err := checkHook(last, resaved.Secret); err != nil {
		t.Errorf("with the new secret: %v", err)
	}
	if checkHook(last, oldSecret) == nil {
		t.Error("the old secret still verifies after resave")
	}
}
