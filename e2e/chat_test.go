package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parleyhq/parley/pkg/adminclient"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/pkg/testenv/telegramfake"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// chatSuite is a suite whose flow-runner answers auto channels with the
// fake AI as its provider and guard, and whose channels' bots are one fake
// Bot API.
type chatSuite struct {
	*suite
	ai  *fakeAI
	bot *telegramfake.Server
}

func startChatSuite(t *testing.T, extra ...string) *chatSuite {
	t.Helper()
	ai := newFakeAI(t)
	bot, botAPI := telegramfake.Start(t)
	s := startSuite(t, append(chatEnv(ai, botAPI), extra...)...)
	return &chatSuite{suite: s, ai: ai, bot: bot}
}

// chatEnv is a chat suite's settings: ai as the LLM provider and the
// guard, the fake Bot API at botAPI, and webhooks allowed on loopback.
func chatEnv(ai *fakeAI, botAPI string) []string {
	return []string{
		"TELEGRAM_API_BASE=" + botAPI, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true",
		"LLM_BASE_URL=" + ai.url(), "LLM_API_KEY=" + fakeAIKey, "LLM_MODEL=" + aiModel, "LLM_PRICES=" + aiModel + "=1/2",
		"GUARD_BASE_URL=" + ai.url(), "GUARD_CHECK_INTERVAL=100ms",
	}
}

// chatShop is a workspace of a chatSuite with one Telegram channel (its own
// bot token) in mode, a webhook saved, and the AI limit given.
type chatShop struct {
	s       *chatSuite
	ws, key string
	channel ctlChannel
	token   string
	rcv     *receiver.Receiver
}

func (cs *chatSuite) shop(t *testing.T, mode string, aiLimit int) *chatShop {
	t.Helper()
	return cs.shopWith(t, mode, aiLimit, "developer_api,flows,flow_ai")
}

// shopWith is shop on a plan of the given modules (comma-separated).
func (cs *chatSuite) shopWith(t *testing.T, mode string, aiLimit int, modules string) *chatShop {
	t.Helper()
	ws, key := cs.workspaceWithKey(t, "Chat", modules)
	cs.ctl(t, nil, "workspace", "update", "--workspace", ws, "--ai-limit", fmt.Sprint(aiLimit))
	token := fmt.Sprintf("%d:AAH-chat-%s", 700000000+rand.IntN(99999999), uuid.NewString()[:8])
	sh := &chatShop{s: cs, ws: ws, key: key, token: token, rcv: newReceiver(t)}
	sh.channel = cs.addChannel(t, ws, mode, "--kind", "telegram", "--token", token)
	cs.saveWebhook(t, key, sh.rcv.URL)
	return sh
}

// writes posts a customer's private message as Telegram does.
func (sh *chatShop) writes(t *testing.T, updateID, from int64, text string) {
	t.Helper()
	postUpdate(t, sh.s.messagingURL+"/ingress/telegram/"+sh.channel.ID, sh.channel.Secret, fmt.Sprintf(
		`{"update_id": %d, "message": {"message_id": %d, "date": %d, "from": {"id": %d, "is_bot": false, "first_name": "Ada"},
		  "chat": {"id": %d, "first_name": "Ada", "type": "private"}, "text": %q}}`,
		updateID, updateID, time.Now().Unix(), from, from, text))
}

// sent are the texts the shop's bot sent to chat, in order.
func (sh *chatShop) sent(chat int64) []string {
	var out []string
	for _, c := range sh.s.bot.Calls() {
		if c.Token == sh.token && c.Method == "sendMessage" && fmt.Sprint(c.Params["chat_id"]) == fmt.Sprint(chat) {
			out = append(out, fmt.Sprint(c.Params["text"]))
		}
	}
	return out
}

// waitSent waits until the bot has sent n texts to chat and returns them.
func (sh *chatShop) waitSent(t *testing.T, chat int64, n int) []string {
	t.Helper()
	var got []string
	waitFor(t, 20*time.Second, func() bool { got = sh.sent(chat); return len(got) >= n }, func() string {
		return fmt.Sprintf("the bot sent %q to chat %d; want %d texts", got, chat, n)
	})
	return got
}

// setFlow publishes doc and makes it the channel's chat flow.
func (sh *chatShop) setFlow(t *testing.T, doc string) string {
	t.Helper()
	id := sh.s.publishFlow(t, sh.ws, doc)
	sh.s.ctl(t, nil, "channel", "set-flow", "--channel", sh.channel.ID, "--flow", id)
	return id
}

// conversation is the conversation of Telegram chat from.
func (sh *chatShop) conversation(t *testing.T, from int64) string {
	t.Helper()
	status, _, page := sh.s.api(t, sh.key, http.MethodGet, "/v1/conversations?limit=100", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /v1/conversations = %d %v", status, page)
	}
	for _, c := range page["conversations"].([]any) {
		c := c.(map[string]any)
		if c["contact"].(map[string]any)["sender_id"] == fmt.Sprint(from) {
			return c["id"].(string)
		}
	}
	t.Fatalf("no conversation of chat %d in %v", from, page)
	return ""
}

// messages are the conversation's messages, oldest first.
func (sh *chatShop) messages(t *testing.T, conversationID string) []map[string]any {
	t.Helper()
	status, _, page := sh.s.api(t, sh.key, http.MethodGet, "/v1/conversations/"+conversationID+"/messages?limit=100", nil)
	if status != http.StatusOK {
		t.Fatalf("GET messages = %d %v", status, page)
	}
	var out []map[string]any
	for _, m := range page["messages"].([]any) {
		out = append(out, m.(map[string]any))
	}
	slices.Reverse(out)
	return out
}

func (sh *chatShop) aiUsed(t *testing.T) float64 {
	t.Helper()
	status, _, me := sh.s.api(t, sh.key, http.MethodGet, "/v1/me", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /v1/me = %d %v", status, me)
	}
	return me["plan"].(map[string]any)["ai_used"].(float64)
}

// services is an operator's client of the suite's services.
func (cs *chatSuite) services(t *testing.T) *adminclient.Client {
	t.Helper()
	nc, err := nats.Connect(cs.env.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return adminclient.New(rpc.NewClient(nc, cs.env.RPCPrefix))
}

// orderFlow asks for the order number and answers with it.
const orderFlow = `{
  "name": "Order status", "triggers": ["chat"],
  "nodes": [
    {"id": "start", "type": "start", "next": "ask"},
    {"id": "ask", "type": "question", "text": "Your order number?", "save_as": "order", "next": "say"},
    {"id": "say", "type": "send_message", "message": {"type": "text", "text": "Order {{vars.order}} is on its way, {{vars.contact.name}}."}, "next": "done"},
    {"id": "done", "type": "end"}
  ]
}`

// echoFlow answers each message with its text.
const echoFlow = `{
  "name": "Echo", "triggers": ["chat"],
  "nodes": [
    {"id": "start", "type": "start", "next": "say"},
    {"id": "say", "type": "send_message", "message": {"type": "text", "text": "You said {{vars.message.text}}"}, "next": "done"},
    {"id": "done", "type": "end"}
  ]
}`

// handoverFlow hands every conversation over to operators.
const handoverFlow = `{
  "name": "To a person", "triggers": ["chat"],
  "nodes": [
    {"id": "start", "type": "start", "next": "away"},
    {"id": "away", "type": "handover", "text": "A person will take it from here.", "next": "done"},
    {"id": "done", "type": "end"}
  ]
}`

// TestChatRuns: channels in auto mode answered by chat runs through the
// built binaries: a chat flow's question and its answer, the assistant
// from the knowledge base within the plan's AI replies, order and
// exactly one answer under redelivery, external channels left alone, and
// handover.
func TestChatRuns(t *testing.T) {
	t.Parallel()
	cs := startChatSuite(t)

	t.Run("a chat flow asks and answers", func(t *testing.T) {
		t.Parallel()
		sh := cs.shop(t, "auto", 10)
		flowID := sh.setFlow(t, orderFlow)
		const chat = 9001
		sh.writes(t, 1, chat, "where is my parcel?")
		if got := sh.waitSent(t, chat, 1); got[0] != "Your order number?" {
			t.Fatalf("first answer %q", got)
		}
		sh.writes(t, 2, chat, "A-1234")
		if got := sh.waitSent(t, chat, 2); got[1] != "Order A-1234 is on its way, Ada." {
			t.Fatalf("answers %q", got)
		}
		// Telegram dates a customer's message to the second, so the
		// stored order of a fast exchange is the platform's; each
		// message is checked by its sender. Messaging stores an answer
		// once the platform took it, so the last one may be stored just
		// after the fake Bot API saw it.
		conv := sh.conversation(t, chat)
		var bySender map[string][]string
		var aiMsg map[string]any
		stored := func() bool {
			bySender, aiMsg = map[string][]string{}, nil
			for _, m := range sh.messages(t, conv) {
				bySender[m["sender"].(string)] = append(bySender[m["sender"].(string)], m["content"].(string))
				if m["sender"] == "ai" {
					aiMsg = m
				}
			}
			return slices.Equal(bySender["contact"], []string{"where is my parcel?", "A-1234"}) &&
				slices.Equal(bySender["ai"], []string{"Your order number?", "Order A-1234 is on its way, Ada."})
		}
		waitFor(t, 10*time.Second, stored, func() string { return fmt.Sprintf("stored messages by sender %v", bySender) })
		// The run is the operators': the Developer API does not show it.
		runID, _ := aiMsg["metadata"].(map[string]any)["run_id"].(string)
		if runID == "" {
			t.Fatalf("AI message without its run: %v", aiMsg)
		}
		status, _, body := sh.s.api(t, sh.key, http.MethodGet, "/v1/flows/"+flowID+"/runs/"+runID, nil)
		if status != http.StatusNotFound || body["code"] != "run_not_found" {
			t.Fatalf("public run route for a chat run = %d %v", status, body)
		}
		// The flow-runner stores the run once its last send returned.
		waitFor(t, 10*time.Second, func() bool {
			trace, err := cs.services(t).RunTrace(context.Background(), sh.ws, runID)
			return err == nil && trace.Run.Status == "completed" && len(trace.NodeRuns) > 0
		}, func() string { return "the operator's trace of chat run " + runID + " is not completed" })
		if n := len(sh.rcv.Requests()); n != 0 {
			t.Fatalf("the webhook received %d deliveries from an auto channel", n)
		}
	})

	t.Run("the assistant answers from the knowledge base within the AI limit", func(t *testing.T) {
		t.Parallel()
		sh := cs.shop(t, "auto", 2)
		cs.ctl(t, nil, "kb", "add", "--workspace", sh.ws, "--title", "Store policy",
			"--file", filepath.Join("..", "services", "flow-runner", "internal", "domain", "knowledge", "testdata", "store_policy_en.md"))
		const chat = 9002
		question := "How many days do I have to return an item? " + uuid.NewString()[:8]
		sh.writes(t, 1, chat, question)
		if got := sh.waitSent(t, chat, 1); !strings.HasPrefix(got[0], "Echo: ") || !strings.Contains(got[0], question) {
			t.Fatalf("assistant's answer %q", got)
		}
		asked := cs.ai.chatsWith(question)
		if len(asked) != 1 || !strings.Contains(strings.ToLower(asked[0].Messages[0].Content), "return") {
			t.Fatalf("the LLM was asked %+v; want one call whose system prompt holds the return policy's passage", asked)
		}
		if used := sh.aiUsed(t); used != 1 {
			t.Fatalf("ai_used %v after one answer, want 1", used)
		}
		sh.writes(t, 2, chat, "and exchanges?")
		sh.waitSent(t, chat, 2)
		sh.writes(t, 3, chat, "one more")
		conv := sh.conversation(t, chat)
		services := cs.services(t)
		waitFor(t, 20*time.Second, func() bool {
			st, err := services.Conversation(context.Background(), sh.ws, conv)
			return err == nil && st.Unanswered == messagingapi.UnansweredAILimitReached
		}, func() string { return "the third message was never marked unanswered" })
		if got := sh.sent(chat); len(got) != 2 {
			t.Fatalf("sent %q past the AI limit", got)
		}
		if used := sh.aiUsed(t); used != 2 {
			t.Fatalf("ai_used %v at the limit of 2", used)
		}
	})

	t.Run("messages are answered in order, once each, also when redelivered", func(t *testing.T) {
		t.Parallel()
		sh := cs.shop(t, "auto", 10)
		sh.setFlow(t, echoFlow)
		const chat = 9003
		for i := 1; i <= 5; i++ {
			sh.writes(t, int64(i), chat, fmt.Sprintf("m%d", i))
			if i == 3 {
				sh.writes(t, 3, chat, "m3") // Telegram redelivers the update
			}
		}
		want := []string{"You said m1", "You said m2", "You said m3", "You said m4", "You said m5"}
		if got := sh.waitSent(t, chat, 5); !slices.Equal(got, want) {
			t.Fatalf("answers %q, want %q", got, want)
		}
		cs.chatTurnsSettled(t)
		if got := sh.sent(chat); len(got) != 5 {
			t.Fatalf("answers %q after every turn was settled", got)
		}
	})

	t.Run("an external channel runs no AI", func(t *testing.T) {
		t.Parallel()
		sh := cs.shop(t, "external", 10)
		sh.setFlow(t, echoFlow)
		const chat = 9004
		sh.writes(t, 1, chat, "hello developer")
		waitFor(t, 20*time.Second, func() bool { return len(sh.rcv.Requests()) == 1 }, func() string { return "no webhook delivery" })
		cs.chatTurnsSettled(t)
		if got := sh.sent(chat); len(got) != 0 {
			t.Fatalf("the AI answered an external channel: %q", got)
		}
	})

	t.Run("handover silences the AI and operators still answer", func(t *testing.T) {
		t.Parallel()
		sh := cs.shop(t, "auto", 10)
		sh.setFlow(t, handoverFlow)
		const chat = 9005
		sh.writes(t, 1, chat, "I want a human")
		if got := sh.waitSent(t, chat, 1); got[0] != "A person will take it from here." {
			t.Fatalf("handover said %q", got)
		}
		conv := sh.conversation(t, chat)
		waitFor(t, 20*time.Second, func() bool {
			st, err := cs.services(t).Conversation(context.Background(), sh.ws, conv)
			return err == nil && st.AI == messagingapi.ConversationHandedOver
		}, func() string { return "the conversation was not handed over" })
		sh.writes(t, 2, chat, "hello?")
		status, _, out := sh.s.api(t, sh.key, http.MethodPost, "/v1/messages", map[string]any{"conversation_id": conv, "text": "Hi, I'm Sam."})
		if status != http.StatusCreated {
			t.Fatalf("operator's send = %d %v", status, out)
		}
		if got := sh.waitSent(t, chat, 2); got[1] != "Hi, I'm Sam." {
			t.Fatalf("sent %q", got)
		}
		cs.chatTurnsSettled(t)
		if got := sh.sent(chat); len(got) != 2 {
			t.Fatalf("the AI spoke after the handover: %q", got)
		}
	})
}

// chatTurnsSettled waits until every chat turn published so far has been
// answered and acked: nothing waits in the chat stream.
func (cs *chatSuite) chatTurnsSettled(t testing.TB) {
	t.Helper()
	nc, err := nats.Connect(cs.env.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	chat := natsx.ChatStream(cs.env.Stream)
	var msgs uint64
	waitFor(t, 60*time.Second, func() bool {
		info, err := js.Stream(context.Background(), chat.Name)
		if err != nil {
			return false
		}
		msgs = info.CachedInfo().State.Msgs
		return msgs == 0
	}, func() string { return fmt.Sprintf("%d chat turns still in the stream", msgs) })
}

// TestChatRunsSurviveAKilledFlowRunner: 1,000 conversations write at once
// to an auto channel answered by two flow-runners; one is killed with
// SIGKILL mid-way; every customer message is answered exactly once, as
// counted at the fake Bot API.
func TestChatRunsSurviveAKilledFlowRunner(t *testing.T) {
	t.Parallel()
	cs := startChatSuite(t, "CHAT_ACK_WAIT=2s")
	second := cs.startExtra(t, "flow-runner", "FLOW_RUNNER_ADDR")
	sh := cs.shop(t, "auto", 10)
	sh.setFlow(t, echoFlow)

	const conversations = 1000
	var written atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		sem := make(chan struct{}, 32)
		for i := range conversations {
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				chat := int64(20000 + i)
				postUpdate(t, sh.s.messagingURL+"/ingress/telegram/"+sh.channel.ID, sh.channel.Secret, fmt.Sprintf(
					`{"update_id": %d, "message": {"message_id": 1, "date": %d, "from": {"id": %d, "is_bot": false, "first_name": "C"},
					  "chat": {"id": %d, "first_name": "C", "type": "private"}, "text": "hi %d"}}`, chat, time.Now().Unix(), chat, chat, chat))
				written.Add(1)
			}()
		}
		for range cap(sem) {
			sem <- struct{}{}
		}
	}()
	answered := func() int {
		n := 0
		for _, c := range cs.bot.Calls() {
			if c.Token == sh.token && c.Method == "sendMessage" {
				n++
			}
		}
		return n
	}
	waitFor(t, 60*time.Second, func() bool { return answered() >= conversations/4 }, func() string { return "a quarter was never answered" })
	second.kill(t)
	<-done
	waitFor(t, 120*time.Second, func() bool { return answered() >= conversations }, func() string {
		return fmt.Sprintf("%d of %d customer messages answered", answered(), conversations)
	})
	cs.chatTurnsSettled(t)
	per := map[string]int{}
	for _, c := range cs.bot.Calls() {
		if c.Token == sh.token && c.Method == "sendMessage" {
			per[fmt.Sprint(c.Params["chat_id"])]++
		}
	}
	for chat, n := range per {
		if n != 1 {
			t.Errorf("chat %s answered %d times", chat, n)
		}
	}
	if len(per) != conversations || written.Load() != conversations {
		t.Fatalf("%d chats answered, %d written; want %d", len(per), written.Load(), conversations)
	}
}

// waitFor waits until cond holds, failing t with msg's words if it does
// not within d.
func waitFor(t testing.TB, d time.Duration, cond func() bool, msg func() string) {
	t.Helper()
	wait.For(t, d, "chat", func() error {
		if cond() {
			return nil
		}
		return errors.New(msg())
	})
}
