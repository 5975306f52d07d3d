package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/adminclient"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
)

// The chat-only nodes, suggest mode and refused sends through the built
// binaries (docs/chat.md "The chat-only nodes", "Suggest mode").

// delayFlow says A, waits seconds, then says B.
func delayFlow(seconds int) string {
	return fmt.Sprintf(`{
  "name": "Later", "triggers": ["chat"],
  "nodes": [
    {"id": "start", "type": "start", "next": "a"},
    {"id": "a", "type": "send_message", "message": {"type": "text", "text": "A"}, "next": "wait"},
    {"id": "wait", "type": "delay", "seconds": %d, "next": "b"},
    {"id": "b", "type": "send_message", "message": {"type": "text", "text": "B"}, "next": "done"},
    {"id": "done", "type": "end"}
  ]
}`, seconds)
}

// chatRunsOf are the conversation's runs, newest first.
func (sh *chatShop) chatRunsOf(t *testing.T, services *adminclient.Client, conv string) []string {
	t.Helper()
	page, err := services.ListRuns(context.Background(), sh.ws, adminclient.RunFilter{ConversationID: conv, Limit: 50})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	var ids []string
	for _, r := range page.Runs {
		if r.Kind != "chat" || r.ConversationID != conv {
			t.Fatalf("a run of another kind or conversation: %+v", r)
		}
		ids = append(ids, r.ID)
	}
	return ids
}

func TestChatNodes(t *testing.T) {
	t.Parallel()
	cs := startChatSuite(t)
	services := cs.services(t)
	ctx := context.Background()

	// First, alone: the suite's fake Bot API refuses the next sendMessage,
	// whichever bot sends it.
	t.Run("a send the platform refuses is recorded, and the next message answered", func(t *testing.T) {
		sh := cs.shop(t, "auto", 10)
		sh.setFlow(t, echoFlow)
		const chat = 9101
		cs.bot.FailNext("sendMessage", 403, "Forbidden: bot was blocked by the user")
		sh.writes(t, 1, chat, "m1")
		sh.waitSent(t, chat, 1) // the refused call
		conv := sh.conversation(t, chat)
		var runs []string
		waitFor(t, 20*time.Second, func() bool { runs = sh.chatRunsOf(t, services, conv); return len(runs) == 1 },
			func() string { return fmt.Sprintf("runs %v", runs) })
		trace, err := services.RunTrace(ctx, sh.ws, runs[0])
		if err != nil {
			t.Fatal(err)
		}
		var refusal string
		for _, nr := range trace.NodeRuns {
			if nr.NodeType == "send" {
				refusal = nr.NodeID + ": " + nr.Error
			}
		}
		if trace.Run.Status != "completed" || !strings.HasPrefix(refusal, "say: ") || refusal == "say: " {
			t.Fatalf("the refused send on the run: %q in %+v", refusal, trace)
		}
		if st, err := services.Conversation(ctx, sh.ws, conv); err != nil || st.AI != messagingapi.ConversationAIOn {
			t.Fatalf("after a refused send: %+v, %v", st, err)
		}

		sh.writes(t, 2, chat, "m2")
		if got := sh.waitSent(t, chat, 2); got[1] != "You said m2" {
			t.Fatalf("sent %q", got)
		}
		var ai []string
		waitFor(t, 20*time.Second, func() bool {
			ai = nil
			for _, m := range sh.messages(t, conv) {
				if m["sender"] == "ai" {
					ai = append(ai, m["content"].(string))
				}
			}
			return len(ai) == 1
		}, func() string { return fmt.Sprintf("stored AI messages %q", ai) })
		if ai[0] != "You said m2" {
			t.Fatalf("stored AI messages %q", ai)
		}
	})

	t.Run("suggest: drafted for an operator, sent as edited", func(t *testing.T) {
		t.Parallel()
		sh := cs.shop(t, "suggest", 10)
		const chat = 9102
		question := "Do you ship to Norway? " + fmt.Sprint(time.Now().UnixNano())
		sh.writes(t, 1, chat, question)
		conv := sh.conversation(t, chat)
		var s *messagingapi.Suggestion
		waitFor(t, 20*time.Second, func() bool {
			var err error
			s, err = services.Suggestion(ctx, sh.ws, conv)
			return err == nil && s != nil
		}, func() string { return "no suggestion was drafted" })
		if len(s.Messages) != 1 || s.Messages[0].Text != "Echo: "+question || s.RunID == "" {
			t.Fatalf("suggestion %+v", s)
		}
		cs.chatTurnsSettled(t)
		if got := sh.sent(chat); len(got) != 0 {
			t.Fatalf("a suggest channel's bot sent %q", got)
		}

		edited := "Yes, we ship to Norway in 3 days."
		sent, err := services.SendSuggestion(ctx, conv, messagingapi.SendSuggestion{
			WorkspaceID: sh.ws, Operator: "ann@example.com",
			Messages: []messagingapi.OutboundMessage{{Type: "text", Text: edited}},
		})
		if err != nil || len(sent) != 1 || sent[0].Sender != messagingapi.SenderUser {
			t.Fatalf("SendSuggestion = %+v, %v", sent, err)
		}
		if got := sh.waitSent(t, chat, 1); !slices.Equal(got, []string{edited}) {
			t.Fatalf("the bot sent %q", got)
		}
		bySender := map[string][]string{}
		for _, m := range sh.messages(t, conv) {
			bySender[m["sender"].(string)] = append(bySender[m["sender"].(string)], m["content"].(string))
		}
		if !slices.Equal(bySender["user"], []string{edited}) || len(bySender["ai"]) != 0 {
			t.Fatalf("stored by sender %v", bySender)
		}
		if s, err := services.Suggestion(ctx, sh.ws, conv); err != nil || s != nil {
			t.Fatalf("the suggestion after it was sent: %+v, %v", s, err)
		}
		if used := sh.aiUsed(t); used != 1 {
			t.Fatalf("ai_used %v after one draft", used)
		}
	})

	t.Run("tag, assign, handover and resume_ai", func(t *testing.T) {
		t.Parallel()
		sh := cs.shop(t, "auto", 10)
		sh.setFlow(t, `{
  "name": "Triage", "triggers": ["chat"],
  "nodes": [
    {"id": "start", "type": "start", "next": "t"},
    {"id": "t", "type": "tag", "tags": ["vip", "{{vars.channel.kind}}"], "next": "a"},
    {"id": "a", "type": "assign", "operator": "ann@example.com", "next": "h"},
    {"id": "h", "type": "handover", "text": "Let me check with a colleague.", "next": "r"},
    {"id": "r", "type": "resume_ai", "next": "back"},
    {"id": "back", "type": "send_message", "message": {"type": "text", "text": "I am back: {{vars.message.text}}"}, "next": "done"},
    {"id": "done", "type": "end"}
  ]
}`)
		const chat = 9103
		sh.writes(t, 1, chat, "help")
		if got := sh.waitSent(t, chat, 2); !slices.Equal(got, []string{"Let me check with a colleague.", "I am back: help"}) {
			t.Fatalf("sent %q", got)
		}
		conv := sh.conversation(t, chat)
		var st messagingapi.ConversationState
		waitFor(t, 20*time.Second, func() bool {
			var err error
			st, err = services.Conversation(ctx, sh.ws, conv)
			return err == nil && st.Assignee != ""
		}, func() string { return fmt.Sprintf("state %+v", st) })
		slices.Sort(st.Tags)
		if !slices.Equal(st.Tags, []string{"telegram", "vip"}) || st.Assignee != "ann@example.com" || st.AI != messagingapi.ConversationAIOn {
			t.Fatalf("state %+v", st)
		}
		// The AI is on: the next message is answered.
		sh.writes(t, 2, chat, "again")
		if got := sh.waitSent(t, chat, 4); got[3] != "I am back: again" {
			t.Fatalf("sent %q", got)
		}
	})

	t.Run("delay: B after A, at least its seconds after the message", func(t *testing.T) {
		t.Parallel()
		sh := cs.shop(t, "auto", 10)
		sh.setFlow(t, delayFlow(2))
		const chat = 9104
		wrote := time.Now()
		sh.writes(t, 1, chat, "hi")
		if got := sh.waitSent(t, chat, 1); got[0] != "A" {
			t.Fatalf("sent %q", got)
		}
		got := sh.waitSent(t, chat, 2)
		if took := time.Since(wrote); took < 2*time.Second || !slices.Equal(got, []string{"A", "B"}) {
			t.Fatalf("sent %q %v after the message", got, took)
		}
	})

	t.Run("a node a chat run does not run hands the conversation over", func(t *testing.T) {
		t.Parallel()
		sh := cs.shop(t, "auto", 10)
		sh.setFlow(t, `{
  "name": "Tools", "triggers": ["chat"],
  "nodes": [
    {"id": "start", "type": "start", "next": "hold"},
    {"id": "hold", "type": "send_message", "message": {"type": "text", "text": "One moment"}, "next": "x"},
    {"id": "x", "type": "tool", "next": "done"},
    {"id": "done", "type": "end"}
  ]
}`)
		const chat = 9105
		sh.writes(t, 1, chat, "hi")
		if got := sh.waitSent(t, chat, 1); got[0] != "One moment" {
			t.Fatalf("sent %q", got)
		}
		conv := sh.conversation(t, chat)
		var st messagingapi.ConversationState
		waitFor(t, 20*time.Second, func() bool {
			var err error
			st, err = services.Conversation(ctx, sh.ws, conv)
			return err == nil && st.AI == messagingapi.ConversationHandedOver
		}, func() string { return fmt.Sprintf("not handed over: %+v", st) })
		// The handover is done before the run is stored, in its
		// transaction.
		var runs []string
		waitFor(t, 20*time.Second, func() bool { runs = sh.chatRunsOf(t, services, conv); return len(runs) == 1 },
			func() string { return fmt.Sprintf("runs %v", runs) })
		if !strings.Contains(st.HandoverReason, runs[0]) || !strings.Contains(st.HandoverReason, "node_failed") {
			t.Fatalf("runs %v, handover reason %q", runs, st.HandoverReason)
		}
		trace, err := services.RunTrace(ctx, sh.ws, runs[0])
		if err != nil || trace.Run.Status != "failed" || trace.Run.Error == nil || trace.Run.Error.Code != "node_failed" {
			t.Fatalf("trace %+v, %v", trace, err)
		}
		if nr := trace.NodeRuns[len(trace.NodeRuns)-1]; nr.NodeID != "x" || nr.Error != "node_type_unsupported" {
			t.Fatalf("the tool's node run %+v", nr)
		}
	})
}

// TestChatDelaySurvivesAKilledFlowRunner: a run waiting at a delay when
// its flow-runner dies (SIGKILL) goes on in another, and says B once.
func TestChatDelaySurvivesAKilledFlowRunner(t *testing.T) {
	t.Parallel()
	cs := startChatSuite(t, "CHAT_WAKE_INTERVAL=200ms")
	sh := cs.shop(t, "auto", 10)
	sh.setFlow(t, delayFlow(3))
	const chat = 9201
	wrote := time.Now()
	sh.writes(t, 1, chat, "hi")
	if got := sh.waitSent(t, chat, 1); got[0] != "A" {
		t.Fatalf("sent %q", got)
	}
	// The run is stored waiting at the delay (A is sent just before).
	conv := sh.conversation(t, chat)
	services := cs.services(t)
	waitFor(t, 20*time.Second, func() bool {
		page, err := services.ListRuns(context.Background(), sh.ws, adminclient.RunFilter{ConversationID: conv, Status: "waiting", Limit: 10})
		return err == nil && len(page.Runs) == 1
	}, func() string { return "the run is not stored waiting" })
	cs.procs["flow-runner"].kill(t)
	if took := time.Since(wrote); took >= 3*time.Second {
		t.Fatalf("killed %v after the message: the delay may be over", took)
	}
	cs.startExtra(t, "flow-runner", "FLOW_RUNNER_ADDR", "CHAT_WAKE_INTERVAL=200ms")
	got := sh.waitSent(t, chat, 2)
	if took := time.Since(wrote); took < 3*time.Second || !slices.Equal(got, []string{"A", "B"}) {
		t.Fatalf("sent %q %v after the message", got, took)
	}
	// Once: another round of wakes later, still A and B.
	cs.chatTurnsSettled(t)
	waitFor(t, 20*time.Second, func() bool {
		runs := sh.chatRunsOf(t, services, conv)
		if len(runs) != 1 {
			return false
		}
		tr, err := services.RunTrace(context.Background(), sh.ws, runs[0])
		return err == nil && tr.Run.Status == "completed"
	}, func() string { return "the run did not complete" })
	if got := sh.sent(chat); !slices.Equal(got, []string{"A", "B"}) {
		t.Fatalf("sent %q", got)
	}
}
