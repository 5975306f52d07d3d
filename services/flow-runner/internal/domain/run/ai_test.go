package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeLLM answers with reply (or err), recording the requests.
type fakeLLM struct {
	mu    sync.Mutex
	reqs  []ChatRequest
	reply func(req ChatRequest) (ChatReply, error)
}

func (f *fakeLLM) Chat(ctx context.Context, req ChatRequest) (ChatReply, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	return f.reply(req)
}

func answer(text string) *fakeLLM {
	return &fakeLLM{reply: func(ChatRequest) (ChatReply, error) {
		return ChatReply{Text: text, Model: "m", Tokens: 10, CostUSD: 0.25}, nil
	}}
}

// fakeQuota holds limit units; used counts those held now.
type fakeQuota struct {
	mu                sync.Mutex
	used, limit       int
	reserves, refunds int
	reserveErr        error
}

func (q *fakeQuota) Reserve(context.Context, string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.reserves++
	if q.reserveErr != nil {
		return q.reserveErr
	}
	if q.used >= q.limit {
		return ErrQuotaExceeded
	}
	q.used++
	return nil
}

func (q *fakeQuota) Refund(context.Context, string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refunds++
	q.used--
	return nil
}

type guardFunc func(text string) (bool, error)

func (f guardFunc) Check(_ context.Context, text string) (bool, error) { return f(text) }

type kbFunc func(ws, query string, topK int) ([]Passage, error)

func (f kbFunc) Search(_ context.Context, ws, query string, topK int) ([]Passage, error) {
	return f(ws, query, topK)
}

// aiInvoke runs doc with the flow_ai module on, as workspace ws1.
func aiInvoke(t *testing.T, e *Engine, doc string, input map[string]any) *Result {
	t.Helper()
	return e.Invoke(context.Background(), parse(t, doc), Invocation{RunID: "r1", WorkspaceID: "ws1", Input: input, Modules: Modules{FlowAI: true}})
}

func TestLLMNode(t *testing.T) {
	t.Parallel()
	llm := answer("Hello Ada")
	q := &fakeQuota{limit: 5}
	e := &Engine{LLM: llm, Quota: q, Guard: guardFunc(func(string) (bool, error) { return false, nil })}
	res := aiInvoke(t, e, nodes("l",
		`{"id": "l", "type": "llm", "system": "Be brief", "prompt": "Greet {{vars.input.name}}", "model": "big", "temperature": 0.5, "max_tokens": 50, "save_as": "greeting", "send": true, "next": "e"}`,
		`{"id": "e", "type": "end", "output": {"g": "{{vars.greeting}}"}}`), map[string]any{"name": "Ada"})
	r := res.Run
	if r.Status != StatusCompleted || r.Output["g"] != "Hello Ada" {
		t.Fatalf("run %s %+v output %v", r.Status, r.Error, r.Output)
	}
	want := ChatRequest{Model: "big", Temperature: ptr(0.5), MaxTokens: 50, Messages: []ChatMessage{
		{Role: RoleSystem, Content: "Be brief"}, {Role: RoleUser, Content: "Greet Ada"},
	}}
	if len(llm.reqs) != 1 || !reflect.DeepEqual(llm.reqs[0], want) {
		t.Fatalf("requests %+v, want %+v", llm.reqs, want)
	}
	if !reflect.DeepEqual(res.Messages, []Message{{Type: "text", Text: "Hello Ada"}}) {
		t.Fatalf("messages %+v", res.Messages)
	}
	wantUsage := Usage{Tokens: 10, CostUSD: 0.25, BillableUnits: 1}
	if res.Usage != wantUsage || r.Usage != wantUsage {
		t.Fatalf("usage %+v run usage %+v, want %+v", res.Usage, r.Usage, wantUsage)
	}
	if nr := res.NodeRuns[1]; nr.NodeID != "l" || nr.Tokens != 10 || nr.CostUSD != 0.25 || nr.Error != "" {
		t.Fatalf("node run %+v", nr)
	}
	if q.used != 1 || q.refunds != 0 {
		t.Fatalf("quota used %d refunds %d", q.used, q.refunds)
	}
}

func ptr[T any](v T) *T { return &v }

// TestLLMGuard: text the guard blocks, or could not check, is replaced by
// the fallback wherever the node hands it on: its message (returned and
// observed), its variable, so what a later node sends or the end node
// outputs from it, and the trace, which says it was blocked.
func TestLLMGuard(t *testing.T) {
	t.Parallel()
	doc := nodes("l",
		`{"id": "l", "type": "llm", "prompt": "say it", "save_as": "said", "send": true, "next": "echo"}`,
		`{"id": "echo", "type": "send_message", "message": {"type": "text", "text": "You heard: {{vars.said}}"}, "next": "e"}`,
		`{"id": "e", "type": "end", "output": {"said": "{{vars.said}}"}}`)
	tests := []struct {
		name    string
		guard   Guard
		blocked bool
	}{
		{"passed", guardFunc(func(string) (bool, error) { return false, nil }), false},
		{"flagged", guardFunc(func(text string) (bool, error) { return text == "bad words", nil }), true},
		{"guard down", guardFunc(func(string) (bool, error) { return false, errors.New("connection refused") }), true},
		{"no guard", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			obs := &messageRecorder{}
			e := &Engine{LLM: answer("bad words"), Quota: &fakeQuota{limit: 1}, Guard: tt.guard, GuardFallback: "Sorry."}
			res := e.Invoke(context.Background(), parse(t, doc), Invocation{WorkspaceID: "ws1", Modules: Modules{FlowAI: true}, Observer: obs})
			sent := Message{Type: "text", Text: "bad words"}
			if tt.blocked {
				sent = Message{Type: "text", Text: "Sorry.", GuardBlocked: true}
			}
			want := []Message{sent, {Type: "text", Text: "You heard: " + sent.Text}}
			if res.Run.Status != StatusCompleted || !reflect.DeepEqual(res.Messages, want) {
				t.Fatalf("run %s %+v messages %+v, want %+v", res.Run.Status, res.Run.Error, res.Messages, want)
			}
			if !reflect.DeepEqual(obs.messages, want) {
				t.Fatalf("observed %+v", obs.messages)
			}
			if res.Run.Vars["said"] != sent.Text || res.Run.Output["said"] != sent.Text {
				t.Fatalf("vars %v output %v, want %q in both", res.Run.Vars, res.Run.Output, sent.Text)
			}
			wantOut := map[string]any{"text": sent.Text, "model": "m", "message": sent}
			if tt.blocked {
				wantOut["guard_blocked"] = true
			}
			if nr := res.NodeRuns[1]; nr.NodeID != "l" || !reflect.DeepEqual(nr.Output, wantOut) {
				t.Fatalf("node run %s output %#v, want %#v", nr.NodeID, nr.Output, wantOut)
			}
			if tt.blocked {
				wantNowhere(t, res, "bad words")
			}
		})
	}
}

// TestGuardedAnswerOfTheDemoFlow: the shape of parleyctl demo's AI flow
// (a knowledge search, an llm answer saved and sent, an end whose output
// is the saved answer) hands the caller the fallback, never the text the
// guard blocked, while the search's sources stay as they were.
func TestGuardedAnswerOfTheDemoFlow(t *testing.T) {
	t.Parallel()
	doc := nodes("search",
		`{"id": "search", "type": "knowledge", "query": "{{vars.input.question}}", "top_k": 3, "save_as": "passages", "next": "answer"}`,
		`{"id": "answer", "type": "llm", "system": "Answer from: {{join(map(vars.passages, .title + ': ' + .text), '\\n')}}",
		  "prompt": "{{vars.input.question}}", "max_tokens": 200, "save_as": "answer", "send": true, "next": "done"}`,
		`{"id": "done", "type": "end", "output": {"answer": "{{vars.answer}}", "sources": "{{map(vars.passages, .title)}}"}}`)
	kb := kbFunc(func(string, string, int) ([]Passage, error) {
		return []Passage{{Title: "Policy › Returns", Text: "30 days", Score: 0.9}}, nil
	})
	obs := &messageRecorder{}
	e := &Engine{
		LLM: answer("Returns? Ignore the policy and call 555-SCAM."), Quota: &fakeQuota{limit: 1}, Knowledge: kb,
		Guard: guardFunc(func(text string) (bool, error) { return strings.Contains(text, "SCAM"), nil }), GuardFallback: "Let me get a person to help.",
	}
	res := e.Invoke(context.Background(), parse(t, doc), Invocation{
		WorkspaceID: "ws1", Modules: Modules{FlowAI: true}, Observer: obs, Input: map[string]any{"question": "How long do I have to return an item?"},
	})
	r := res.Run
	blocked := Message{Type: "text", Text: "Let me get a person to help.", GuardBlocked: true}
	wantOutput := map[string]any{"answer": "Let me get a person to help.", "sources": []any{"Policy › Returns"}}
	if r.Status != StatusCompleted || !reflect.DeepEqual(r.Output, wantOutput) {
		t.Fatalf("run %s %+v output %v, want %v", r.Status, r.Error, r.Output, wantOutput)
	}
	if !reflect.DeepEqual(res.Messages, []Message{blocked}) || !reflect.DeepEqual(obs.messages, []Message{blocked}) {
		t.Fatalf("messages %+v observed %+v, want %+v", res.Messages, obs.messages, blocked)
	}
	if r.Vars["answer"] != blocked.Text || r.Usage.BillableUnits != 1 {
		t.Fatalf("vars %v usage %+v", r.Vars, r.Usage)
	}
	out, _ := res.NodeRuns[2].Output.(map[string]any)
	if res.NodeRuns[2].NodeID != "answer" || out["guard_blocked"] != true || out["text"] != blocked.Text {
		t.Fatalf("node run %s output %v", res.NodeRuns[2].NodeID, res.NodeRuns[2].Output)
	}
	wantNowhere(t, res, "SCAM")
}

// wantNowhere fails t when text is anywhere in what res hands on: the
// run (its vars, output, messages), the call's messages and its trace.
func wantNowhere(t *testing.T, res *Result, text string) {
	t.Helper()
	for name, v := range map[string]any{"run": res.Run, "messages": res.Messages, "node runs": res.NodeRuns} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), text) {
			t.Fatalf("the %s carry the blocked text %q: %s", name, text, b)
		}
	}
}

// messageRecorder is an Observer keeping the messages.
type messageRecorder struct {
	NopObserver
	messages []Message
}

func (r *messageRecorder) Message(m Message) { r.messages = append(r.messages, m) }

func TestIntentNode(t *testing.T) {
	t.Parallel()
	doc := nodes("i",
		`{"id": "i", "type": "intent", "text": "{{vars.input.text}}", "save_as": "why", "else": "other", "intents": [
			{"name": "refund", "description": "wants money back", "examples": ["give me my money"], "next": "r"},
			{"name": "shipping", "next": "s"}]}`,
		`{"id": "r", "type": "end", "output": {"branch": "refund"}}`,
		`{"id": "s", "type": "end", "output": {"branch": "shipping"}}`,
		`{"id": "other", "type": "end", "output": {"branch": "else"}}`)
	tests := []struct {
		reply, branch, saved string
	}{
		{`{"intent": "refund"}`, "refund", "refund"},
		{`{"intent": "shipping"}`, "shipping", "shipping"},
		{`{"intent": "none"}`, "else", "none"},
		{`{"intent": "Refund"}`, "else", "Refund"},
		{`{"intent": 7}`, "else", ""},
	}
	for _, tt := range tests {
		t.Run(tt.reply, func(t *testing.T) {
			t.Parallel()
			llm := answer(tt.reply)
			res := aiInvoke(t, &Engine{LLM: llm, Quota: &fakeQuota{limit: 1}}, doc, map[string]any{"text": "where is my parcel"})
			r := res.Run
			if r.Status != StatusCompleted || r.Output["branch"] != tt.branch || r.Vars["why"] != tt.saved || r.Usage.BillableUnits != 1 {
				t.Fatalf("run %s %+v output %v vars %v usage %+v", r.Status, r.Error, r.Output, r.Vars, r.Usage)
			}
			req := llm.reqs[0]
			if !req.JSON || len(req.Messages) != 2 || req.Messages[1].Content != "where is my parcel" ||
				!strings.Contains(req.Messages[0].Content, "intents: refund, shipping\n") ||
				!strings.Contains(req.Messages[0].Content, "- refund: wants money back (examples: give me my money)") {
				t.Fatalf("request %+v", req)
			}
		})
	}
}

func TestExtractNode(t *testing.T) {
	t.Parallel()
	doc := nodes("x",
		`{"id": "x", "type": "extract", "text": "{{vars.input.text}}", "save_as": "contact", "fields": [
			{"name": "email", "type": "email", "description": "their email", "required": true},
			{"name": "qty", "type": "number"}]}`)
	t.Run("found", func(t *testing.T) {
		t.Parallel()
		llm := answer(`{"email": "ada@example.com", "qty": 3, "extra": "dropped"}`)
		res := aiInvoke(t, &Engine{LLM: llm, Quota: &fakeQuota{limit: 1}}, doc, map[string]any{"text": "ada@example.com, 3 please"})
		r := res.Run
		want := map[string]any{"email": "ada@example.com", "qty": float64(3)}
		if r.Status != StatusCompleted || !reflect.DeepEqual(r.Vars["contact"], want) || r.Usage.BillableUnits != 1 {
			t.Fatalf("run %s %+v vars %v usage %+v", r.Status, r.Error, r.Vars, r.Usage)
		}
		sys := llm.reqs[0].Messages[0].Content
		if !llm.reqs[0].JSON || !strings.Contains(sys, "fields: email, qty\n") || !strings.Contains(sys, "- email (email): their email [required]") {
			t.Fatalf("system prompt %q", sys)
		}
	})
	for _, reply := range []string{`{"qty": 3}`, `{"email": null}`, `{"email": "  "}`} {
		t.Run("missing required "+reply, func(t *testing.T) {
			t.Parallel()
			q := &fakeQuota{limit: 1}
			res := aiInvoke(t, &Engine{LLM: answer(reply), Quota: q}, doc, map[string]any{"text": "hi"})
			r := res.Run
			if r.Status != StatusFailed || r.Error.Code != CodeNodeFailed || !strings.Contains(r.Error.Message, `required field "email"`) {
				t.Fatalf("run %s %+v", r.Status, r.Error)
			}
			// Not billed, but the tokens were spent.
			if r.Usage != (Usage{Tokens: 10, CostUSD: 0.25}) || q.used != 0 || q.refunds != 1 {
				t.Fatalf("usage %+v quota %+v", r.Usage, q)
			}
			if nr := res.NodeRuns[1]; nr.Tokens != 10 || nr.Error == "" {
				t.Fatalf("node run %+v", nr)
			}
		})
	}
	t.Run("not json", func(t *testing.T) {
		t.Parallel()
		res := aiInvoke(t, &Engine{LLM: answer("sure! email is x"), Quota: &fakeQuota{limit: 1}}, doc, map[string]any{"text": "hi"})
		if r := res.Run; r.Status != StatusFailed || !strings.Contains(r.Error.Message, "not a JSON object") {
			t.Fatalf("run %s %+v", r.Status, r.Error)
		}
	})
}

func TestAINodeRefusals(t *testing.T) {
	t.Parallel()
	doc := nodes("l", `{"id": "l", "type": "llm", "prompt": "hi"}`)
	t.Run("module inactive", func(t *testing.T) {
		t.Parallel()
		q := &fakeQuota{limit: 1}
		res := (&Engine{LLM: answer("x"), Quota: q}).Invoke(context.Background(), parse(t, doc), Invocation{WorkspaceID: "ws1"})
		r := res.Run
		if r.Status != StatusFailed || r.Error.Code != CodeModuleInactive || res.NodeRuns[1].Error != NodeErrAIModuleInactive || q.reserves != 0 {
			t.Fatalf("run %s %+v node runs %+v reserves %d", r.Status, r.Error, res.NodeRuns, q.reserves)
		}
	})
	t.Run("quota exceeded", func(t *testing.T) {
		t.Parallel()
		llm := answer("x")
		res := aiInvoke(t, &Engine{LLM: llm, Quota: &fakeQuota{limit: 0}}, doc, nil)
		r := res.Run
		if r.Status != StatusFailed || r.Error.Code != CodeQuotaExceeded || len(llm.reqs) != 0 || r.Usage != (Usage{}) {
			t.Fatalf("run %s %+v requests %d usage %+v", r.Status, r.Error, len(llm.reqs), r.Usage)
		}
	})
	t.Run("quota unreachable", func(t *testing.T) {
		t.Parallel()
		res := aiInvoke(t, &Engine{LLM: answer("x"), Quota: &fakeQuota{limit: 1, reserveErr: fmt.Errorf("gateway down: %w", ErrQuotaUnavailable)}}, doc, nil)
		if r := res.Run; r.Status != StatusFailed || r.Error.Code != CodeNodeFailed || !strings.Contains(r.Error.Message, "gateway down") {
			t.Fatalf("run %s %+v", r.Status, r.Error)
		}
		// The outage is named, so that a chat turn is answered again
		// rather than handed over.
		if !errors.Is(res.Unavailable, ErrQuotaUnavailable) {
			t.Fatalf("Unavailable = %v", res.Unavailable)
		}
	})
	t.Run("no provider", func(t *testing.T) {
		t.Parallel()
		res := aiInvoke(t, &Engine{Quota: &fakeQuota{limit: 1}}, doc, nil)
		if r := res.Run; r.Status != StatusFailed || !strings.Contains(r.Error.Message, "no LLM provider") {
			t.Fatalf("run %s %+v", r.Status, r.Error)
		}
	})
	t.Run("provider fails", func(t *testing.T) {
		t.Parallel()
		q := &fakeQuota{limit: 1}
		llm := &fakeLLM{reply: func(ChatRequest) (ChatReply, error) { return ChatReply{}, errors.New("status 503: overloaded") }}
		res := aiInvoke(t, &Engine{LLM: llm, Quota: q}, doc, nil)
		r := res.Run
		if r.Status != StatusFailed || r.Error.Code != CodeNodeFailed || !strings.Contains(r.Error.Message, "overloaded") ||
			!strings.Contains(res.NodeRuns[1].Error, "overloaded") || q.used != 0 || q.refunds != 1 || r.Usage != (Usage{}) {
			t.Fatalf("run %s %+v node runs %+v quota %+v", r.Status, r.Error, res.NodeRuns, q)
		}
	})
	t.Run("time budget", func(t *testing.T) {
		t.Parallel()
		q := &fakeQuota{limit: 1}
		llm := &fakeLLM{reply: func(req ChatRequest) (ChatReply, error) { return ChatReply{}, context.DeadlineExceeded }}
		// The provider's answer comes after the budget is spent.
		e := &Engine{LLM: &slowLLM{inner: llm, wait: 50 * time.Millisecond}, Quota: q, Budget: Budget{Time: 20 * time.Millisecond}}
		res := aiInvoke(t, e, doc, nil)
		if r := res.Run; r.Status != StatusFailed || r.Error.Code != CodeBudgetExceeded || q.used != 0 {
			t.Fatalf("run %s %+v quota %+v", r.Status, r.Error, q)
		}
	})
	t.Run("provider failing until the budget ends", func(t *testing.T) {
		t.Parallel()
		q := &fakeQuota{limit: 1}
		e := &Engine{LLM: failingUntilBudget{}, Quota: q, Budget: Budget{Time: 20 * time.Millisecond}}
		res := aiInvoke(t, e, doc, nil)
		if r := res.Run; r.Status != StatusFailed || r.Error.Code != CodeNodeFailed || !strings.Contains(r.Error.Message, "on fire") || q.used != 0 {
			t.Fatalf("run %s %+v quota %+v", r.Status, r.Error, q)
		}
	})
}

// failingUntilBudget is a provider retried until the run's budget ended,
// which reports its last answer rather than the deadline.
type failingUntilBudget struct{}

func (failingUntilBudget) Chat(ctx context.Context, _ ChatRequest) (ChatReply, error) {
	<-ctx.Done()
	return ChatReply{}, errors.New("status 500: the model is on fire")
}

// slowLLM answers ctx's end, or inner after wait.
type slowLLM struct {
	inner LLM
	wait  time.Duration
}

func (s *slowLLM) Chat(ctx context.Context, req ChatRequest) (ChatReply, error) {
	select {
	case <-ctx.Done():
		return ChatReply{}, ctx.Err()
	case <-time.After(s.wait):
		return s.inner.Chat(ctx, req)
	}
}

// TestAIUnitsInLoopsAndCalls: AI nodes run inside loop and call_flow are
// each billed; the loop and the call are not.
func TestAIUnitsInLoopsAndCalls(t *testing.T) {
	t.Parallel()
	child := parse(t, nodes("l", `{"id": "l", "type": "llm", "prompt": "child"}`))
	doc := nodes("loop",
		`{"id": "loop", "type": "loop", "over": "[1, 2, 3]", "as": "i", "body": "l", "next": "c"}`,
		`{"id": "l", "type": "llm", "prompt": "item {{vars.i}}"}`,
		`{"id": "c", "type": "call_flow", "flow_id": "f1", "next": "e"}`,
		`{"id": "e", "type": "end"}`)
	q := &fakeQuota{limit: 10}
	res := aiInvoke(t, &Engine{LLM: answer("ok"), Quota: q, Flows: flowMap{"f1": child}}, doc, nil)
	r := res.Run
	if r.Status != StatusCompleted || r.Usage != (Usage{Tokens: 40, CostUSD: 1, BillableUnits: 4}) || q.used != 4 {
		t.Fatalf("run %s %+v usage %+v quota %+v", r.Status, r.Error, r.Usage, q)
	}
	// The quota ends the run at the AI node that finds it used up.
	q = &fakeQuota{limit: 2}
	r = aiInvoke(t, &Engine{LLM: answer("ok"), Quota: q, Flows: flowMap{"f1": child}}, doc, nil).Run
	if r.Status != StatusFailed || r.Error.Code != CodeQuotaExceeded || r.Usage.BillableUnits != 2 || !strings.Contains(r.Error.Message, `"l"`) {
		t.Fatalf("run %s %+v usage %+v", r.Status, r.Error, r.Usage)
	}
}

func TestKnowledgeNode(t *testing.T) {
	t.Parallel()
	var asked []any
	kb := kbFunc(func(ws, query string, topK int) ([]Passage, error) {
		asked = append(asked, ws, query, topK)
		return []Passage{{Title: "Returns", Text: "30 days", Score: 0.8}}, nil
	})
	doc := nodes("k", `{"id": "k", "type": "knowledge", "query": "{{vars.input.q}}", "top_k": 2, "save_as": "found", "next": "e"}`,
		`{"id": "e", "type": "end", "output": {"first": "{{vars.found[0].title}}"}}`)
	// No flow_ai needed, and nothing billed.
	res := (&Engine{Knowledge: kb}).Invoke(context.Background(), parse(t, doc), Invocation{WorkspaceID: "ws1", Input: map[string]any{"q": "return?"}})
	r := res.Run
	want := []any{map[string]any{"title": "Returns", "text": "30 days", "score": 0.8}}
	if r.Status != StatusCompleted || !reflect.DeepEqual(r.Vars["found"], want) || r.Output["first"] != "Returns" || r.Usage != (Usage{}) {
		t.Fatalf("run %s %+v vars %v output %v", r.Status, r.Error, r.Vars, r.Output)
	}
	if !reflect.DeepEqual(asked, []any{"ws1", "return?", 2}) {
		t.Fatalf("asked %v", asked)
	}
	out, _ := json.Marshal(res.NodeRuns[1].Output)
	if string(out) != `[{"score":0.8,"text":"30 days","title":"Returns"}]` {
		t.Fatalf("trace output %s", out)
	}
}
