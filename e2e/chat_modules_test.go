package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/adminclient"
	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
)

// aiResponseFlow answers with the ai_response node.
const aiResponseFlow = `{
  "name": "Answer", "triggers": ["chat"],
  "nodes": [
    {"id": "start", "type": "start", "next": "ai"},
    {"id": "ai", "type": "ai_response", "next": "done"},
    {"id": "done", "type": "end"}
  ]
}`

// TestChatFollowsThePlansModules: the plan's modules as the gateway keeps
// them decide a chat run through the built binaries (docs/chat.md "Billing
// and limits"): the assistant answers on a plan of developer_api alone (it
// is the plan's AI replies), while a chat flow whose AI node needs the
// missing flow_ai module fails module_inactive without asking the
// provider and hands the conversation over.
func TestChatFollowsThePlansModules(t *testing.T) {
	t.Parallel()
	cs := startChatSuite(t)
	services := cs.services(t)

	t.Run("the assistant answers without flows and flow_ai", func(t *testing.T) {
		t.Parallel()
		sh := cs.shopWith(t, "auto", 5, "developer_api")
		const chat = 9401
		question := "Do you ship abroad? " + uuid.NewString()[:8]
		sh.writes(t, 1, chat, question)
		if got := sh.waitSent(t, chat, 1); !strings.HasPrefix(got[0], "Echo: ") || !strings.Contains(got[0], question) {
			t.Fatalf("the assistant's answer %q", got)
		}
		waitFor(t, 10*time.Second, func() bool { return sh.aiUsed(t) == 1 },
			func() string { return fmt.Sprintf("ai_used %v after one answer, want 1", sh.aiUsed(t)) })
	})

	t.Run("a chat flow's AI node without flow_ai hands the conversation over", func(t *testing.T) {
		t.Parallel()
		sh := cs.shopWith(t, "auto", 5, "developer_api,flows")
		sh.setFlow(t, aiResponseFlow)
		const chat = 9402
		question := "Where is my order? " + uuid.NewString()[:8]
		sh.writes(t, 1, chat, question)
		conv := sh.conversation(t, chat)
		var st messagingapi.ConversationState
		waitFor(t, 20*time.Second, func() bool {
			var err error
			st, err = services.Conversation(context.Background(), sh.ws, conv)
			return err == nil && st.AI == messagingapi.ConversationHandedOver
		}, func() string { return fmt.Sprintf("the conversation was not handed over: %+v", st) })
		// The run is stored once what it did to the conversation is done.
		var trace flowrunnerapi.Trace
		waitFor(t, 20*time.Second, func() bool {
			page, err := services.ListRuns(context.Background(), sh.ws, adminclient.RunFilter{ConversationID: conv, Limit: 10})
			if err != nil || len(page.Runs) != 1 {
				return false
			}
			trace, err = services.RunTrace(context.Background(), sh.ws, page.Runs[0].ID)
			return err == nil && trace.Run.Status == "failed"
		}, func() string { return fmt.Sprintf("no failed chat run: %+v", trace) })
		if trace.Run.Error == nil || trace.Run.Error.Code != "module_inactive" || !strings.Contains(trace.Run.Error.Message, "flow_ai") {
			t.Fatalf("the run failed with %+v; want module_inactive naming flow_ai", trace.Run.Error)
		}
		if asked := cs.ai.chatsWith(question); len(asked) != 0 {
			t.Fatalf("the provider was asked %d times without flow_ai", len(asked))
		}
		cs.chatTurnsSettled(t)
		if got := sh.sent(chat); len(got) != 0 {
			t.Fatalf("sent %q", got)
		}
		if used := sh.aiUsed(t); used != 0 {
			t.Fatalf("ai_used %v", used)
		}
	})
}
