package run

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
)

var testChat = Chat{ConversationID: "conv1", ChannelID: "ch1", ChannelKind: "telegram", ContactID: "ct1", ContactName: "Ada", WorkspaceName: "Demo Shop"}

func typed(text string) CustomerMessage {
	return CustomerMessage{ID: "m1", Text: text, Type: "text"}
}

// chatInvoke starts a chat run of doc answering msg, with the flow_ai
// module on, as workspace ws1.
func chatInvoke(t *testing.T, e *Engine, def *flow.Definition, msg CustomerMessage) *Result {
	t.Helper()
	return e.Invoke(context.Background(), def, Invocation{RunID: "r1", FlowID: "f1", Version: 1, WorkspaceID: "ws1",
		Input: map[string]any{"ignored": true}, Modules: Modules{FlowAI: true}, Chat: &ChatInvocation{Chat: testChat, Message: msg}})
}

func passing() Guard { return guardFunc(func(string) (bool, error) { return false, nil }) }

// actions is the call's actions in a line each: kind, node, and what it
// carries.
func actions(res *Result) []string {
	var out []string
	for _, a := range res.Actions {
		s := string(a.Kind) + " " + a.NodeID
		switch a.Kind {
		case ActionSend:
			s += " " + a.Message.Text
			if a.Message.GuardBlocked {
				s += " [blocked]"
			}
		case ActionHandover:
			s += " " + a.Reason
		case ActionTag:
			s += " " + strings.Join(a.Tags, ",")
		case ActionAssign:
			s += " " + a.Operator
		}
		out = append(out, s)
	}
	return out
}

func wantActions(t *testing.T, res *Result, want ...string) {
	t.Helper()
	if got := actions(res); !reflect.DeepEqual(got, want) {
		t.Fatalf("actions\n got %q\nwant %q", got, want)
	}
}

func wantStatus(t *testing.T, r *Run, want Status) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("status %s (error %+v), want %s", r.Status, r.Error, want)
	}
}

func nodeRun(t *testing.T, res *Result, id string) NodeRun {
	t.Helper()
	for _, nr := range res.NodeRuns {
		if nr.NodeID == id {
			return nr
		}
	}
	t.Fatalf("no node run %q in %+v", id, res.NodeRuns)
	return NodeRun{}
}

func TestChatRunVars(t *testing.T) {
	t.Parallel()
	def := parse(t, nodes("e", `{"id": "e", "type": "end", "output": {"message": "{{vars.message}}", "contact": "{{vars.contact}}",
		"conversation": "{{vars.conversation_id}}", "channel": "{{vars.channel}}", "input": "{{vars.input}}"}}`))
	res := chatInvoke(t, &Engine{}, def, CustomerMessage{ID: "m1", Text: "Yes please", Type: "postback", Postback: "YES"})
	r := res.Run
	wantStatus(t, r, StatusCompleted)
	want := map[string]any{
		"message":      map[string]any{"id": "m1", "text": "Yes please", "type": "postback", "postback": "YES"},
		"contact":      map[string]any{"id": "ct1", "name": "Ada"},
		"conversation": "conv1",
		"channel":      map[string]any{"id": "ch1", "kind": "telegram"},
		"input":        map[string]any{"text": "Yes please"},
	}
	if !reflect.DeepEqual(r.Output, want) {
		t.Fatalf("output %v\nwant   %v", r.Output, want)
	}
	if r.Chat == nil || *r.Chat != testChat || r.FlowID != "f1" || r.WakeAt != nil {
		t.Fatalf("run %+v", r)
	}
	if res.Actions == nil || len(res.Actions) != 0 {
		t.Fatalf("a chat run's call lists its actions, none here: %#v", res.Actions)
	}
	// A typed message has no postback.
	res = chatInvoke(t, &Engine{}, def, typed("hi"))
	if m := res.Run.Output["message"].(map[string]any); len(m) != 3 || m["postback"] != nil {
		t.Fatalf("typed message %v", m)
	}
}

// TestChatActionsInOrder: every message and every conversation change is
// an action, in the order the nodes ran; a headless run lists none.
func TestChatActionsInOrder(t *testing.T) {
	t.Parallel()
	def := parse(t, nodes("hi",
		`{"id": "hi", "type": "send_message", "message": {"type": "text", "text": "Hi {{vars.contact.name}}"}, "next": "t"}`,
		`{"id": "t", "type": "tag", "tags": ["vip", "{{vars.channel.kind}}", "VIP"], "next": "l"}`,
		`{"id": "l", "type": "llm", "prompt": "{{vars.message.text}}", "send": true, "next": "a"}`,
		`{"id": "a", "type": "assign", "operator": " ann@example.com ", "next": "h"}`,
		`{"id": "h", "type": "handover", "text": "A person will answer, {{vars.contact.name}}", "next": "h2"}`,
		`{"id": "h2", "type": "handover", "next": "r"}`,
		`{"id": "r", "type": "resume_ai", "next": "e"}`,
		`{"id": "e", "type": "end"}`))
	rec := &recorder{}
	e := &Engine{LLM: answer("Sure"), Quota: &fakeQuota{limit: 1}, Guard: passing()}
	res := e.Invoke(context.Background(), def, Invocation{RunID: "r1", WorkspaceID: "ws1", Modules: Modules{FlowAI: true}, Observer: rec,
		Chat: &ChatInvocation{Chat: testChat, Message: typed("help")}})
	wantStatus(t, res.Run, StatusCompleted)
	wantActions(t, res,
		"send hi Hi Ada",
		"tag t vip,telegram",
		"send l Sure",
		"assign a ann@example.com",
		"send h A person will answer, Ada",
		"handover h handover node h",
		"handover h2 handover node h2",
		"resume_ai r")
	// The messages are the run's as in a headless run, each action's a copy.
	if len(res.Messages) != 3 || res.Messages[2].Text != "A person will answer, Ada" || len(res.Run.Messages) != 3 {
		t.Fatalf("messages %+v", res.Messages)
	}
	res.Actions[0].Message.Text = "changed"
	if res.Messages[0].Text != "Hi Ada" {
		t.Fatal("an action's message is the run's message itself")
	}
	if got := nodeRun(t, res, "t").Output; !reflect.DeepEqual(got, map[string]any{"tags": []any{"vip", "telegram"}}) {
		t.Fatalf("tag output %v", got)
	}

	headless := invoke(t, &Engine{}, parse(t, nodes("hi", `{"id": "hi", "type": "send_message", "message": {"type": "text", "text": "Hi"}}`)), nil)
	if headless.Actions != nil || len(headless.Messages) != 1 {
		t.Fatalf("headless actions %#v", headless.Actions)
	}
}

func TestChatNodeFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, node, wantIn string
	}{
		{"tag renders empty", `{"id": "x", "type": "tag", "tags": ["ok", "{{vars.message.postback ?? ''}}"]}`, "tags[1]: a tag is 1 to 50 characters; this one is empty"},
		{"tag renders too long", `{"id": "x", "type": "tag", "tag": "{{vars.message.text}}"}`, "tags[0]: a tag is 1 to 50 characters; this one has 60"},
		{"assign renders no email", `{"id": "x", "type": "assign", "operator": "{{vars.contact.name}}"}`, `operator: "Ada" is not one plain email address`},
		{"handover text error", `{"id": "x", "type": "handover", "text": "{{ int(vars.contact.name) }}"}`, "text:"},
		{"delay until renders no time", `{"id": "x", "type": "delay", "until": "{{vars.message.text}}"}`, "is not an RFC 3339 time"},
		{"delay in a loop body", `{"id": "x", "type": "loop", "over": "[1]", "as": "i", "body": "d"}, {"id": "d", "type": "delay", "seconds": 5}`, "a delay inside a loop body cannot wait"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := chatInvoke(t, &Engine{}, parse(t, nodes("x", tt.node)), typed(strings.Repeat("x", 60)))
			r := res.Run
			wantStatus(t, r, StatusFailed)
			if r.Error.Code != CodeNodeFailed || !strings.Contains(r.Error.Message, tt.wantIn) {
				t.Fatalf("error %+v, want node_failed with %q", r.Error, tt.wantIn)
			}
			if len(res.Actions) != 0 || r.WakeAt != nil {
				t.Fatalf("a failed node acts: %q, wake %v", actions(res), r.WakeAt)
			}
		})
	}
}

// TestChatCalledFlowRunsNoChatOnlyNode: in a chat run too, a called flow
// may hold no node a headless run cannot run (docs/flows.md "call_flow"):
// the call_flow node fails, and the called flow's handover, tag or delay
// does nothing to the conversation.
func TestChatCalledFlowRunsNoChatOnlyNode(t *testing.T) {
	t.Parallel()
	for _, node := range []string{
		`{"id": "n", "type": "handover", "text": "Bye"}`,
		`{"id": "n", "type": "tag", "tag": "vip"}`,
		`{"id": "n", "type": "delay", "seconds": 5}`,
	} {
		t.Run(node, func(t *testing.T) {
			t.Parallel()
			child := parse(t, nodes("n", node))
			def := parse(t, nodes("c", `{"id": "c", "type": "call_flow", "flow_id": "f2"}`))
			res := chatInvoke(t, &Engine{Flows: flowMap{"f2": child}}, def, typed("hi"))
			r := res.Run
			wantStatus(t, r, StatusFailed)
			if r.Error.Code != CodeNodeFailed || !strings.Contains(r.Error.Message, `node "c" (call_flow)`) || !strings.Contains(r.Error.Message, "a chat-only node") {
				t.Fatalf("error %+v", r.Error)
			}
			if len(res.Actions) != 0 || r.WakeAt != nil {
				t.Fatalf("the called flow acted: %q, wake %v", actions(res), r.WakeAt)
			}
		})
	}
}

// TestChatUnsupportedNodes: a chat run fails at a node it does not run,
// the trace saying node_type_unsupported; what came before stays listed.
func TestChatUnsupportedNodes(t *testing.T) {
	t.Parallel()
	for _, node := range []string{
		`{"id": "x", "type": "tool", "next": "e"}`,
		`{"id": "x", "type": "order", "next": "e"}`,
		`{"id": "x", "type": "submit_form", "next": "e"}`,
		`{"id": "x", "type": "action", "action": "send_email", "next": "e"}`,
	} {
		t.Run(node, func(t *testing.T) {
			t.Parallel()
			def := parse(t, nodes("hi", `{"id": "hi", "type": "send_message", "message": {"text": "One moment"}, "next": "x"}`, node, `{"id": "e", "type": "end"}`))
			res := chatInvoke(t, &Engine{}, def, typed("hi"))
			r := res.Run
			wantStatus(t, r, StatusFailed)
			if r.Error.Code != CodeNodeFailed || !strings.Contains(r.Error.Message, `node "x"`) || !strings.Contains(r.Error.Message, NodeErrTypeUnsupported) {
				t.Fatalf("error %+v", r.Error)
			}
			if nr := nodeRun(t, res, "x"); nr.Error != "node_type_unsupported" {
				t.Fatalf("node run error %q", nr.Error)
			}
			wantActions(t, res, "send hi One moment")
			if r.CurrentNodeID != "x" || r.CompletedAt == nil {
				t.Fatalf("run %+v", r)
			}
		})
	}
	// The actions a headless run may run (set_variable, webhook_call), a
	// chat run runs too.
	def := parse(t, nodes("s",
		`{"id": "s", "type": "action", "action": "set_variable", "name": "a", "value": "vars.message.text + '!'", "next": "e"}`,
		`{"id": "e", "type": "end", "output": {"a": "{{vars.a}}"}}`))
	if r := chatInvoke(t, &Engine{}, def, typed("hi")).Run; r.Status != StatusCompleted || r.Output["a"] != "hi!" {
		t.Fatalf("set_variable in a chat run: %s %+v %v", r.Status, r.Error, r.Output)
	}
	var called string
	e := &Engine{HTTP: httpFunc(func(_ context.Context, req HTTPRequest) (HTTPResponse, error) {
		called = req.Method + " " + req.URL
		return HTTPResponse{Status: 204}, nil
	})}
	def = parse(t, nodes("w",
		`{"id": "w", "type": "action", "action": "webhook_call", "url": "https://example.com/hook", "body": {"text": "{{vars.message.text}}"}, "next": "e"}`,
		`{"id": "e", "type": "end"}`))
	if r := chatInvoke(t, e, def, typed("hi")).Run; r.Status != StatusCompleted || called != "POST https://example.com/hook" {
		t.Fatalf("webhook_call in a chat run: %s %+v, called %q", r.Status, r.Error, called)
	}
}

// TestChatRunBudget: a chat run has the run budget of an invoke
// (RUN_BUDGET_NODES): past it the run fails run_budget_exceeded at the
// node it did not run.
func TestChatRunBudget(t *testing.T) {
	t.Parallel()
	def := parse(t, nodes("a",
		`{"id": "a", "type": "send_message", "message": {"text": "One"}, "next": "b"}`,
		`{"id": "b", "type": "send_message", "message": {"text": "Two"}, "next": "c"}`,
		`{"id": "c", "type": "send_message", "message": {"text": "Three"}}`))
	if r := chatInvoke(t, &Engine{Budget: Budget{Nodes: 4}}, def, typed("hi")).Run; r.Status != StatusCompleted {
		t.Fatalf("4 nodes within a budget of 4: %s %+v", r.Status, r.Error)
	}
	r := chatInvoke(t, &Engine{Budget: Budget{Nodes: 3}}, def, typed("hi")).Run
	wantStatus(t, r, StatusFailed)
	if r.Error.Code != CodeBudgetExceeded || !strings.Contains(r.Error.Message, `node "c" was not run`) {
		t.Fatalf("error %+v", r.Error)
	}
}

// TestChatDelayWaitsAndWakes: a delay waits with WakeAt; a customer's
// message meanwhile is refused, the wake goes on.
func TestChatDelayWaitsAndWakes(t *testing.T) {
	t.Parallel()
	clk := newClock()
	e := &Engine{Now: clk.Now}
	def := parse(t, nodes("d",
		`{"id": "d", "type": "delay", "seconds": 90, "next": "after"}`,
		`{"id": "after", "type": "send_message", "message": {"text": "Still there, {{vars.contact.name}}?"}, "next": "t"}`,
		`{"id": "t", "type": "tag", "tag": "followed-up"}`))
	res := chatInvoke(t, e, def, typed("hi"))
	r := res.Run
	wantStatus(t, r, StatusWaiting)
	wantWake := clk.Now().Add(90 * time.Second)
	if at, ok := r.Wake(); !ok || !at.Equal(wantWake) || r.CurrentNodeID != "d" || r.CompletedAt != nil {
		t.Fatalf("waiting run %+v, wake %v %v", r, at, ok)
	}
	if len(res.Actions) != 0 {
		t.Fatalf("actions %q", actions(res))
	}
	if got := nodeRun(t, res, "d"); !reflect.DeepEqual(got.Input, map[string]any{"seconds": float64(90)}) ||
		!reflect.DeepEqual(got.Output, map[string]any{"wake_at": wantWake.Format(time.RFC3339Nano)}) {
		t.Fatalf("delay's trace %+v", got)
	}

	before := snapshot(r)
	msg := typed("hello?")
	if _, err := e.Continue(context.Background(), def, r, Continuation{Text: "hello?", Message: &msg}); !errors.Is(err, ErrWaitingAtDelay) {
		t.Fatalf("a message to a delayed run: %v", err)
	}
	if !reflect.DeepEqual(snapshot(r), before) {
		t.Fatal("a refused continue changed the run")
	}

	clk.Advance(90 * time.Second)
	res, err := e.Continue(context.Background(), def, r, Continuation{Wake: true})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, r, StatusCompleted)
	wantActions(t, res, "send after Still there, Ada?", "tag t followed-up")
	if r.WakeAt != nil || r.CompletedAt == nil || r.NodesExecuted != 5 {
		t.Fatalf("woken run %+v", r)
	}
	if res.NodeRuns[0].NodeID != "d" || res.NodeRuns[0].Error != "" {
		t.Fatalf("the wake's node run %+v", res.NodeRuns[0])
	}
	if _, err := e.Continue(context.Background(), def, r, Continuation{Wake: true}); !errors.Is(err, ErrNotWaiting) {
		t.Fatalf("a second wake: %v", err)
	}
}

// snapshot is what a refused continue must not change.
func snapshot(r *Run) Run {
	c := *r
	c.Vars = map[string]any{}
	for k, v := range r.Vars {
		c.Vars[k] = v
	}
	return c
}

func TestChatDelayUntil(t *testing.T) {
	t.Parallel()
	clk := newClock()
	e := &Engine{Now: clk.Now}
	def := parse(t, nodes("d",
		`{"id": "d", "type": "delay", "until": "{{vars.message.text}}", "next": "e"}`,
		`{"id": "e", "type": "end", "output": {"done": true}}`))

	res := chatInvoke(t, e, def, typed("2026-11-24T09:30:00+01:00"))
	want := time.Date(2026, 11, 24, 8, 30, 0, 0, time.UTC)
	if at, ok := res.Run.Wake(); !ok || !at.Equal(want) || at.Location() != time.UTC {
		t.Fatalf("until: %s wake %v", res.Run.Status, res.Run.WakeAt)
	}
	// A time already past goes on at once.
	res = chatInvoke(t, e, def, typed("2026-11-23T11:59:59Z"))
	wantStatus(t, res.Run, StatusCompleted)
	if res.Run.WakeAt != nil || nodeRun(t, res, "d").Output.(map[string]any)["waited"] != false {
		t.Fatalf("past until %+v", res.Run)
	}
}

// TestWakeAtAQuestion: a wake of a run waiting for an answer is refused
// and changes nothing; a message is not for a delay either way.
func TestWakeAtAQuestion(t *testing.T) {
	t.Parallel()
	def := parse(t, nodes("q", `{"id": "q", "type": "question", "text": "Name?", "save_as": "name"}`))
	r := chatInvoke(t, &Engine{}, def, typed("hi")).Run
	wantStatus(t, r, StatusWaiting)
	before := snapshot(r)
	if _, err := (&Engine{}).Continue(context.Background(), def, r, Continuation{Wake: true}); !errors.Is(err, ErrWaitingAtQuestion) {
		t.Fatalf("wake at a question: %v", err)
	}
	if !reflect.DeepEqual(snapshot(r), before) || r.WakeAt != nil {
		t.Fatal("a refused wake changed the run")
	}
	headless := invoke(t, &Engine{}, def, nil).Run
	if _, err := (&Engine{}).Continue(context.Background(), def, headless, Continuation{Wake: true}); !errors.Is(err, ErrWaitingAtQuestion) {
		t.Fatalf("wake of a headless run: %v", err)
	}
}

// TestChatQuestionContinue: the answer (a tap on a button here) becomes
// vars.message, its text the question's save_as.
func TestChatQuestionContinue(t *testing.T) {
	t.Parallel()
	def := parse(t, nodes("q",
		`{"id": "q", "type": "question", "text": "Track an order, {{vars.contact.name}}?", "quick_replies": ["Yes", "No"], "save_as": "choice", "next": "c"}`,
		`{"id": "c", "type": "condition", "if": "vars.message.postback == 'YES'", "then": "yes", "else": "no"}`,
		`{"id": "yes", "type": "send_message", "message": {"text": "You said {{vars.choice}} ({{vars.message.id}}); you first wrote {{vars.input.text}}"}}`,
		`{"id": "no", "type": "handover"}`))
	e := &Engine{}
	res := chatInvoke(t, e, def, typed("where is my parcel"))
	r := res.Run
	wantStatus(t, r, StatusWaiting)
	wantActions(t, res, "send q Track an order, Ada?")
	if res.Actions[0].Message.Type != flow.MessageQuickReplies || !reflect.DeepEqual(res.Actions[0].Message.QuickReplies, []string{"Yes", "No"}) {
		t.Fatalf("question message %+v", res.Actions[0].Message)
	}
	tap := CustomerMessage{ID: "m2", Text: "Yes", Type: "postback", Postback: "YES"}
	res, err := e.Continue(context.Background(), def, r, Continuation{Text: "Yes", Message: &tap})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, r, StatusCompleted)
	wantActions(t, res, "send yes You said Yes (m2); you first wrote where is my parcel")
	if r.Vars["message"].(map[string]any)["postback"] != "YES" || r.Vars["choice"] != "Yes" {
		t.Fatalf("vars %v", r.Vars)
	}

	// A typed answer without a postback takes the other branch; Text may
	// be left to the message.
	r = chatInvoke(t, e, def, typed("hi")).Run
	typedNo := typed("No")
	res, err = e.Continue(context.Background(), def, r, Continuation{Message: &typedNo})
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, res, "handover no handover node no")
	if r.Vars["choice"] != "No" {
		t.Fatalf("vars %v", r.Vars)
	}
}

func TestAIResponse(t *testing.T) {
	t.Parallel()
	var searched []string
	kb := kbFunc(func(ws, query string, topK int) ([]Passage, error) {
		searched = append(searched, ws+"|"+query+"|"+string(rune('0'+topK)))
		return []Passage{{Title: "Returns", Text: "30 days to return an item.", Score: 2}, {Title: "Refunds", Text: "Refunds take 5 days.", Score: 1}}, nil
	})
	llm := answer("You have 30 days.")
	q := &fakeQuota{limit: 5}
	e := &Engine{LLM: llm, Quota: q, Guard: passing(), Knowledge: kb}
	res := chatInvoke(t, e, parse(t, nodes("ai", `{"id": "ai", "type": "ai_response", "next": "t"}`, `{"id": "t", "type": "tag", "tag": "answered"}`)),
		typed("How long to return?"))
	r := res.Run
	wantStatus(t, r, StatusCompleted)
	wantActions(t, res, "send ai You have 30 days.", "tag t answered")
	if !reflect.DeepEqual(searched, []string{"ws1|How long to return?|3"}) {
		t.Fatalf("searches %q", searched)
	}
	if len(llm.reqs) != 1 {
		t.Fatalf("requests %+v", llm.reqs)
	}
	req := llm.reqs[0]
	system := req.Messages[0].Content
	if len(req.Messages) != 2 || req.Messages[0].Role != RoleSystem || req.Messages[1] != (ChatMessage{Role: RoleUser, Content: "How long to return?"}) ||
		!strings.Contains(system, "customer assistant of Demo Shop") || !strings.Contains(system, "[1] Returns\n30 days to return an item.") ||
		!strings.Contains(system, "[2] Refunds\nRefunds take 5 days.") || req.JSON || req.Model != "" {
		t.Fatalf("request %+v", req)
	}
	wantUsage := Usage{Tokens: 10, CostUSD: 0.25, BillableUnits: 1}
	if res.Usage != wantUsage || r.Usage != wantUsage || q.used != 1 || q.refunds != 0 {
		t.Fatalf("usage %+v, quota used %d refunds %d", res.Usage, q.used, q.refunds)
	}
	nr := nodeRun(t, res, "ai")
	in := nr.Input.(map[string]any)
	if in["text"] != "How long to return?" || in["top_k"] != float64(3) || len(in["passages"].([]any)) != 2 || len(in["messages"].([]any)) != 2 {
		t.Fatalf("trace input %v", in)
	}
	if out := nr.Output.(map[string]any); out["text"] != "You have 30 days." || out["model"] != "m" || out["guard_blocked"] != nil || nr.Tokens != 10 || nr.Error != "" {
		t.Fatalf("trace %+v", nr)
	}
}

func TestAIResponseOwnPromptWithoutKnowledge(t *testing.T) {
	t.Parallel()
	llm := answer("Hello Ada")
	kb := kbFunc(func(string, string, int) ([]Passage, error) { t.Error("searched without knowledge"); return nil, nil })
	e := &Engine{LLM: llm, Quota: &fakeQuota{limit: 1}, Guard: passing(), Knowledge: kb}
	res := chatInvoke(t, e, parse(t, nodes("ai", `{"id": "ai", "type": "ai_response", "system": "Greet {{vars.contact.name}} warmly.", "knowledge": false}`)), typed("hey"))
	wantStatus(t, res.Run, StatusCompleted)
	if got := llm.reqs[0].Messages[0].Content; got != "Greet Ada warmly." {
		t.Fatalf("system %q", got)
	}
	if in := nodeRun(t, res, "ai").Input.(map[string]any); in["passages"] != nil || in["top_k"] != nil {
		t.Fatalf("trace input %v", in)
	}
	// With knowledge and none found, the prompt says so.
	none := kbFunc(func(string, string, int) ([]Passage, error) { return []Passage{}, nil })
	llm = answer("I do not know.")
	e = &Engine{LLM: llm, Quota: &fakeQuota{limit: 1}, Guard: passing(), Knowledge: none}
	wantStatus(t, chatInvoke(t, e, parse(t, nodes("ai", `{"id": "ai", "type": "ai_response", "top_k": 10}`)), typed("?")).Run, StatusCompleted)
	if got := llm.reqs[0].Messages[0].Content; !strings.HasSuffix(got, "Knowledge base passages: none matches the message.") {
		t.Fatalf("system %q", got)
	}
}

// TestAIResponseFallback: when no answer comes, the fallback is sent,
// unbilled, and the run goes on; without one the node fails. Either way
// the unit goes back.
func TestAIResponseFallback(t *testing.T) {
	t.Parallel()
	down := &fakeLLM{reply: func(ChatRequest) (ChatReply, error) { return ChatReply{}, errors.New("status 503") }}
	empty := answer("  ")
	kbDown := kbFunc(func(string, string, int) ([]Passage, error) { return nil, errors.New("database unreachable") })
	kbUp := kbFunc(func(string, string, int) ([]Passage, error) { return nil, nil })
	tests := []struct {
		name    string
		llm     LLM
		kb      KnowledgeBase
		wantWhy string
	}{
		{"provider fails", down, kbUp, "provider: status 503"},
		{"empty answer", empty, kbUp, "the provider's answer is empty"},
		{"search fails", answer("unused"), kbDown, "search: database unreachable"},
		{"no knowledge base", answer("unused"), nil, "no knowledge base is configured"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := &fakeQuota{limit: 1}
			e := &Engine{LLM: tt.llm, Quota: q, Guard: passing(), Knowledge: tt.kb}
			res := chatInvoke(t, e, parse(t, nodes("ai",
				`{"id": "ai", "type": "ai_response", "fallback": "Sorry {{vars.contact.name}}, a person will answer.", "next": "h"}`,
				`{"id": "h", "type": "handover"}`)), typed("help"))
			wantStatus(t, res.Run, StatusCompleted)
			wantActions(t, res, "send ai Sorry Ada, a person will answer.", "handover h handover node h")
			if res.Usage.BillableUnits != 0 || q.used != 0 || q.refunds != 1 {
				t.Fatalf("usage %+v quota used %d refunds %d", res.Usage, q.used, q.refunds)
			}
			if nr := nodeRun(t, res, "ai"); nr.Error != tt.wantWhy || nr.Output.(map[string]any)["fallback"] != true {
				t.Fatalf("node run %+v", nr)
			}

			q = &fakeQuota{limit: 1}
			e = &Engine{LLM: tt.llm, Quota: q, Guard: passing(), Knowledge: tt.kb}
			res = chatInvoke(t, e, parse(t, nodes("ai", `{"id": "ai", "type": "ai_response", "next": "h"}`, `{"id": "h", "type": "handover"}`)), typed("help"))
			r := res.Run
			wantStatus(t, r, StatusFailed)
			if r.Error.Code != CodeNodeFailed || !strings.Contains(r.Error.Message, tt.wantWhy) || len(res.Actions) != 0 {
				t.Fatalf("error %+v actions %q", r.Error, actions(res))
			}
			if r.Usage.BillableUnits != 0 || q.used != 0 || q.refunds != 1 {
				t.Fatalf("usage %+v quota used %d refunds %d", r.Usage, q.used, q.refunds)
			}
		})
	}
}

// TestAIResponseGuard: an answer the guard blocks, or could not check, is
// the guard's fallback, sent and billed like llm's.
func TestAIResponseGuard(t *testing.T) {
	t.Parallel()
	for name, g := range map[string]Guard{
		"flagged":    guardFunc(func(text string) (bool, error) { return text == "bad words", nil }),
		"guard down": guardFunc(func(string) (bool, error) { return false, errors.New("connection refused") }),
		"no guard":   nil,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			q := &fakeQuota{limit: 1}
			e := &Engine{LLM: answer("bad words"), Quota: q, Guard: g, GuardFallback: "Sorry.", Knowledge: kbFunc(func(string, string, int) ([]Passage, error) { return nil, nil })}
			res := chatInvoke(t, e, parse(t, nodes("ai", `{"id": "ai", "type": "ai_response", "fallback": "not this one"}`)), typed("say it"))
			wantStatus(t, res.Run, StatusCompleted)
			wantActions(t, res, "send ai Sorry. [blocked]")
			wantNowhere(t, res, "bad words")
			out := nodeRun(t, res, "ai").Output.(map[string]any)
			if out["guard_blocked"] != true || out["text"] != "Sorry." || res.Usage.BillableUnits != 1 || q.used != 1 {
				t.Fatalf("output %v usage %+v", out, res.Usage)
			}
		})
	}
}

func TestAIResponseRefusals(t *testing.T) {
	t.Parallel()
	def := parse(t, nodes("ai", `{"id": "ai", "type": "ai_response", "knowledge": false, "fallback": "Sorry"}`))
	msg := ChatInvocation{Chat: testChat, Message: typed("hi")}

	res := (&Engine{LLM: answer("x"), Quota: &fakeQuota{limit: 1}}).Invoke(context.Background(), def, Invocation{WorkspaceID: "ws1", Chat: &msg})
	if r := res.Run; r.Status != StatusFailed || r.Error.Code != CodeModuleInactive || nodeRun(t, res, "ai").Error != NodeErrAIModuleInactive || len(res.Actions) != 0 {
		t.Fatalf("without flow_ai: %s %+v", r.Status, r.Error)
	}

	q := &fakeQuota{limit: 0}
	res = chatInvoke(t, &Engine{LLM: answer("x"), Quota: q}, def, typed("hi"))
	if r := res.Run; r.Status != StatusFailed || r.Error.Code != CodeQuotaExceeded || len(res.Actions) != 0 || q.refunds != 0 {
		t.Fatalf("quota used up: %s %+v, actions %q", r.Status, r.Error, actions(res))
	}

	// The run's time budget is not the provider's failure: no fallback.
	clk := newClock()
	slow := &fakeLLM{reply: func(ChatRequest) (ChatReply, error) {
		clk.Advance(2 * time.Minute)
		return ChatReply{}, context.DeadlineExceeded
	}}
	q = &fakeQuota{limit: 1}
	res = chatInvoke(t, &Engine{LLM: slow, Quota: q, Now: clk.Now}, def, typed("hi"))
	if r := res.Run; r.Status != StatusFailed || r.Error.Code != CodeBudgetExceeded || len(res.Actions) != 0 || q.used != 0 {
		t.Fatalf("budget: %s %+v, actions %q", r.Status, r.Error, actions(res))
	}
}

// TestAssistantRun: the built-in assistant runs as a chat run's flow.
func TestAssistantRun(t *testing.T) {
	t.Parallel()
	llm := answer("We ship in 2 days.")
	kb := kbFunc(func(_ string, _ string, topK int) ([]Passage, error) {
		if topK != 3 {
			t.Errorf("top_k %d", topK)
		}
		return []Passage{{Title: "Shipping", Text: "2 days."}}, nil
	})
	q := &fakeQuota{limit: 1}
	res := chatInvoke(t, &Engine{LLM: llm, Quota: q, Guard: passing(), Knowledge: kb}, flow.Assistant(), typed("When do you ship?"))
	wantStatus(t, res.Run, StatusCompleted)
	wantActions(t, res, "send assistant We ship in 2 days.")
	if res.Usage.BillableUnits != 1 || q.used != 1 || !strings.Contains(llm.reqs[0].Messages[0].Content, "Demo Shop") {
		t.Fatalf("usage %+v request %+v", res.Usage, llm.reqs)
	}
}

// TestChatAnswerTooLarge: an answer too large to tell drops the call's
// messages, and so their sends; the other actions stay.
func TestChatAnswerTooLarge(t *testing.T) {
	t.Parallel()
	res := chatInvoke(t, &Engine{}, parse(t, nodes("hi",
		`{"id": "hi", "type": "send_message", "message": {"text": "Hi"}, "next": "h"}`,
		`{"id": "h", "type": "handover"}`)), typed("hi"))
	res.AnswerTooLarge(100, 10, time.Now())
	wantActions(t, res, "handover h handover node h")
	if len(res.Run.Messages) != 0 {
		t.Fatalf("messages %+v", res.Run.Messages)
	}
}
