package adminclient_test

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/parleyhq/parley/pkg/adminclient"
	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
)

// TestChatFlowsAndChatRuns: a channel (messaging) and its chat flow, set,
// read and cleared, and a run of any kind and a conversation's runs (the
// flow-runner), each read from the service's admin endpoint.
func TestChatFlowsAndChatRuns(t *testing.T) {
	t.Parallel()
	chatFlow := `{"chat_flow":{"workspace_id":"w1","channel_id":"c1","flow_id":"f1"}}`
	client, s := newClient(t, map[string]answer{
		"messaging GET /admin/channels/c1":                {http.StatusOK, `{"channel":{"id":"c1","workspace_id":"w1","kind":"webchat","external_id":"","ai_mode":"auto","status":"active","secret":"s","created_at":"2026-11-24T04:00:00Z"}}`},
		"messaging GET /admin/channels/c9":                {http.StatusNotFound, `{"code":"channel_not_found","message":"channel not found"}`},
		"flow-runner PUT /admin/channels/c1/chat-flow":    {http.StatusOK, chatFlow},
		"flow-runner GET /admin/channels/c1/chat-flow":    {http.StatusOK, chatFlow},
		"flow-runner DELETE /admin/channels/c1/chat-flow": {http.StatusOK, `{"chat_flow":{"workspace_id":"w1","channel_id":"c1","flow_id":""}}`},
		"flow-runner GET /admin/workspaces/w1/runs/r1": {http.StatusOK, `{"run":{"id":"r1","flow_id":"","status":"completed","current_node_id":"answer","nodes_executed":1,` +
			`"vars":{},"output":{},"started_at":"2026-11-24T04:00:00Z","completed_at":"2026-11-24T04:00:01Z"},"node_runs":[]}`},
		"flow-runner GET /admin/workspaces/w1/runs": {http.StatusOK, `{"runs":[{"id":"r1","kind":"chat","flow_id":"","flow_version":0,"conversation_id":"v1",` +
			`"status":"completed","nodes_executed":1,"started_at":"2026-11-24T04:00:00Z","completed_at":"2026-11-24T04:00:01Z","duration_ms":1000,` +
			`"usage":{"tokens":0,"cost_usd":0,"billable_units":1}}],"next_before":null}`},
	})

	ch, err := client.Channel(ctx, "c1")
	if err != nil || ch.ID != "c1" || ch.WorkspaceID != "w1" {
		t.Fatalf("Channel = %+v, %v", ch, err)
	}
	if r := s.last(t); r.service != "messaging" || r.endpoint != "admin" || r.method != http.MethodGet || r.query != "" {
		t.Errorf("the channel went as %+v", r)
	}
	if _, err := client.Channel(ctx, "c9"); err == nil {
		t.Fatal("an unknown channel was found")
	} else if e, ok := adminclient.AsError(err); !ok || e.Code != "channel_not_found" {
		t.Fatalf("an unknown channel = %#v", err)
	}

	want := flowrunnerapi.ChatFlow{WorkspaceID: "w1", ChannelID: "c1", FlowID: "f1"}
	if cf, err := client.SetChatFlow(ctx, "w1", "c1", "f1"); err != nil || cf != want {
		t.Fatalf("SetChatFlow = %+v, %v", cf, err)
	}
	if r := s.last(t); r.endpoint != "admin" || r.method != http.MethodPut ||
		!reflect.DeepEqual(bodyOf(t, r), map[string]any{"workspace_id": "w1", "channel_id": "c1", "flow_id": "f1"}) {
		t.Errorf("the set went as %+v", r)
	}
	if cf, err := client.ChatFlow(ctx, "w1", "c1"); err != nil || cf != want {
		t.Fatalf("ChatFlow = %+v, %v", cf, err)
	}
	if r := s.last(t); r.method != http.MethodGet || r.query != "workspace_id=w1" {
		t.Errorf("the read went as %+v", r)
	}
	if cf, err := client.ClearChatFlow(ctx, "w1", "c1"); err != nil || cf.FlowID != "" || cf.ChannelID != "c1" {
		t.Fatalf("ClearChatFlow = %+v, %v", cf, err)
	}
	if r := s.last(t); r.method != http.MethodDelete || r.query != "workspace_id=w1" || len(r.body) != 0 {
		t.Errorf("the clear went as %+v", r)
	}

	tr, err := client.RunTrace(ctx, "w1", "r1")
	if err != nil || tr.Run.ID != "r1" || tr.Run.FlowID != "" || tr.NodeRuns == nil {
		t.Fatalf("RunTrace = %+v, %v", tr, err)
	}
	if r := s.last(t); r.endpoint != "admin" || r.workspaceID != "" || r.query != "" {
		t.Errorf("the trace went as %+v: the admin endpoint, the workspace in the path", r)
	}
	page, err := client.ListRuns(ctx, "w1", adminclient.RunFilter{ConversationID: "v1"})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].Kind != flowrunnerapi.RunKindChat || page.Runs[0].ConversationID != "v1" {
		t.Fatalf("ListRuns = %+v, %v", page, err)
	}
	if r := s.last(t); r.query != "conversation_id=v1" {
		t.Errorf("the conversation's runs went as %+v", r)
	}
}
