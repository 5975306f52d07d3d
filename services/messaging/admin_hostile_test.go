package main

import (
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	"strings"
	"testing"

	"github.com/google/uuid"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
)

// TestAdminRoutesRefuseHostileInput sends every messaging admin route
// what a careless or hostile operator (or a broken caller) might: ids that
// are no ids (the urn:uuid: form among them), a NUL, 2,000 characters,
// values of the wrong type or past their limits, bodies of the wrong
// shape. Each is refused with its documented status and code in the error
// shape, never a 500, and nothing refused changes the conversation.
func TestAdminRoutesRefuseHostileInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "suggest")
	h.deliver(ch, tgUpdate{UpdateID: 1, MessageID: 1, FromID: 81, First: "Flo", Date: t0.Unix(), Text: "anyone there?"})
	conv := h.conversations(ws, "").Conversations[0].ID
	urn := "urn:uuid:" + conv
	long := strings.Repeat("a", 2000)
	q := "?workspace_id=" + ws
	w := `{"workspace_id":"` + ws + `",`
	type refusal apicheck.Refusal // a local type: its table is unkeyed
	tests := []refusal{
		{"channels of no workspace id", "GET", "/admin/channels?workspace_id=bad", "", 400, "invalid_request"},
		{"channels of a NUL", "GET", "/admin/channels?workspace_id=%00", "", 400, "invalid_request"},
		{"channels of no workspace", "GET", "/admin/channels", "", 400, "invalid_request"},
		{"channel of no id", "GET", "/admin/channels/bad", "", 404, "channel_not_found"},
		{"channel of a URN", "GET", "/admin/channels/urn:uuid:" + ch.ID, "", 404, "channel_not_found"},
		{"channel of a NUL", "GET", "/admin/channels/%00", "", 404, "channel_not_found"},
		{"channel of 2,000 characters", "GET", "/admin/channels/" + long, "", 404, "channel_not_found"},
		{"mode of no channel id", "PATCH", "/admin/channels/bad", `{"ai_mode":"auto"}`, 404, "channel_not_found"},
		{"mode unknown", "PATCH", "/admin/channels/" + ch.ID, `{"ai_mode":"` + long + `"}`, 400, "invalid_request"},
		{"mode a number", "PATCH", "/admin/channels/" + ch.ID, `{"ai_mode":1}`, 400, "invalid_request"},
		{"mode missing", "PATCH", "/admin/channels/" + ch.ID, `{}`, 400, "invalid_request"},
		{"channel for a URN workspace", "POST", "/admin/channels", `{"workspace_id":"urn:uuid:` + ws + `","kind":"telegram","token":"1:x"}`, 400, "invalid_request"},
		{"channel of no kind", "POST", "/admin/channels", w + `"kind":"` + long + `"}`, 400, "invalid_request"},
		{"channel as an array", "POST", "/admin/channels", `[]`, 400, "invalid_request"},
		{"inbox of no workspace id", "GET", "/admin/conversations?workspace_id=bad", "", 400, "invalid_request"},
		{"inbox of a NUL assignee", "GET", "/admin/conversations" + q + "&assignee=%00", "", 400, "invalid_request"},
		{"inbox of a 2,000-character assignee", "GET", "/admin/conversations" + q + "&assignee=" + long, "", 400, "invalid_request"},
		{"inbox of an assignee no operator has", "GET", "/admin/conversations" + q + "&assignee=not%20an%20email", "", 400, "invalid_request"},
		{"inbox of a NUL channel", "GET", "/admin/conversations" + q + "&channel_id=%00", "", 400, "invalid_request"},
		{"inbox of a URN channel", "GET", "/admin/conversations" + q + "&channel_id=urn:uuid:" + ch.ID, "", 400, "invalid_request"},
		{"inbox, limit twice", "GET", "/admin/conversations" + q + "&limit=x&limit=3", "", 400, "invalid_request"},
		{"inbox, before a NUL", "GET", "/admin/conversations" + q + "&before=%00", "", 400, "invalid_request"},
		{"inbox, badge not a boolean", "GET", "/admin/conversations" + q + "&unanswered=maybe", "", 400, "invalid_request"},
		{"conversation of no id", "GET", "/admin/conversations/bad" + q, "", 404, "conversation_not_found"},
		{"conversation of a URN", "GET", "/admin/conversations/" + urn + q, "", 404, "conversation_not_found"},
		{"conversation of a NUL", "GET", "/admin/conversations/%00" + q, "", 404, "conversation_not_found"},
		{"conversation of a NUL workspace", "GET", "/admin/conversations/" + conv + "?workspace_id=%00", "", 400, "invalid_request"},
		{"messages of a URN", "GET", "/admin/conversations/" + urn + "/messages" + q, "", 404, "conversation_not_found"},
		{"messages, limit 0", "GET", "/admin/conversations/" + conv + "/messages" + q + "&limit=0", "", 400, "invalid_request"},
		{"suggestion of a URN", "GET", "/admin/conversations/" + urn + "/suggestion" + q, "", 404, "conversation_not_found"},
		{"discard for no workspace", "DELETE", "/admin/conversations/" + conv + "/suggestion?workspace_id=bad", "", 400, "invalid_request"},
		{"reply to a URN", "POST", "/admin/conversations/" + urn + "/messages", w + `"message":{"type":"text","text":"x"}}`, 404, "conversation_not_found"},
		{"reply as no operator", "POST", "/admin/conversations/" + conv + "/messages", w + `"operator":"` + long + `","message":{"type":"text","text":"x"}}`, 400, "invalid_request"},
		{"reply of no text", "POST", "/admin/conversations/" + conv + "/messages", w + `"message":{"type":"text","text":""}}`, 400, "invalid_request"},
		{"reply a string", "POST", "/admin/conversations/" + conv + "/messages", w + `"message":"x"}`, 400, "invalid_request"},
		{"reply too long", "POST", "/admin/conversations/" + conv + "/messages", w + `"message":{"type":"text","text":"` + strings.Repeat("x", 100000) + `"}}`, 400, "invalid_request"},
		{"reply with a NUL", "POST", "/admin/conversations/" + conv + "/messages", w + `"message":{"type":"text","text":"a\u0000b"}}`, 400, "invalid_request"},
		{"hand over for too long a reason", "POST", "/admin/conversations/" + conv + "/handover", w + `"reason":"` + strings.Repeat("r", 100000) + `"}`, 400, "invalid_request"},
		{"unanswered for no reason", "POST", "/admin/conversations/" + conv + "/unanswered", w + `"reason":"` + long + `"}`, 400, "invalid_request"},
		{"a tag of 2,000", "POST", "/admin/conversations/" + conv + "/tags", w + `"tags":["` + long + `"]}`, 400, "invalid_request"},
		{"tags a string", "POST", "/admin/conversations/" + conv + "/tags", w + `"tags":"x"}`, 400, "invalid_request"},
		{"assign no email", "PUT", "/admin/conversations/" + conv + "/assignee", w + `"assignee":"` + long + `"}`, 400, "invalid_request"},
		{"assign a number", "PUT", "/admin/conversations/" + conv + "/assignee", w + `"assignee":5}`, 400, "invalid_request"},
		{"assign a URN", "PUT", "/admin/conversations/" + urn + "/assignee", w + `"assignee":"a@b.co"}`, 404, "conversation_not_found"},
		{"resume for no workspace", "POST", "/admin/conversations/" + conv + "/resume-ai", `{"workspace_id":"bad"}`, 400, "invalid_request"},
		{"resume, two bodies", "POST", "/admin/conversations/" + conv + "/resume-ai", w + `"x":1}{}`, 400, "invalid_request"},
		{"send the suggestion as no operator", "POST", "/admin/conversations/" + conv + "/suggestion/send", w + `"operator":"` + long + `"}`, 400, "invalid_request"},
		{"draft with no key", "PUT", "/admin/conversations/" + conv + "/suggestion", w + `"key":"","run_id":"r","messages":[]}`, 400, "invalid_request"},
		{"draft with a 2,000-character key", "PUT", "/admin/conversations/" + conv + "/suggestion", w + `"key":"` + long + `","run_id":"r","messages":[{"type":"text","text":"x"}]}`, 400, "invalid_request"},
		{"AI send with a 2,000-character key", "POST", "/admin/conversations/" + conv + "/ai-messages", w + `"key":"` + long + `","run_id":"r","message":{"type":"text","text":"x"}}`, 400, "invalid_request"},
	}
	for _, tt := range tests {
		a := h.adminRaw(tt.Method, tt.Path, tt.Body)
		apicheck.CheckRefusal(t, apicheck.Refusal(tt), a.status, a.body)
	}
	// Nothing refused changed the conversation or sent anything.
	if n := h.sendMessages(); n != 0 {
		t.Errorf("%d sends after the refusals, want 0", n)
	}
	var got messagingapi.ConversationStateAnswer
	if err := h.admin("GET", "/admin/conversations/"+conv+q, nil, &got); err != nil || got.Conversation.Assignee != "" || len(got.Conversation.Tags) != 0 || got.Conversation.AI != "on" {
		t.Errorf("conversation after the refusals: %+v, %v", got.Conversation, err)
	}
}
