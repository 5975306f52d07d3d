package adminclient_test

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/parleyhq/parley/pkg/adminclient"
	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
)

// TestWebhookAdminReads: the webhook with its pause and one delivery with
// its attempts are read as an operator, on the dispatcher's admin
// endpoint, and decoded whole.
func TestWebhookAdminReads(t *testing.T) {
	t.Parallel()
	const detailJSON = `{"id":"d1","event":"message.received","payload":"{\"id\":\"d1\"}","status":"delivered","attempts":2,` +
		`"response_status":200,"last_error":null,"delivered_at":"2026-11-24T04:00:01Z","created_at":"2026-11-24T04:00:00Z","attempt_history":[` +
		`{"number":1,"started_at":"2026-11-24T04:00:00Z","duration_ms":12.5,"response_status":null,"error":"connection refused"},` +
		`{"number":2,"started_at":"2026-11-24T04:00:01Z","duration_ms":3.25,"response_status":200,"error":null}]}`
	client, s := newClient(t, map[string]answer{
		"webhook-dispatcher GET /admin/webhooks/w1": {http.StatusOK, `{"webhook":{"id":"h1","url":"https://example.com/hook","status":"paused",` +
			`"consecutive_failures":20,"paused_at":"2026-11-24T03:00:00Z","created_at":"2026-11-24T01:00:00Z","updated_at":"2026-11-24T03:00:00Z"}}`},
		"webhook-dispatcher GET /admin/webhooks/w1/deliveries/d1": {http.StatusOK, `{"delivery":` + detailJSON + `}`},
	})

	pausedAt := "2026-11-24T03:00:00Z"
	want := dispatcherapi.WebhookStatus{
		Webhook:             dispatcherapi.Webhook{ID: "h1", URL: "https://example.com/hook", Status: "paused", CreatedAt: "2026-11-24T01:00:00Z", UpdatedAt: "2026-11-24T03:00:00Z"},
		ConsecutiveFailures: 20, PausedAt: &pausedAt,
	}
	if got, err := client.WebhookStatus(ctx, "w1"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("WebhookStatus = %+v, %v", got, err)
	}
	if r := s.last(t); r.endpoint != "admin" || r.workspaceID != "" || r.method != http.MethodGet {
		t.Errorf("webhook status went as %+v", r)
	}

	got, err := client.GetDelivery(ctx, "w1", "d1")
	if err != nil {
		t.Fatal(err)
	}
	ok, refused, deliveredAt := 200, "connection refused", "2026-11-24T04:00:01Z"
	wantDetail := dispatcherapi.DeliveryDetail{
		Delivery: dispatcherapi.Delivery{ID: "d1", Event: "message.received", Payload: `{"id":"d1"}`, Status: "delivered", Attempts: 2,
			ResponseStatus: &ok, DeliveredAt: &deliveredAt, CreatedAt: "2026-11-24T04:00:00Z"},
		AttemptHistory: []dispatcherapi.Attempt{
			{Number: 1, StartedAt: "2026-11-24T04:00:00Z", DurationMS: 12.5, Error: &refused},
			{Number: 2, StartedAt: "2026-11-24T04:00:01Z", DurationMS: 3.25, ResponseStatus: &ok},
		},
	}
	if !reflect.DeepEqual(got, wantDetail) {
		t.Fatalf("GetDelivery = %+v, want %+v", got, wantDetail)
	}
	if r := s.last(t); r.endpoint != "admin" || r.workspaceID != "" {
		t.Errorf("get delivery went as %+v", r)
	}
}

// TestReplayOfOneDelivery: a replay by delivery id sends the id alone (no
// since) and answers the dispatcher's replay with the delivery's id; its
// refusals are the dispatcher's errors.
func TestReplayOfOneDelivery(t *testing.T) {
	t.Parallel()
	client, s := newClient(t, map[string]answer{
		"webhook-dispatcher POST /admin/replays": {http.StatusAccepted, `{"replay":{"id":"r1","workspace_id":"w1","since":"2026-11-24T03:59:00Z",` +
			`"until":"2026-11-24T04:01:00Z","event":"message.received","delivery_id":"d1","queued":1},"next":null}`},
	})
	got, err := client.Replay(ctx, dispatcherapi.ReplayRequest{WorkspaceID: "w1", DeliveryID: new("d1")})
	if err != nil || got.Queued != 1 || got.DeliveryID == nil || *got.DeliveryID != "d1" {
		t.Fatalf("Replay = %+v, %v", got, err)
	}
	if body := bodyOf(t, s.last(t)); !reflect.DeepEqual(body, map[string]any{"workspace_id": "w1", "delivery_id": "d1"}) {
		t.Errorf("body = %v", body)
	}

	refused, _ := newClient(t, map[string]answer{
		"webhook-dispatcher POST /admin/replays": {http.StatusNotFound, `{"code":"event_not_in_stream","message":"the event is no longer in the event stream"}`},
	})
	_, err = refused.Replay(ctx, dispatcherapi.ReplayRequest{WorkspaceID: "w1", DeliveryID: new("d1")})
	if e, ok := adminclient.AsError(err); !ok || e.Status != http.StatusNotFound || e.Code != "event_not_in_stream" {
		t.Fatalf("err = %v", err)
	}
}
