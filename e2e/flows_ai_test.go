package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// fakeAI is an OpenAI-compatible provider and moderation endpoint on
// the real wire formats (chat completions with usage and response_format,
// moderations), answering by what it is asked:
//
//   - a JSON request whose system message lists "intents:" answers
//     {"intent": "refund"} when the customer's text says "money", else
//     {"intent": "none"}; one listing "fields:" answers {"email": ...}
//     with the first word holding "@", else null;
//   - a plain request answers "Echo: " and the last user message;
//   - a prompt holding "overloaded" is answered 429 twice, then normally;
//     one holding "broken" is always answered 500;
//   - every answer's usage is 7 prompt and 3 completion tokens;
//   - a moderation flags input holding "unsafe"; while down is set it
//     answers 503.
type fakeAI struct {
	srv  *httptest.Server
	down atomic.Bool
	// forget keeps no request (chats, moderated stay empty), so that a
	// benchmark's many calls cost the fake no memory.
	forget atomic.Bool

	mu         sync.Mutex
	chats      []fakeChat
	overloaded int
	moderated  []string
}

type fakeChat struct {
	Model          string `json:"model"`
	Messages       []struct{ Role, Content string }
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	Authorization string `json:"-"`
}

const fakeAIKey = "sk-test-e2e"

func newFakeAI(t testing.TB) *fakeAI {
	f := &fakeAI{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", f.chat)
	mux.HandleFunc("POST /v1/moderations", f.moderate)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAI) url() string { return f.srv.URL + "/v1" }

func (f *fakeAI) chat(w http.ResponseWriter, r *http.Request) {
	var req fakeChat
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	req.Authorization = r.Header.Get("Authorization")
	last := req.Messages[len(req.Messages)-1].Content
	f.mu.Lock()
	if !f.forget.Load() {
		f.chats = append(f.chats, req)
	}
	overloaded := strings.Contains(last, "overloaded") && f.overloaded < 2
	if overloaded {
		f.overloaded++
	}
	f.mu.Unlock()
	switch {
	case overloaded:
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"message":"Rate limit reached, slow down"}}`))
		return
	case strings.Contains(last, "broken"):
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":{"message":"the model is on fire"}}`))
		return
	}
	content := "Echo: " + last
	if req.ResponseFormat != nil && req.ResponseFormat.Type == "json_object" {
		system := req.Messages[0].Content
		switch {
		case strings.Contains(system, "intents:"):
			intent := "none"
			if strings.Contains(last, "money") {
				intent = "refund"
			}
			content = fmt.Sprintf(`{"intent": %q}`, intent)
		case strings.Contains(system, "fields:"):
			content = `{"email": null}`
			for _, w := range strings.Fields(last) {
				if strings.Contains(w, "@") {
					content = fmt.Sprintf(`{"email": %q}`, strings.Trim(w, ".,"))
				}
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": content}}},
		"usage":   map[string]any{"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
	})
}

func (f *fakeAI) moderate(w http.ResponseWriter, r *http.Request) {
	if f.down.Load() {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	var req struct {
		Input string `json:"input"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	if !f.forget.Load() {
		f.mu.Lock()
		f.moderated = append(f.moderated, req.Input)
		f.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "modr-1", "results": []any{map[string]any{"flagged": strings.Contains(req.Input, "unsafe")}}})
}

// chatsWith are the chat requests whose last message holds s.
func (f *fakeAI) chatsWith(s string) []fakeChat {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeChat
	for _, c := range f.chats {
		if strings.Contains(c.Messages[len(c.Messages)-1].Content, s) {
			out = append(out, c)
		}
	}
	return out
}

// The price the suite configures for aiModel: per million tokens, 1 USD
// in and 2 USD out; one fake answer (7 in, 3 out) costs 13e-6.
const (
	aiModel    = "test-model"
	aiCallCost = 13e-6
)

// supportFlow greets with an llm node that sends its text, classifies the
// message, extracts an email and ends with all three.
const supportFlow = `{
  "name": "Support", "triggers": ["api"],
  "nodes": [
    {"id": "start", "type": "start", "next": "greet"},
    {"id": "greet", "type": "llm", "system": "You are kind.", "prompt": "{{vars.input.text}}", "save_as": "greeting", "send": true, "next": "why"},
    {"id": "why", "type": "intent", "text": "{{vars.input.text}}", "save_as": "intent", "else": "done",
     "intents": [{"name": "refund", "description": "wants money back", "next": "who"}]},
    {"id": "who", "type": "extract", "text": "{{vars.input.text}}", "save_as": "contact", "fields": [{"name": "email", "type": "email", "required": true}], "next": "done"},
    {"id": "done", "type": "end", "output": {"greeting": "{{vars.greeting}}", "intent": "{{vars.intent}}", "email": "{{vars.contact.email}}"}}
  ]
}`

// oneLLMFlow is a single llm node whose text is sent.
const oneLLMFlow = `{
  "name": "One", "triggers": ["api"],
  "nodes": [
    {"id": "start", "type": "start", "next": "say"},
    {"id": "say", "type": "llm", "prompt": "{{vars.input.text}}", "send": true, "next": "done"},
    {"id": "done", "type": "end"}
  ]
}`

// TestFlowAINodes: AI nodes through the built binaries against a fake
// provider and guard: what is billed, what is sent, the quota under
// parallel runs, the guard in JSON and SSE, guard_not_wired leaving the
// key free, module_inactive, and the provider's retries.
func TestFlowAINodes(t *testing.T) {
	t.Parallel()
	ai := newFakeAI(t)
	s := startSuite(t,
		"LLM_BASE_URL="+ai.url(), "LLM_API_KEY="+fakeAIKey, "LLM_MODEL="+aiModel,
		"LLM_PRICES="+aiModel+"=1/2",
		"GUARD_BASE_URL="+ai.url(), "GUARD_FALLBACK_TEXT=Let me get a person to help.",
		"GUARD_CHECK_INTERVAL=100ms", "RUN_BUDGET_TIME=3s", "FLOW_CONCURRENCY=50")

	aiDeveloper := func(t *testing.T, limit int, modules string) (ws, key string) {
		ws, key = s.workspaceWithKey(t, "AI", modules)
		s.ctl(t, nil, "workspace", "update", "--workspace", ws, "--ai-limit", fmt.Sprint(limit))
		return ws, key
	}
	aiUsed := func(t *testing.T, key string) float64 {
		status, _, me := s.api(t, key, http.MethodGet, "/v1/me", nil)
		if status != http.StatusOK {
			t.Fatalf("GET /v1/me = %d %v", status, me)
		}
		return me["plan"].(map[string]any)["ai_used"].(float64)
	}
	const allModules = "developer_api,flows,flow_ai"

	t.Run("billing and trace", func(t *testing.T) {
		t.Parallel()
		ws, key := aiDeveloper(t, 10, allModules)
		flowID := s.publishFlow(t, ws, supportFlow)
		text := "I want my money back, write to ada@example.com " + uuid.NewString()
		status, _, out := s.api(t, key, http.MethodPost, invokePath(flowID), map[string]any{"input": map[string]any{"text": text}})
		if status != http.StatusOK || out["status"] != "completed" {
			t.Fatalf("invoke = %d %v", status, out)
		}
		wantOut := map[string]any{"greeting": "Echo: " + text, "intent": "refund", "email": "ada@example.com"}
		if !reflect.DeepEqual(out["output"], wantOut) {
			t.Fatalf("output %v, want %v", out["output"], wantOut)
		}
		if msgs := out["messages"].([]any); len(msgs) != 1 || !reflect.DeepEqual(msgs[0], map[string]any{"type": "text", "text": "Echo: " + text}) {
			t.Fatalf("messages %v", msgs)
		}
		usage := out["usage"].(map[string]any)
		if usage["tokens"] != 30.0 || usage["billable_units"] != 3.0 || math.Abs(usage["cost_usd"].(float64)-3*aiCallCost) > 1e-12 {
			t.Fatalf("usage %v, want 30 tokens, 3 units, %g USD", usage, 3*aiCallCost)
		}
		if used := aiUsed(t, key); used != 3 {
			t.Fatalf("ai_used %v, want 3", used)
		}
		chats := ai.chatsWith(text)
		if len(chats) != 3 {
			t.Fatalf("the provider got %d requests, want 3", len(chats))
		}
		for i, c := range chats {
			json := c.ResponseFormat != nil && c.ResponseFormat.Type == "json_object"
			if c.Model != aiModel || c.Authorization != "Bearer "+fakeAIKey || json != (i > 0) {
				t.Fatalf("request %d: model %q, authorization %q, json %v", i, c.Model, c.Authorization, json)
			}
		}
		trace := s.runTrace(t, key, "/v1/flows/"+flowID, out["run_id"].(string))
		for _, nr := range trace["node_runs"].([]any) {
			n := nr.(map[string]any)
			wantTokens := 0.0
			if n["node_type"] == "llm" || n["node_type"] == "intent" || n["node_type"] == "extract" {
				wantTokens = 10
			}
			if n["tokens"] != wantTokens || math.Abs(n["cost_usd"].(float64)-wantTokens/10*aiCallCost) > 1e-12 {
				t.Fatalf("node run %v: want %v tokens", n, wantTokens)
			}
		}
	})

	t.Run("quota under 20 parallel runs", func(t *testing.T) {
		t.Parallel()
		ws, key := aiDeveloper(t, 5, allModules)
		flowID := s.publishFlow(t, ws, oneLLMFlow)
		answers := together(20, func(i int) flowAnswer {
			a, err := postFlow(t.Context(), s.gatewayURL, key, invokePath(flowID), fmt.Sprintf(`{"input": {"text": "hello %d"}}`, i))
			if err != nil {
				return flowAnswer{err: err}
			}
			return a
		})
		count := map[string]int{}
		for range 20 {
			a := receive(t, answers, 30*time.Second, "a parallel invoke")
			var res struct {
				Status string `json:"status"`
				Error  *struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if a.status != http.StatusOK || json.Unmarshal(a.body, &res) != nil {
				t.Fatalf("invoke = %v", a)
			}
			if res.Error != nil {
				count[res.Status+" "+res.Error.Code]++
			} else {
				count[res.Status]++
			}
		}
		if count["completed"] != 5 || count["failed quota_exceeded"] != 15 {
			t.Fatalf("answers %v, want 5 completed and 15 failed quota_exceeded", count)
		}
		if used := aiUsed(t, key); used != 5 {
			t.Fatalf("ai_used %v, want 5", used)
		}
	})

	t.Run("guard in JSON and SSE", func(t *testing.T) {
		t.Parallel()
		ws, key := aiDeveloper(t, 10, allModules)
		flowID := s.publishFlow(t, ws, oneLLMFlow)
		body := `{"input": {"text": "say something unsafe"}}`
		a, err := postFlow(t.Context(), s.gatewayURL, key, invokePath(flowID), body)
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			Status   string           `json:"status"`
			Messages []map[string]any `json:"messages"`
		}
		blocked := map[string]any{"type": "text", "text": "Let me get a person to help.", "guard_blocked": true}
		if a.status != http.StatusOK || json.Unmarshal(a.body, &res) != nil || res.Status != "completed" ||
			len(res.Messages) != 1 || !reflect.DeepEqual(res.Messages[0], blocked) {
			t.Fatalf("invoke = %v; want one message %v", a, blocked)
		}
		st := openEventStream(t, s.gatewayURL, key, invokePath(flowID), body)
		var message map[string]any
		for _, ev := range st.rest(t, 10*time.Second) {
			if ev.name == "message" {
				message = ev.data
			}
		}
		if !reflect.DeepEqual(message, blocked) {
			t.Fatalf("stream's message event %v, want %v", message, blocked)
		}
		// Text the guard passes is sent as the provider wrote it.
		status, _, ok := s.api(t, key, http.MethodPost, invokePath(flowID), map[string]any{"input": map[string]any{"text": "say hello"}})
		if msgs := ok["messages"].([]any); status != http.StatusOK || !reflect.DeepEqual(msgs, []any{map[string]any{"type": "text", "text": "Echo: say hello"}}) {
			t.Fatalf("invoke = %d %v", status, ok)
		}
	})

	t.Run("module inactive", func(t *testing.T) {
		t.Parallel()
		ws, key := aiDeveloper(t, 10, "developer_api,flows")
		flowID := s.publishFlow(t, ws, oneLLMFlow)
		status, _, out := s.api(t, key, http.MethodPost, invokePath(flowID), map[string]any{"input": map[string]any{"text": "hi"}})
		if errBody, _ := out["error"].(map[string]any); status != http.StatusOK || out["status"] != "failed" || errBody["code"] != "module_inactive" {
			t.Fatalf("invoke = %d %v; want 200 failed module_inactive", status, out)
		}
		if used := aiUsed(t, key); used != 0 {
			t.Fatalf("ai_used %v, want 0", used)
		}
	})

	t.Run("provider retries", func(t *testing.T) {
		t.Parallel()
		ws, key := aiDeveloper(t, 10, allModules)
		flowID := s.publishFlow(t, ws, oneLLMFlow)
		// 429 twice, then an answer: the node succeeds.
		text := "overloaded " + uuid.NewString()
		status, _, out := s.api(t, key, http.MethodPost, invokePath(flowID), map[string]any{"input": map[string]any{"text": text}})
		if status != http.StatusOK || out["status"] != "completed" || len(ai.chatsWith(text)) != 3 {
			t.Fatalf("invoke = %d %v after %d provider requests; want completed after 3", status, out, len(ai.chatsWith(text)))
		}
		// 500 until the budget is spent: the node fails with the
		// provider's reason, never its key, and nothing is billed.
		text = "broken " + uuid.NewString()
		status, _, out = s.api(t, key, http.MethodPost, invokePath(flowID), map[string]any{"input": map[string]any{"text": text}})
		errBody, _ := out["error"].(map[string]any)
		if status != http.StatusOK || out["status"] != "failed" || errBody["code"] != "node_failed" || len(ai.chatsWith(text)) < 2 {
			t.Fatalf("invoke = %d %v after %d provider requests; want node_failed after retries", status, out, len(ai.chatsWith(text)))
		}
		trace := s.runTrace(t, key, "/v1/flows/"+flowID, out["run_id"].(string))
		raw, _ := json.Marshal(trace)
		if !strings.Contains(string(raw), "the model is on fire") || strings.Contains(string(raw), fakeAIKey) {
			t.Fatalf("trace %s: want the provider's reason and never its key", raw)
		}
		if used := aiUsed(t, key); used != 1 {
			t.Fatalf("ai_used %v, want 1 (the failed node is not billed)", used)
		}
	})
}

// askThenLLMFlow asks a question, then sends an llm answer to it.
const askThenLLMFlow = `{
  "name": "Ask", "triggers": ["api"],
  "nodes": [
    {"id": "start", "type": "start", "next": "ask"},
    {"id": "ask", "type": "question", "text": "Yes?", "save_as": "said", "next": "say"},
    {"id": "say", "type": "llm", "prompt": "{{vars.said}}", "send": true, "next": "done"},
    {"id": "done", "type": "end"}
  ]
}`

// TestFlowGuardNotWired: a flow with AI nodes while the guard is down, or
// not configured, is 503 guard_not_wired before the run; its key stays
// free, so the same call runs once the guard is back.
func TestFlowGuardNotWired(t *testing.T) {
	t.Parallel()
	ai := newFakeAI(t)
	s := startSuite(t, "LLM_BASE_URL="+ai.url(), "LLM_MODEL="+aiModel, "GUARD_BASE_URL="+ai.url(), "GUARD_CHECK_INTERVAL=100ms")
	ws, key := s.workspaceWithKey(t, "Guarded", "developer_api,flows,flow_ai")
	s.ctl(t, nil, "workspace", "update", "--workspace", ws, "--ai-limit", "10")
	flowID := s.publishFlow(t, ws, oneLLMFlow)
	plain := s.publishFlow(t, ws, greetingFlow)
	body := `{"input": {"text": "hello"}}`
	idem := "guard-" + uuid.NewString()

	// The guard is down before anything asked it.
	ai.down.Store(true)
	a, err := postFlow(t.Context(), s.gatewayURL, key, invokePath(flowID), body, idempotencyKeyHeader, idem)
	if err != nil {
		t.Fatal(err)
	}
	if a.status != http.StatusServiceUnavailable || a.code() != "guard_not_wired" {
		t.Fatalf("invoke with the guard down = %v; want 503 guard_not_wired", a)
	}
	if n := len(ai.chatsWith("hello")); n != 0 {
		t.Fatalf("the provider was asked %d times by a refused run", n)
	}
	// A flow without AI nodes does not need the guard.
	if status, _, out := s.api(t, key, http.MethodPost, invokePath(plain), map[string]any{"input": map[string]any{}}); status != http.StatusOK {
		t.Fatalf("a flow without AI nodes = %d %v", status, out)
	}

	ai.down.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		if a, err = postFlow(t.Context(), s.gatewayURL, key, invokePath(flowID), body, idempotencyKeyHeader, idem); err != nil {
			t.Fatal(err)
		}
		if a.status != http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guard is back, and the invoke is still %v", a)
		}
		time.Sleep(50 * time.Millisecond) // the guard's state is cached for GUARD_CHECK_INTERVAL
	}
	if a.status != http.StatusOK || a.header.Get(replayedHeader) != "" || !strings.Contains(string(a.body), `"completed"`) {
		t.Fatalf("the same key once the guard is back = %v %v; want a first run", a, a.header)
	}

	// A continue is checked too: a session of a flow with AI nodes is
	// refused while the guard is down and left as it was, and the same
	// continue goes on once it is back. Its usage is the continue's own.
	asking := s.publishFlow(t, ws, askThenLLMFlow)
	status, _, first := s.api(t, key, http.MethodPost, invokePath(asking), map[string]any{"input": map[string]any{}})
	if status != http.StatusOK || first["status"] != "waiting" || first["usage"].(map[string]any)["billable_units"] != 0.0 {
		t.Fatalf("invoke = %d %v; want waiting with no units", status, first)
	}
	cont := fmt.Sprintf(`{"session_id": %q, "input": {"text": "hello again"}}`, first["session_id"])
	// Down, and known to be: until the remembered state runs out an
	// invoke still starts (its run waits at the question, no AI node run).
	ai.down.Store(true)
	deadline = time.Now().Add(10 * time.Second)
	for {
		var err error
		if a, err = postFlow(t.Context(), s.gatewayURL, key, invokePath(asking), `{"input": {}}`); err != nil {
			t.Fatal(err)
		}
		if a.status == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guard is down, and an invoke is still %v", a)
		}
		time.Sleep(50 * time.Millisecond) // the guard's state is cached for GUARD_CHECK_INTERVAL
	}
	if a, err = postFlow(t.Context(), s.gatewayURL, key, invokePath(asking), cont); err != nil {
		t.Fatal(err)
	}
	if a.code() != "guard_not_wired" {
		t.Fatalf("continue with the guard down = %v; want 503 guard_not_wired", a)
	}
	ai.down.Store(false)
	deadline = time.Now().Add(10 * time.Second)
	for {
		var err error
		if a, err = postFlow(t.Context(), s.gatewayURL, key, invokePath(asking), cont); err != nil {
			t.Fatal(err)
		}
		if a.status != http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guard is back, and the continue is still %v", a)
		}
		time.Sleep(50 * time.Millisecond) // the guard's state is cached for GUARD_CHECK_INTERVAL
	}
	var done struct {
		Status string `json:"status"`
		Usage  struct {
			BillableUnits int `json:"billable_units"`
			Tokens        int `json:"tokens"`
		} `json:"usage"`
	}
	if a.status != http.StatusOK || json.Unmarshal(a.body, &done) != nil || done.Status != "completed" || done.Usage.BillableUnits != 1 || done.Usage.Tokens != 10 {
		t.Fatalf("continue once the guard is back = %v; want completed with this call's 1 unit and 10 tokens", a)
	}

	// No guard configured at all.
	s2 := startSuite(t, "LLM_BASE_URL="+ai.url(), "LLM_MODEL="+aiModel)
	ws2, key2 := s2.workspaceWithKey(t, "Unguarded", "developer_api,flows,flow_ai")
	flow2 := s2.publishFlow(t, ws2, oneLLMFlow)
	a, err = postFlow(t.Context(), s2.gatewayURL, key2, invokePath(flow2), body)
	if err != nil || a.status != http.StatusServiceUnavailable || a.code() != "guard_not_wired" {
		t.Fatalf("invoke without a guard = %v (%v); want 503 guard_not_wired", a, err)
	}
}

// startLLMSandbox runs the llm-sandbox binary on a free port until t ends
// and returns its base URL (".../v1").
func startLLMSandbox(t *testing.T) string {
	t.Helper()
	if err := sandboxOnce(); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports.Free(t, 1)[0])
	cmd := exec.Command(filepath.Join(binDir, "llm-sandbox"), "-addr", addr)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("--- llm-sandbox output ---\n%s", out.String())
		}
	})
	base := "http://" + addr + "/v1"
	wait.For(t, 10*time.Second, "llm-sandbox up", func() error {
		resp, err := http.Post(base+"/moderations", "application/json", strings.NewReader(`{"input": "hello"}`))
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	return base
}

// TestDemoAIFlowWalkthrough plays the demo AI flow of docs/flows.md "A
// local sandbox" as make run sets it up: the llm-sandbox as the provider and
// its moderation endpoint as the guard; parleyctl demo adds the demo document and the flow,
// once; the answer cites the passages the knowledge node found, in JSON
// and as a stream, and a blocked word is replaced.
func TestDemoAIFlowWalkthrough(t *testing.T) {
	t.Parallel()
	llm := startLLMSandbox(t)
	s := startSuite(t, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true", "LLM_BASE_URL="+llm, "LLM_MODEL=sandbox", "LLM_PRICES=sandbox=0/0",
		"GUARD_BASE_URL="+llm)
	type demoOut struct {
		Workspace struct {
			ID string `json:"id"`
		} `json:"workspace"`
		APIKey     string `json:"api_key"`
		AIFlowID   string `json:"ai_flow_id"`
		KBDocument struct {
			ID       string `json:"id"`
			Passages int    `json:"passages"`
		} `json:"kb_document"`
	}
	var demo, again demoOut
	s.ctl(t, &demo, "demo")
	s.ctl(t, &again, "demo")
	if demo.AIFlowID == "" || demo.KBDocument.ID == "" || demo.KBDocument.Passages == 0 || again != demo {
		t.Fatalf("demo printed %+v, then %+v; want the same AI flow and document, added once", demo, again)
	}
	var docs struct {
		Documents []map[string]any `json:"documents"`
	}
	s.ctl(t, &docs, "kb", "list", "--workspace", demo.Workspace.ID)
	if len(docs.Documents) != 1 || docs.Documents[0]["title"] != "Demo shop policy" {
		t.Fatalf("kb list = %v", docs.Documents)
	}

	path := invokePath(demo.AIFlowID)
	question := "How many days do I have to return an item?"
	status, _, out := s.api(t, demo.APIKey, http.MethodPost, path, map[string]any{"input": map[string]any{"question": question}})
	if status != http.StatusOK || out["status"] != "completed" {
		t.Fatalf("invoke = %d %v", status, out)
	}
	sources, _ := out["output"].(map[string]any)["sources"].([]any)
	if len(sources) == 0 || sources[0] != "Demo shop policy › Returns" {
		t.Fatalf("sources %v; want the Returns passage first", sources)
	}
	msgs := out["messages"].([]any)
	if len(msgs) != 1 || !strings.HasPrefix(msgs[0].(map[string]any)["text"].(string), "[sandbox]") {
		t.Fatalf("messages %v", msgs)
	}
	if usage := out["usage"].(map[string]any); usage["billable_units"] != 1.0 || usage["tokens"].(float64) <= 0 {
		t.Fatalf("usage %v", usage)
	}

	st := openEventStream(t, s.gatewayURL, demo.APIKey, path, `{"input": {"question": "Is anything forbidden to return?"}}`)
	var names []string
	var message map[string]any
	for _, ev := range st.rest(t, 10*time.Second) {
		names = append(names, ev.name)
		if ev.name == "message" {
			message = ev.data
		}
	}
	if message["guard_blocked"] != true || message["text"] != "Sorry, I can't help with that here." {
		t.Fatalf("the blocked answer's message event %v (events %v)", message, names)
	}
}

// knowledgeFlow saves what a knowledge search for input.q finds.
const knowledgeFlow = `{
  "name": "Search", "triggers": ["api"],
  "nodes": [
    {"id": "start", "type": "start", "next": "search"},
    {"id": "search", "type": "knowledge", "query": "{{vars.input.q}}", "top_k": 2, "save_as": "found", "next": "done"},
    {"id": "done", "type": "end", "output": {"found": "{{vars.found}}"}}
  ]
}`

// TestKnowledgeBaseCLI: an operator adds English and Mongolian documents
// with parleyctl kb, a knowledge node finds the passage a customer's
// question is about in each, kb list shows them, and after kb delete the
// search finds nothing of the deleted one.
func TestKnowledgeBaseCLI(t *testing.T) {
	t.Parallel()
	s := startSuite(t)
	ws, key := s.flowDeveloper(t)
	testdata := filepath.Join("..", "services", "flow-runner", "internal", "domain", "knowledge", "testdata")
	var en, mn struct {
		ID       string `json:"id"`
		Title    string `json:"title"`
		Passages int    `json:"passages"`
	}
	s.ctl(t, &en, "kb", "add", "--workspace", ws, "--title", "Store policy", "--file", filepath.Join(testdata, "store_policy_en.md"))
	s.ctl(t, &mn, "kb", "add", "--workspace", ws, "--title", "Журам", "--file", filepath.Join(testdata, "store_policy_mn.md"))
	if en.ID == "" || en.Passages < 5 || mn.ID == "" || mn.Passages < 5 {
		t.Fatalf("kb add printed %+v and %+v", en, mn)
	}
	var list struct {
		Documents []struct{ ID, Title string }
	}
	s.ctl(t, &list, "kb", "list", "--workspace", ws)
	if len(list.Documents) != 2 {
		t.Fatalf("kb list = %+v", list)
	}

	flowID := s.publishFlow(t, ws, knowledgeFlow)
	search := func(q string) []any {
		t.Helper()
		status, _, out := s.api(t, key, http.MethodPost, invokePath(flowID), map[string]any{"input": map[string]any{"q": q}})
		if status != http.StatusOK || out["status"] != "completed" {
			t.Fatalf("search %q = %d %v", q, status, out)
		}
		found, _ := out["output"].(map[string]any)["found"].([]any)
		return found
	}
	first := func(found []any) map[string]any {
		if len(found) == 0 {
			return nil
		}
		return found[0].(map[string]any)
	}
	if p := first(search("How many days do I have to return an item?")); p == nil || !strings.HasPrefix(p["title"].(string), "Store policy") ||
		!strings.Contains(strings.ToLower(p["text"].(string)), "days") {
		t.Fatalf("English question found %v", p)
	}
	if p := first(search("Бараагаа хэдэн хоногийн дотор буцааж болох вэ?")); p == nil || !strings.HasPrefix(p["title"].(string), "Журам") ||
		!strings.Contains(p["text"].(string), "14 хоног") {
		t.Fatalf("Mongolian question found %v", p)
	}

	s.ctl(t, nil, "kb", "delete", "--id", mn.ID, "--workspace", ws)
	for _, p := range search("Бараагаа хэдэн хоногийн дотор буцааж болох вэ?") {
		if strings.HasPrefix(p.(map[string]any)["title"].(string), "Журам") {
			t.Fatalf("a deleted document's passage was found: %v", p)
		}
	}
	if _, stderr, err := s.ctlRaw("kb", "delete", "--id", mn.ID); err == nil || !strings.Contains(string(stderr), "document_not_found") {
		t.Fatalf("deleting it again: %v %s", err, stderr)
	}
}
