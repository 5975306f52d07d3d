package adminclient_test

import (
	"net/http"
	"reflect"
	"testing"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
)

// TestConversationCalls: each call of the chat state, the AI's sends and
// the suggestion reaches its messaging admin route with the workspace in
// the body or the query, and decodes the answer.
func TestConversationCalls(t *testing.T) {
	t.Parallel()
	const stateJSON = `{"conversation":{"id":"v1","platform":"telegram","channel_id":"c1",` +
		`"contact":{"id":"k1","sender_id":"42","name":"Ada","profile_pic":""},` +
		`"last_message_at":"2026-11-24T04:00:00Z","created_at":"2026-11-24T03:00:00Z","workspace_id":"w1",` +
		`"ai":"handed_over","handover_reason":"flow","unanswered":"","tags":["vip"],"assignee":"ann@example.com","suggestion_waiting":true}}`
	const messageJSON = `{"id":"m1","conversation_id":"v1","sender":"ai","type":"text","content":"Hi","metadata":{"run_id":"r1"},"external_id":"7","created_at":"2026-11-24T04:00:01Z"}`
	const suggestionJSON = `{"suggestion":{"run_id":"r1","messages":[{"type":"text","text":"Hi","quick_replies":["Yes"]}],"created_at":"2026-11-24T04:00:02Z"}}`
	client, s := newClient(t, map[string]answer{
		"messaging GET /admin/conversations/v1":                  {http.StatusOK, stateJSON},
		"messaging POST /admin/conversations/v1/ai-messages":     {http.StatusCreated, `{"message":` + messageJSON + `}`},
		"messaging PUT /admin/conversations/v1/suggestion":       {http.StatusOK, suggestionJSON},
		"messaging GET /admin/conversations/v1/suggestion":       {http.StatusOK, `{"suggestion":null}`},
		"messaging POST /admin/conversations/v1/suggestion/send": {http.StatusCreated, `{"messages":[` + messageJSON + `]}`},
		"messaging DELETE /admin/conversations/v1/suggestion":    {http.StatusOK, stateJSON},
		"messaging POST /admin/conversations/v1/handover":        {http.StatusOK, stateJSON},
		"messaging POST /admin/conversations/v1/resume-ai":       {http.StatusOK, stateJSON},
		"messaging POST /admin/conversations/v1/tags":            {http.StatusOK, stateJSON},
		"messaging PUT /admin/conversations/v1/assignee":         {http.StatusOK, stateJSON},
		"messaging POST /admin/conversations/v1/unanswered":      {http.StatusOK, stateJSON},
	})
	wantState := messagingapi.ConversationState{
		Conversation: messagingapi.Conversation{
			ID: "v1", Platform: "telegram", ChannelID: "c1", Contact: messagingapi.Contact{ID: "k1", SenderID: "42", Name: "Ada"},
			LastMessageAt: "2026-11-24T04:00:00Z", CreatedAt: "2026-11-24T03:00:00Z",
		},
		WorkspaceID: "w1", AI: messagingapi.ConversationHandedOver, HandoverReason: "flow",
		Tags: []string{"vip"}, Assignee: "ann@example.com", SuggestionWaiting: true,
	}
	wantQuery := func(what string) {
		t.Helper()
		if r := s.last(t); r.query != "workspace_id=w1" || len(r.body) != 0 {
			t.Errorf("%s sent query %q and body %q", what, r.query, r.body)
		}
	}
	wantBody := func(what string, want map[string]any) {
		t.Helper()
		if body := bodyOf(t, s.last(t)); !reflect.DeepEqual(body, want) {
			t.Errorf("%s body = %v, want %v", what, body, want)
		}
	}

	got, err := client.Conversation(ctx, "w1", "v1")
	if err != nil || !reflect.DeepEqual(got, wantState) {
		t.Fatalf("Conversation = %+v, %v", got, err)
	}
	wantQuery("Conversation")

	msg, err := client.SendAIMessage(ctx, "v1", messagingapi.SendAIMessage{WorkspaceID: "w1", Key: "t1:1", RunID: "r1",
		Message: messagingapi.OutboundMessage{Type: "text", Text: "Hi"}})
	if err != nil || msg.ID != "m1" || msg.Sender != messagingapi.SenderAI || msg.Metadata["run_id"] != "r1" {
		t.Fatalf("SendAIMessage = %+v, %v", msg, err)
	}
	wantBody("SendAIMessage", map[string]any{"workspace_id": "w1", "key": "t1:1", "run_id": "r1", "message": map[string]any{"type": "text", "text": "Hi"}})

	drafted, err := client.DraftSuggestion(ctx, "v1", messagingapi.DraftSuggestion{WorkspaceID: "w1", Key: "t1:1", RunID: "r1",
		Messages: []messagingapi.OutboundMessage{{Type: "text", Text: "Hi", QuickReplies: []string{"Yes"}}}})
	if err != nil || drafted.RunID != "r1" || len(drafted.Messages) != 1 || drafted.Messages[0].QuickReplies[0] != "Yes" {
		t.Fatalf("DraftSuggestion = %+v, %v", drafted, err)
	}
	if r := s.last(t); r.method != http.MethodPut {
		t.Errorf("draft went as %s", r.method)
	}

	if waiting, err := client.Suggestion(ctx, "w1", "v1"); err != nil || waiting != nil {
		t.Fatalf("Suggestion = %+v, %v; want none", waiting, err)
	}
	wantQuery("Suggestion")

	sent, err := client.SendSuggestion(ctx, "v1", messagingapi.SendSuggestion{WorkspaceID: "w1", Operator: "ann@example.com"})
	if err != nil || len(sent) != 1 || sent[0].ID != "m1" {
		t.Fatalf("SendSuggestion = %+v, %v", sent, err)
	}
	wantBody("SendSuggestion as drafted", map[string]any{"workspace_id": "w1", "operator": "ann@example.com"})

	if got, err := client.DiscardSuggestion(ctx, "w1", "v1", nil); err != nil || !reflect.DeepEqual(got, wantState) {
		t.Fatalf("DiscardSuggestion = %+v, %v", got, err)
	}
	wantQuery("DiscardSuggestion")
	if _, err := client.DiscardSuggestion(ctx, "w1", "v1", &messagingapi.SuggestionSeen{RunID: "r1", CreatedAt: "2026-11-29T10:00:00.123456Z"}); err != nil {
		t.Fatal(err)
	}
	if r := s.last(t); r.query != "created_at=2026-11-29T10%3A00%3A00.123456Z&run_id=r1&workspace_id=w1" {
		t.Errorf("DiscardSuggestion of a draft seen sent query %q", r.query)
	}

	changes := []struct {
		name string
		call func() (messagingapi.ConversationState, error)
		body map[string]any
	}{
		{"HandOver", func() (messagingapi.ConversationState, error) { return client.HandOver(ctx, "w1", "v1", "flow") },
			map[string]any{"workspace_id": "w1", "reason": "flow"}},
		{"ResumeAI", func() (messagingapi.ConversationState, error) { return client.ResumeAI(ctx, "w1", "v1") },
			map[string]any{"workspace_id": "w1"}},
		{"AddTags", func() (messagingapi.ConversationState, error) {
			return client.AddTags(ctx, "w1", "v1", []string{"vip", "late"})
		}, map[string]any{"workspace_id": "w1", "tags": []any{"vip", "late"}}},
		// An empty assignee is sent: it unassigns.
		{"Assign none", func() (messagingapi.ConversationState, error) { return client.Assign(ctx, "w1", "v1", "") },
			map[string]any{"workspace_id": "w1", "assignee": ""}},
		{"MarkUnanswered", func() (messagingapi.ConversationState, error) {
			return client.MarkUnanswered(ctx, "w1", "v1", messagingapi.UnansweredAILimitReached)
		}, map[string]any{"workspace_id": "w1", "reason": "ai_limit_reached"}},
	}
	for _, c := range changes {
		got, err := c.call()
		if err != nil || !reflect.DeepEqual(got, wantState) {
			t.Fatalf("%s = %+v, %v", c.name, got, err)
		}
		wantBody(c.name, c.body)
	}
	for _, r := range s.all() {
		if r.service != "messaging" || r.endpoint != "admin" || r.workspaceID != "" {
			t.Errorf("request %+v", r)
		}
	}
}
