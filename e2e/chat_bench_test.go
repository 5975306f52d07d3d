package e2e

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/testenv/telegramfake"
)

// BenchmarkChatReply is issue 22's bench (make bench): a customer's
// Telegram message at the ingress to the built-in AI's answer at the
// platform, through the built binaries on the real servers, beside the
// ingress-to-webhook path measured in the same run on the same suite.
//
// One suite (gateway, messaging, webhook-dispatcher, flow-runner) runs
// with an LLM provider and safety guard that answer at once (fakeAI, in
// this process: "Echo: " and the customer's text) and a fake Telegram Bot
// API in this process that sees every answer. It serves -chat.workspaces
// workspaces whose Telegram channel is in auto mode without a chat flow,
// so the assistant answers each message (docs/chat.md "The assistant": a
// knowledge-base search, one LLM call, the guard, the send), with an AI
// limit no run reaches; and as many workspaces with a channel in external
// mode and a webhook, as BenchmarkPipeline has them. The load is
// BenchmarkPipeline's: real Telegram Updates posted to messaging's
// ingress, message n from customer n mod -chat.customers (a chat of its
// own, so that answering a conversation's turns in order serializes
// little), closed-loop senders (-pipeline.senders) for the maximum and an
// open-loop schedule for the paced runs. A message's latency runs from its
// ingress POST's 2xx to the fake Bot API receiving the sendMessage that
// answers it: the customer's chat id and the text holding the message's
// number. Every customer has written once before the first measured run
// (their conversation exists).
//
// Exactly one answer: every message of a run must be answered, once, in
// its customer's chat by its workspace's bot, and the chat stream must
// then hold no turn (each acknowledged after its answer was stored); an
// answer twice, or to a message never sent, fails the benchmark, also
// when it comes after its run.
//
// The sub-benchmarks, in this order:
//
//   - webhook-max: -chat.messages messages to the external channels, as
//     BenchmarkPipeline's pipeline-max (messages/s, p50-ms, p99-ms): the
//     ingress-to-webhook maximum the chat maximum is a ratio of;
//   - paced-<rate>/instances=1: -chat.paced messages to the auto channels
//     at -chat.rate a second, open loop: p50-ms, p99-ms, achieved-msg/s,
//     ingress-p50-ms and ingress-p99-ms (POST to 2xx);
//   - max/instances=1: -chat.messages messages from closed-loop senders:
//     messages/s (first POST to the last answer), p50-ms and p99-ms
//     (mostly queueing, at saturation), ratio-to-webhook-max;
//   - paced-<rate>/instances=N and max/instances=N: the same with N-1
//     more flow-runners (startExtra; -chat.instances) sharing the chat
//     turns.
//
// Each run also reports the CPU time per message of each side
// (messaging-cpu-ms, dispatcher-cpu-ms, flow-runner-cpu-ms, bench-cpu-ms,
// postgres-cpu-ms, nats-cpu-ms) and the peaks of messaging's outbox and of
// the stream behind it (outbox-peak; stream-peak: the chat turns not yet
// acknowledged, for the chat runs). Every run sends its own fixed number
// of messages whatever b.N is, and each takes over a second with the
// default sizes, so `make bench` runs each once; run it alone with
// -benchtime 1x. The services keep every setting at its default except
// those of the fakes (LLM_*, GUARD_*, TELEGRAM_API_BASE) and
// WEBHOOK_ALLOW_PRIVATE_TARGETS=true.
//
//	cd e2e && go test -run '^$' -bench '^BenchmarkChatReply$' -benchtime 1x .
var (
	chatBenchMessages   = flag.Int("chat.messages", 3000, "messages of each maximum run of BenchmarkChatReply (webhook-max included)")
	chatBenchPaced      = flag.Int("chat.paced", 1000, "messages of each paced run of BenchmarkChatReply")
	chatBenchRate       = flag.Int("chat.rate", 100, "messages per second of BenchmarkChatReply's paced runs")
	chatBenchWorkspaces = flag.Int("chat.workspaces", 10, "workspaces of each path of BenchmarkChatReply (auto channels; external channels with webhooks)")
	chatBenchCustomers  = flag.Int("chat.customers", 1000, "distinct Telegram customers of each path of BenchmarkChatReply")
	chatBenchInstances  = flag.Int("chat.instances", 3, "flow-runners of BenchmarkChatReply's second paced and maximum runs")
)

// chatConsumer is the durable consumer of chat turns the flow-runners
// share (CHAT_CONSUMER, which the suite leaves at its default).
const chatConsumer = "flow-runner-chat"

func BenchmarkChatReply(b *testing.B) {
	// Everything is started here, on the parent benchmark, because what a
	// sub-benchmark registers for cleanup goes after each of its runs.
	cb := newChatBench(b)
	rate, instances := *chatBenchRate, *chatBenchInstances

	var webhookMax float64
	b.Run("webhook-max", func(b *testing.B) { webhookMax, _ = cb.hooks.maxOf(b, *chatBenchMessages) })
	chatMax := func(b *testing.B) {
		before := cb.turnHandlings()
		chatRate, _ := cb.chat.maxOf(b, *chatBenchMessages)
		if webhookMax > 0 {
			b.ReportMetric(chatRate/webhookMax, "ratio-to-webhook-max")
		}
		b.ReportMetric((cb.turnHandlings()-before)/float64(*chatBenchMessages), "handlings/msg")
	}
	b.Run(fmt.Sprintf("paced-%d/instances=1", rate), cb.paced)
	b.Run("max/instances=1", chatMax)
	cb.scaleOut(b, instances)
	b.Run(fmt.Sprintf("paced-%d/instances=%d", rate, instances), cb.paced)
	b.Run(fmt.Sprintf("max/instances=%d", instances), chatMax)

	fmt.Printf("loadavg-end: %s\n", loadAverage())
	// An answer that came twice after its run was checked fails here.
	if err := cb.chat.rcv.err(); err != nil {
		b.Fatal(err)
	}
	if err := cb.hooks.rcv.err(); err != nil {
		b.Fatal(err)
	}
}

// chatBench is the running suite with its two paths.
type chatBench struct {
	// chat is the auto channels' path; its receiver files the answers
	// the fake Bot API sees (answers).
	chat *pipelineBench
	// hooks is the external channels' path to the webhooks.
	hooks   *pipelineBench
	answers *chatAnswers
}

func newChatBench(b *testing.B) *chatBench {
	b.Helper()
	nws, customers := *chatBenchWorkspaces, *chatBenchCustomers
	if nws < 1 || customers < nws || *chatBenchMessages < 1 || *chatBenchPaced < 1 || *chatBenchRate < 1 || *chatBenchInstances < 1 {
		b.Fatalf("-chat.workspaces %d, -chat.customers %d, -chat.messages %d, -chat.paced %d, -chat.rate %d, -chat.instances %d: want workspaces >= 1, customers >= workspaces, the others >= 1",
			nws, customers, *chatBenchMessages, *chatBenchPaced, *chatBenchRate, *chatBenchInstances)
	}
	fmt.Printf("loadavg-start: %s\n", loadAverage())
	fmt.Printf("chat-setup: %d workspaces and %d customers a path, %d senders, maximum runs %d messages, paced %d messages at %d/s, %d flow-runners in the second runs, services with %s\n",
		nws, customers, *pipelineSenders, *chatBenchMessages, *chatBenchPaced, *chatBenchRate, *chatBenchInstances, servicesSetting())

	ai := newFakeAI(b)
	ai.forget.Store(true)
	answers := &chatAnswers{tokens: map[string]int{}}
	bot := httptest.NewServer(&telegramfake.Server{NoRecord: true, OnCall: answers.seen})
	b.Cleanup(bot.Close)
	s := startSuite(b, benchServices(chatEnv(ai, bot.URL)...)...)

	cb := &chatBench{hooks: newWebhookBench(b, s, nws, customers), answers: answers}
	chat := newBenchOn(b, s, nws, customers)
	chat.dispatchers = []*proc{s.procs["webhook-dispatcher"]}
	chat.runners = []*proc{s.procs["flow-runner"]}
	chat.queue = pipelineQueue{stream: natsx.ChatStream(s.env.Stream).Name, consumer: chatConsumer}
	chat.confirm = cb.turnsSettled
	tokens := map[string]int{}
	for i := range nws {
		w := pipelineWorkspace{}
		w.id, w.key = s.workspaceWithKey(b, fmt.Sprintf("Chat %d", i), "developer_api")
		s.ctl(b, nil, "workspace", "update", "--workspace", w.id, "--ai-limit", "1000000000")
		bot := fmt.Sprintf("7002%05d:AAH-chat-bench", i)
		ch := s.addChannel(b, w.id, "auto", "--kind", "telegram", "--token", bot)
		w.channel, w.token = ch.ID, ch.Secret
		chat.spaces = append(chat.spaces, w)
		chat.rcv.workspaces[i] = w.id
		tokens[bot] = i
	}
	cb.chat = chat
	answers.start(chat, tokens)

	// Outside any timing: connections open, every channel and webhook
	// used, and each chat customer's conversation made by a first message
	// (its contact and conversation are created once, not per answer).
	cb.hooks.warm(b)
	run := chat.newRun(customers, nil)
	if err := chat.sendClosed(run, *pipelineSenders); err != nil {
		b.Fatal(err)
	}
	if err := chat.settle(run); err != nil {
		b.Fatal(err)
	}
	return cb
}

// paced is a paced run on the auto channels.
func (cb *chatBench) paced(b *testing.B) {
	before, handled := cb.runsByInstance(), cb.turnHandlings()
	cb.chat.pacedRun(b, *chatBenchPaced, *chatBenchRate, nil)
	cb.printShares(b, before)
	b.ReportMetric((cb.turnHandlings()-handled)/float64(*chatBenchPaced), "handlings/msg")
}

// chatTurnHandlings matches each outcome's line of parley_flow_runner_chat_turns_total.
var chatTurnHandlings = regexp.MustCompile(`(?m)^parley_flow_runner_chat_turns_total\{outcome="[a-z_]+"\} (\S+)$`)

// turnHandlings is how many times the flow-runners have handled a chat
// turn so far, whatever became of it: more than one a message is turns
// handed back to wait (behind an earlier turn of their conversation, or
// its answer on another instance) or retried.
func (cb *chatBench) turnHandlings() float64 {
	total := 0.0
	for _, p := range cb.chat.runners {
		resp, err := http.Get("http://" + p.addr + "/metrics")
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, m := range chatTurnHandlings.FindAllSubmatch(body, -1) {
			n, _ := strconv.ParseFloat(string(m[1]), 64)
			total += n
		}
	}
	return total
}

// scaleOut starts instances-1 more flow-runners and sends a few messages
// per workspace through the chat path, outside any timing.
func (cb *chatBench) scaleOut(b *testing.B, instances int) {
	b.Helper()
	for range instances - 1 {
		cb.chat.runners = append(cb.chat.runners, cb.chat.s.startExtra(b, "flow-runner", "FLOW_RUNNER_ADDR"))
	}
	cb.chat.warm(b)
}

// runsByInstance are the runs each flow-runner has completed so far.
func (cb *chatBench) runsByInstance() []float64 {
	out := make([]float64, len(cb.chat.runners))
	for i, p := range cb.chat.runners {
		out[i] = metric(p.addr, completedRuns)
	}
	return out
}

// printShares prints the runs each flow-runner completed since before:
// with more than one, each takes a share of the turns.
func (cb *chatBench) printShares(b *testing.B, before []float64) {
	after := cb.runsByInstance()
	shares := make([]string, len(after))
	for i := range after {
		shares[i] = strconv.FormatFloat(after[i]-before[i], 'f', 0, 64)
	}
	// Printed, not logged: a benchmark's log is cut at ten lines.
	fmt.Printf("runs-by-instance %s: %s\n", b.Name(), strings.Join(shares, " "))
}

// turnsSettled waits until the chat stream holds no turn: every turn
// published so far was answered and acknowledged (the stream is a work
// queue).
func (cb *chatBench) turnsSettled(*pipelineRun) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := cb.chat.js.Stream(ctx, natsx.ChatStream(cb.chat.s.env.Stream).Name)
	if err != nil {
		return err
	}
	for {
		info, err := stream.Info(ctx)
		if err != nil {
			return fmt.Errorf("chat stream: %w", err)
		}
		if info.State.Msgs == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d chat turns still in the stream 30 s after the last answer", info.State.Msgs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// chatAnswers files the answers the fake Bot API sees with the chat
// path's receiver: a sendMessage by workspace i's bot to customer c's
// chat, whose text is the fake LLM's echo of message n, is message n's
// answer when n is from c in workspace i.
type chatAnswers struct {
	mu     sync.RWMutex
	chat   *pipelineBench
	tokens map[string]int // bot token -> workspace index
}

func (a *chatAnswers) start(chat *pipelineBench, tokens map[string]int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.chat, a.tokens = chat, tokens
}

// echoPrefix is how the fake LLM's answer to message n begins, followed
// by n (pipelineBench.update's text).
const echoPrefix = "Echo: Order #"

// seen is the fake Bot API's OnCall.
func (a *chatAnswers) seen(call telegramfake.Call) {
	at := time.Now()
	if call.Method != "sendMessage" {
		return
	}
	a.mu.RLock()
	chat, ws, known := a.chat, 0, false
	if chat != nil {
		ws, known = a.tokens[call.Token]
	}
	a.mu.RUnlock()
	if !known {
		return // not a bot of the chat path's
	}
	text, _ := call.Params["text"].(string)
	rest, ok := strings.CutPrefix(text, echoPrefix)
	number, _, _ := strings.Cut(rest, ":")
	n, err := strconv.ParseInt(number, 10, 64)
	if !ok || err != nil {
		chat.rcv.fail("bot of workspace %d sent %q to chat %v: not an answer to a message", ws, text, call.Params["chat_id"])
		return
	}
	// JSON's numbers decode as float64, exact for Telegram's ids.
	if want := chat.customerOf(n); call.Params["chat_id"] != float64(want) || chat.workspaceOf(n) != ws {
		chat.rcv.fail("message %d answered in chat %v by the bot of workspace %d; want chat %d, workspace %d", n, call.Params["chat_id"], ws, want, chat.workspaceOf(n))
		return
	}
	chat.rcv.arrived("answer to message "+number, at, n)
}
