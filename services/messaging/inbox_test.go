package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/adminclient"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/natsx"
)

// The console inbox's routes: the list with each conversation's chat state
// and newest message, filtered by its badges; a conversation's messages;
// an operator's reply through the one send path; and the core NATS notice
// of every change the inbox shows.

// inboxNotices subscribes to ws's inbox notices and returns them as they
// arrive.
func (h *harness) inboxNotices(t *testing.T, ws string) <-chan messagingapi.InboxChange {
	t.Helper()
	nc, err := natsx.Connect(ctx, h.cfg.Connections, "inbox-test", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	out := make(chan messagingapi.InboxChange, 64)
	_, err = nc.Subscribe(messagingapi.InboxSubject(h.cfg.RPCSubjectPrefix, ws), func(m *nats.Msg) {
		var c messagingapi.InboxChange
		if err := json.Unmarshal(m.Data, &c); err != nil {
			t.Errorf("notice %s: %v", m.Data, err)
		}
		out <- c
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return out
}

// notice waits for the next notice and checks it names conv.
func notice(t *testing.T, notices <-chan messagingapi.InboxChange, ws, conv, what string) {
	t.Helper()
	select {
	case c := <-notices:
		if c.WorkspaceID != ws || c.ConversationID != conv {
			t.Fatalf("%s: notice %+v, want conversation %s of %s", what, c, conv, ws)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no inbox notice", what)
	}
}

func TestInboxListsConversationsWithStateAndNewestMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ops := h.ops()
	ws := uuid.NewString()
	notices := h.inboxNotices(t, ws)
	suggest := h.telegramChannel(ws, "suggest")
	auto := h.telegramChannel(ws, "auto")

	h.deliver(suggest, tgUpdate{UpdateID: 1, MessageID: 1, FromID: 71, First: "Sue", Date: t0.Unix(), Text: "draft me an answer"})
	h.deliver(auto, tgUpdate{UpdateID: 1, MessageID: 1, FromID: 72, First: "<b>Al</b>", Date: t0.Unix() + 5, Text: "hello"})
	all, err := ops.ListInbox(ctx, ws, adminclient.InboxFilter{})
	if err != nil || len(all.Conversations) != 2 || all.NextBefore != nil {
		t.Fatalf("inbox = %+v, %v", all, err)
	}
	newest, older := all.Conversations[0], all.Conversations[1]
	notice(t, notices, ws, older.ID, "customer message on the suggest channel")
	notice(t, notices, ws, newest.ID, "customer message on the auto channel")
	if newest.Contact.Name != "<b>Al</b>" || newest.LastMessage == nil || newest.LastMessage.Content != "hello" || newest.LastMessage.Sender != "contact" ||
		newest.AI != "on" || newest.ReplyWindowEndsAt != nil || newest.WorkspaceID != ws {
		t.Fatalf("newest = %+v (last %+v)", newest, newest.LastMessage)
	}

	// A draft waits on the suggest channel's conversation; the auto one
	// is handed over, tagged and assigned.
	if _, err := ops.DraftSuggestion(ctx, older.ID, messagingapi.DraftSuggestion{WorkspaceID: ws, Key: "k1", RunID: "run-1", Messages: []messagingapi.OutboundMessage{chatText("We can.")}}); err != nil {
		t.Fatal(err)
	}
	notice(t, notices, ws, older.ID, "draft")
	if _, err := ops.HandOver(ctx, ws, newest.ID, "operator: ann"); err != nil {
		t.Fatal(err)
	}
	notice(t, notices, ws, newest.ID, "handover")
	if _, err := ops.Assign(ctx, ws, newest.ID, "ann@example.com"); err != nil {
		t.Fatal(err)
	}
	notice(t, notices, ws, newest.ID, "assign")
	if _, err := ops.AddTags(ctx, ws, newest.ID, []string{"vip", "refund"}); err != nil {
		t.Fatal(err)
	}
	notice(t, notices, ws, newest.ID, "tags")

	only := func(f adminclient.InboxFilter, want ...string) {
		t.Helper()
		page, err := ops.ListInbox(ctx, ws, f)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range page.Conversations {
			got = append(got, c.ID)
		}
		if len(got) != len(want) || (len(want) > 0 && got[0] != want[0]) || (len(want) > 1 && got[1] != want[1]) {
			t.Fatalf("filter %+v = %v, want %v", f, got, want)
		}
	}
	only(adminclient.InboxFilter{SuggestionWaiting: true}, older.ID)
	only(adminclient.InboxFilter{HandedOver: true}, newest.ID)
	only(adminclient.InboxFilter{Assignee: "Ann@Example.com"}, newest.ID)
	only(adminclient.InboxFilter{Assignee: "bob@example.com"})
	only(adminclient.InboxFilter{ChannelID: suggest.ID}, older.ID)
	only(adminclient.InboxFilter{Unanswered: true})
	only(adminclient.InboxFilter{Limit: 1}, newest.ID)
	// Tags come back as stored, and none as an empty list, never null.
	both, err := ops.ListInbox(ctx, ws, adminclient.InboxFilter{})
	if err != nil || len(both.Conversations) != 2 || !slices.Equal(both.Conversations[0].Tags, []string{"vip", "refund"}) ||
		both.Conversations[1].Tags == nil || len(both.Conversations[1].Tags) != 0 {
		t.Fatalf("tags of the inbox = %+v, %v", both, err)
	}
	page, err := ops.ListInbox(ctx, ws, adminclient.InboxFilter{Limit: 1})
	if err != nil || page.NextBefore == nil {
		t.Fatalf("first page of one = %+v, %v", page, err)
	}
	only(adminclient.InboxFilter{Limit: 1, Before: *page.NextBefore}, older.ID)
	if _, err := ops.MarkUnanswered(ctx, ws, older.ID, messagingapi.UnansweredAIUnavailable); err != nil {
		t.Fatal(err)
	}
	notice(t, notices, ws, older.ID, "unanswered")
	only(adminclient.InboxFilter{Unanswered: true}, older.ID)
	st, err := ops.ListInbox(ctx, ws, adminclient.InboxFilter{SuggestionWaiting: true})
	if err != nil || !st.Conversations[0].SuggestionWaiting || st.Conversations[0].Unanswered != "ai_unavailable" {
		t.Fatalf("suggestion waiting = %+v, %v", st, err)
	}

	// Another workspace sees none of them; bad filters are refused in
	// words.
	if other, err := ops.ListInbox(ctx, uuid.NewString(), adminclient.InboxFilter{}); err != nil || len(other.Conversations) != 0 {
		t.Fatalf("other workspace = %+v, %v", other, err)
	}
	for _, q := range []string{"?workspace_id=" + ws + "&unanswered=maybe", "?workspace_id=" + ws + "&channel_id=nope", "?workspace_id=" + ws + "&limit=500", "?workspace_id=x"} {
		if a := h.adminRaw(http.MethodGet, "/admin/conversations"+q, ""); a.status != http.StatusBadRequest {
			t.Fatalf("GET %s = %d %s", q, a.status, a.body)
		}
	}
}

func TestOperatorRepliesGoThroughTheSendPath(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ops := h.ops()
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "suggest")
	h.deliver(ch, tgUpdate{UpdateID: 1, MessageID: 1, FromID: 81, First: "Flo", Date: t0.Unix(), Text: "anyone there?"})
	conv := h.conversations(ws, "").Conversations[0]
	notices := h.inboxNotices(t, ws)

	m, err := ops.SendOperatorMessage(ctx, conv.ID, messagingapi.SendOperatorMessage{WorkspaceID: ws, Operator: "Ann@Example.com",
		Message: messagingapi.OutboundMessage{Type: "text", Text: "Yes, Ann here.", QuickReplies: []string{"Thanks"}}})
	if err != nil || m.Sender != "user" || m.Content != "Yes, Ann here." || m.Metadata["operator"] != "ann@example.com" {
		t.Fatalf("sent = %+v, %v", m, err)
	}
	notice(t, notices, ws, conv.ID, "operator reply")
	if n := h.sendMessages(); n != 1 {
		t.Fatalf("%d sends, want 1", n)
	}
	// The API reads it as sender user; the inbox's own read agrees.
	if api := h.messages(ws, conv.ID, "").Messages; len(api) != 2 || api[0].ID != m.ID || api[0].Sender != "user" {
		t.Fatalf("API messages = %+v", api)
	}
	page, err := ops.ConversationMessages(ctx, ws, conv.ID, "", 1)
	if err != nil || len(page.Messages) != 1 || page.Messages[0].ID != m.ID || page.NextBefore == nil {
		t.Fatalf("inbox messages = %+v, %v", page, err)
	}
	page, err = ops.ConversationMessages(ctx, ws, conv.ID, *page.NextBefore, 1)
	if err != nil || len(page.Messages) != 1 || page.Messages[0].Content != "anyone there?" {
		t.Fatalf("inbox messages, page 2 = %+v, %v", page, err)
	}

	// The platform's refusal, a bad message and another workspace are
	// refused in words, nothing stored.
	h.tg.FailNext("sendMessage", http.StatusForbidden, "Forbidden: bot was blocked by the user")
	_, err = ops.SendOperatorMessage(ctx, conv.ID, messagingapi.SendOperatorMessage{WorkspaceID: ws, Message: chatText("hello?")})
	wantErr(t, err, http.StatusBadGateway, "platform_error", "blocked")
	_, err = ops.SendOperatorMessage(ctx, conv.ID, messagingapi.SendOperatorMessage{WorkspaceID: ws, Message: chatText("")})
	wantErr(t, err, http.StatusBadRequest, "invalid_request", "message.text")
	// A NUL cannot be stored: refused before the platform is called.
	_, err = ops.SendOperatorMessage(ctx, conv.ID, messagingapi.SendOperatorMessage{WorkspaceID: ws, Message: chatText("a\x00b")})
	wantErr(t, err, http.StatusBadRequest, "invalid_request", "NUL character")
	_, err = ops.SendOperatorMessage(ctx, conv.ID, messagingapi.SendOperatorMessage{WorkspaceID: uuid.NewString(), Message: chatText("hi")})
	wantErr(t, err, http.StatusNotFound, "conversation_not_found", "")
	_, err = ops.ConversationMessages(ctx, uuid.NewString(), conv.ID, "", 0)
	wantErr(t, err, http.StatusNotFound, "conversation_not_found", "")
	if got := h.messages(ws, conv.ID, "").Messages; len(got) != 2 {
		t.Fatalf("%d messages stored, want 2", len(got))
	}
}
