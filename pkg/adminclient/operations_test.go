package adminclient_test

import (
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"testing"

	"github.com/parleyhq/parley/pkg/adminclient"
	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
)

const deliveryJSON = `{"id":"d1","event":"test","payload":"{}","status":"failed","attempts":3,"response_status":500,"last_error":"HTTP 500","delivered_at":null,"created_at":"2026-11-24T04:00:00Z"}`

func TestWebhookCalls(t *testing.T) {
	t.Parallel()
	const webhookJSON = `{"id":"h1","url":"https://example.com/hook","status":"active","created_at":"2026-11-24T04:00:00Z","updated_at":"2026-11-24T04:00:00Z"}`
	client, s := newClient(t, map[string]answer{
		"webhook-dispatcher GET /v1/webhook":                {http.StatusOK, `{"webhook":` + webhookJSON + `}`},
		"webhook-dispatcher PUT /v1/webhook":                {http.StatusOK, `{"webhook":` + webhookJSON + `,"secret":"whsec_1"}`},
		"webhook-dispatcher DELETE /v1/webhook":             {http.StatusOK, `{"ok":true}`},
		"webhook-dispatcher POST /v1/webhook/test":          {http.StatusOK, `{"delivery":` + deliveryJSON + `}`},
		"webhook-dispatcher POST /admin/webhooks/w1/resave": {http.StatusOK, `{"webhook":` + webhookJSON + `,"secret":"whsec_2"}`},
		"webhook-dispatcher GET /v1/webhook/deliveries":     {http.StatusOK, `{"deliveries":[` + deliveryJSON + `],"next_before":"2026-11-24T04:00:00Z"}`},
	})
	hook := dispatcherapi.Webhook{ID: "h1", URL: "https://example.com/hook", Status: "active", CreatedAt: "2026-11-24T04:00:00Z", UpdatedAt: "2026-11-24T04:00:00Z"}
	if got, err := client.GetWebhook(ctx, "w1"); err != nil || got != hook {
		t.Fatalf("GetWebhook = %+v, %v", got, err)
	}
	// The webhook routes are the workspace's own: called as the workspace.
	if r := s.last(t); r.endpoint != "api" || r.workspaceID != "w1" {
		t.Errorf("get went as %+v", r)
	}
	saved, err := client.SaveWebhook(ctx, "w1", "https://example.com/hook")
	if err != nil || saved.Webhook != hook || saved.Secret != "whsec_1" {
		t.Fatalf("SaveWebhook = %+v, %v", saved, err)
	}
	if body := bodyOf(t, s.last(t)); !reflect.DeepEqual(body, map[string]any{"url": "https://example.com/hook"}) {
		t.Errorf("save body = %v", body)
	}
	if err := client.DeleteWebhook(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	code, msg := 500, "HTTP 500"
	wantDelivery := dispatcherapi.Delivery{ID: "d1", Event: "test", Payload: "{}", Status: "failed", Attempts: 3, ResponseStatus: &code, LastError: &msg, CreatedAt: "2026-11-24T04:00:00Z"}
	if got, err := client.SendTestEvent(ctx, "w1"); err != nil || !reflect.DeepEqual(got, wantDelivery) {
		t.Fatalf("SendTestEvent = %+v, %v", got, err)
	}
	resaved, err := client.ResaveWebhook(ctx, "w1")
	if err != nil || resaved.Secret != "whsec_2" {
		t.Fatalf("ResaveWebhook = %+v, %v", resaved, err)
	}
	if r := s.last(t); r.endpoint != "admin" || r.workspaceID != "" {
		t.Errorf("resave went as %+v", r)
	}

	page, err := client.ListDeliveries(ctx, "w1", adminclient.DeliveryFilter{Status: "failed", Event: "test", Before: "2026-11-24T05:00:00+08:00", Limit: 20})
	if err != nil || len(page.Deliveries) != 1 || !reflect.DeepEqual(page.Deliveries[0], wantDelivery) || page.NextBefore == nil || *page.NextBefore != "2026-11-24T04:00:00Z" {
		t.Fatalf("ListDeliveries = %+v, %v", page, err)
	}
	r := s.last(t)
	query, _ := url.ParseQuery(r.query)
	want := url.Values{"status": {"failed"}, "event": {"test"}, "before": {"2026-11-24T05:00:00+08:00"}, "limit": {"20"}}
	if !reflect.DeepEqual(query, want) || r.workspaceID != "w1" {
		t.Errorf("list query = %q as %q", r.query, r.workspaceID)
	}
	if _, err := client.ListDeliveries(ctx, "w1", adminclient.DeliveryFilter{}); err != nil {
		t.Fatal(err)
	}
	if q := s.last(t).query; q != "" {
		t.Errorf("an empty filter sent %q", q)
	}
}

// TestReplayContinuesUntilQueued: a replay the dispatcher queues in parts
// is continued with the cursor it gives, the times going as given, and
// answered once with the total.
func TestReplayContinuesUntilQueued(t *testing.T) {
	t.Parallel()
	part := func(queued int, next string) answer {
		return answer{http.StatusAccepted, `{"replay":{"id":"r1","workspace_id":"w1","since":"2026-11-22T10:00:00Z","until":"2026-11-22T11:00:00Z","event":null,"queued":` +
			strconv.Itoa(queued) + `},"next":` + next + `}`}
	}
	client, s := newClientQueued(t, nil, map[string][]answer{"webhook-dispatcher POST /admin/replays": {
		part(100, `{"replay_id":"r1","from_seq":101,"end_seq":250}`),
		part(100, `{"replay_id":"r1","from_seq":201,"end_seq":250}`),
		part(50, `null`),
	}})
	got, err := client.Replay(ctx, dispatcherapi.ReplayRequest{WorkspaceID: "w1", Since: "2026-11-22T18:00:00+08:00", Until: new("2026-11-22T11:00:00Z")})
	until := "2026-11-22T11:00:00Z"
	want := dispatcherapi.Replay{ID: "r1", WorkspaceID: "w1", Since: "2026-11-22T10:00:00Z", Until: &until, Queued: 250}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Replay = %+v, %v", got, err)
	}
	if len(s.all()) != 3 {
		t.Fatalf("%d calls, want 3", len(s.all()))
	}
	for i, r := range s.all() {
		body := bodyOf(t, r)
		if body["workspace_id"] != "w1" || body["since"] != "2026-11-22T18:00:00+08:00" || body["until"] != "2026-11-22T11:00:00Z" {
			t.Errorf("call %d body = %v", i, body)
		}
		if _, sent := body["event"]; sent {
			t.Errorf("call %d sent an event though none was given: %v", i, body)
		}
		resume, _ := body["resume"].(map[string]any)
		switch {
		case i == 0 && body["resume"] != nil:
			t.Errorf("first call resumed: %v", body)
		case i > 0 && (resume["replay_id"] != "r1" || resume["from_seq"] != float64(1+100*i) || resume["end_seq"] != float64(250)):
			t.Errorf("call %d resume = %v", i, body["resume"])
		}
	}
}

func TestReplayRefusedIsTheDispatchersError(t *testing.T) {
	t.Parallel()
	client, _ := newClient(t, map[string]answer{
		"webhook-dispatcher POST /admin/replays": {http.StatusConflict, `{"code":"webhook_paused","message":"the webhook is paused"}`},
	})
	_, err := client.Replay(ctx, dispatcherapi.ReplayRequest{WorkspaceID: "w1", Since: "2026-11-22T10:00:00Z"})
	if e, ok := adminclient.AsError(err); !ok || e.Status != http.StatusConflict || e.Code != "webhook_paused" {
		t.Fatalf("err = %v", err)
	}
}

func TestFlowCalls(t *testing.T) {
	t.Parallel()
	const flowRefusal = `{"code":"invalid_request","message":"node \"ask\": field \"next\": unknown node \"nowhere\""}`
	client, s := newClientQueued(t, map[string]answer{
		"flow-runner GET /v1/flows":                   {http.StatusOK, `{"flows":[{"id":"f1","name":"Order","description":"d","status":"active","published_version":2,"updated_at":"2026-11-24T04:00:00Z"}]}`},
		"flow-runner POST /admin/flows/f1/deactivate": {http.StatusOK, `{"id":"f1","status":"inactive"}`},
		"flow-runner GET /v1/flows/f1/runs/r1": {http.StatusOK, `{"run":{"id":"r1","flow_id":"f1","status":"failed","current_node_id":"call","nodes_executed":2,"vars":{"a":1},"output":{},"error":{"code":"http_failed","message":"boom"},"started_at":"2026-11-24T04:00:00Z","completed_at":"2026-11-24T04:00:01Z"},` +
			`"node_runs":[{"node_id":"start","node_type":"start","started_at":"2026-11-24T04:00:00Z","duration_ms":1,"input":null,"output":{"x":"y"},"tokens":0,"cost_usd":0},{"node_id":"call","node_type":"http","started_at":"2026-11-24T04:00:00Z","duration_ms":900,"input":{"url":"u"},"output":null,"error":"boom","tokens":0,"cost_usd":0}]}`},
	}, map[string][]answer{"flow-runner POST /admin/workspaces/w1/flows": {
		{http.StatusCreated, `{"id":"f1","published_version":1}`},
		{http.StatusBadRequest, flowRefusal},
	}})
	flows, err := client.ListFlows(ctx, "w1")
	if err != nil || len(flows) != 1 || flows[0] != (flowrunnerapi.Flow{ID: "f1", Name: "Order", Description: "d", Status: "active", PublishedVersion: 2, UpdatedAt: "2026-11-24T04:00:00Z"}) {
		t.Fatalf("ListFlows = %+v, %v", flows, err)
	}
	if r := s.last(t); r.endpoint != "api" || r.workspaceID != "w1" || !r.flowsAPI {
		t.Errorf("list went as %+v: the API endpoint, as the workspace, with flows_api on", r)
	}

	// The document goes byte for byte, spacing and key order kept.
	doc := []byte("{\n  \"name\": \"Order\",   \"nodes\": []\n}")
	published, err := client.PublishFlow(ctx, "w1", "", doc)
	if err != nil || published != (flowrunnerapi.PublishedFlow{ID: "f1", PublishedVersion: 1}) {
		t.Fatalf("PublishFlow = %+v, %v", published, err)
	}
	if r := s.last(t); string(r.body) != string(doc) || r.query != "" || r.contentType != "application/json" || r.endpoint != "admin" {
		t.Errorf("publish sent %+v", r)
	}
	// A refusal keeps the flow-runner's code and message, node and field.
	_, err = client.PublishFlow(ctx, "w1", "f1", doc)
	e, ok := adminclient.AsError(err)
	if !ok || e.Status != http.StatusBadRequest || e.Code != "invalid_request" || e.Message != `node "ask": field "next": unknown node "nowhere"` {
		t.Fatalf("refused publish = %#v", err)
	}
	if q := s.last(t).query; q != "flow_id=f1" {
		t.Errorf("new version query = %q", q)
	}

	if got, err := client.DeactivateFlow(ctx, "", "f1"); err != nil || got != (flowrunnerapi.DeactivatedFlow{ID: "f1", Status: "inactive"}) {
		t.Fatalf("DeactivateFlow = %+v, %v", got, err)
	}
	if q := s.last(t).query; q != "" {
		t.Errorf("platform deactivate query = %q", q)
	}
	if _, err := client.DeactivateFlow(ctx, "w1", "f1"); err != nil {
		t.Fatal(err)
	}
	if q := s.last(t).query; q != "workspace_id=w1" {
		t.Errorf("workspace deactivate query = %q", q)
	}
	trace, err := client.GetRunTrace(ctx, "w1", "f1", "r1")
	if err != nil || trace.Run.Status != "failed" || trace.Run.Error == nil || trace.Run.Error.Code != "http_failed" ||
		trace.Run.CompletedAt == nil || len(trace.NodeRuns) != 2 || trace.NodeRuns[1].Error != "boom" || trace.NodeRuns[1].DurationMS != 900 {
		t.Fatalf("GetRunTrace = %+v, %v", trace, err)
	}
	if r := s.last(t); r.endpoint != "api" || r.workspaceID != "w1" || !r.flowsAPI {
		t.Errorf("trace went as %+v", r)
	}
}

func TestKnowledgeCalls(t *testing.T) {
	t.Parallel()
	const documentJSON = `{"id":"d1","title":"Журам","passages":2,"created_at":"2026-11-24T04:00:00Z"}`
	client, s := newClient(t, map[string]answer{
		"flow-runner POST /admin/workspaces/w1/kb/documents": {http.StatusCreated, `{"document":` + documentJSON + `}`},
		"flow-runner GET /admin/workspaces/w1/kb/documents":  {http.StatusOK, `{"documents":[` + documentJSON + `]}`},
		"flow-runner DELETE /admin/kb/documents/d1":          {http.StatusOK, `{"id":"d1","deleted":true}`},
	})
	want := flowrunnerapi.KnowledgeDocument{ID: "d1", Title: "Журам", Passages: 2, CreatedAt: "2026-11-24T04:00:00Z"}
	if got, err := client.AddDocument(ctx, "w1", "Журам", "# Журам\n\nТекст."); err != nil || got != want {
		t.Fatalf("AddDocument = %+v, %v", got, err)
	}
	if body := bodyOf(t, s.last(t)); !reflect.DeepEqual(body, map[string]any{"title": "Журам", "markdown": "# Журам\n\nТекст."}) {
		t.Errorf("add body = %v", body)
	}
	if got, err := client.ListDocuments(ctx, "w1"); err != nil || len(got) != 1 || got[0] != want {
		t.Fatalf("ListDocuments = %+v, %v", got, err)
	}
	for _, ws := range []string{"", "w1"} {
		got, err := client.DeleteDocument(ctx, "d1", ws)
		if err != nil || got != (flowrunnerapi.DeletedDocument{ID: "d1", Deleted: true}) {
			t.Fatalf("DeleteDocument(%q) = %+v, %v", ws, got, err)
		}
		wantQuery := ""
		if ws != "" {
			wantQuery = "workspace=" + ws
		}
		if q := s.last(t).query; q != wantQuery {
			t.Errorf("delete with workspace %q sent query %q", ws, q)
		}
	}
}
