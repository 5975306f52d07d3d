package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/rpc"
	svcconfig "github.com/parleyhq/parley/services/flow-runner/internal/config"
)

// fakeProvider is an OpenAI-compatible chat-completions endpoint that
// answers "Echo: " and the last user message, 10 tokens each.
func fakeProvider(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
			http.Error(w, `{"error": {"message": "bad request"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": "Echo: " + req.Messages[len(req.Messages)-1].Content}}},
			"usage": map[string]any{"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// fakeAIUnits serves the gateway's admin route that bills the plan's AI
// units, on h's rpc prefix, with units enough for any test; it counts the
// units in use.
func (h *harness) fakeAIUnits() *atomic.Int64 {
	h.t.Helper()
	var used atomic.Int64
	e := echo.New()
	e.POST("/admin/workspaces/:id/ai-units", func(c echo.Context) error {
		var in struct {
			Units int64 `json:"units"`
		}
		if err := c.Bind(&in); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]int64{"ai_used": used.Add(in.Units), "ai_limit": 1000})
	})
	rs, err := rpc.NewServer(h.env.NATS(h.t), h.cfg.RPCSubjectPrefix, rpc.ServiceGateway, "0.0.1", h.env.Logger(h.t))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = rs.Stop() })
	if err := rs.Handle(rpc.EndpointAdmin, e); err != nil {
		h.t.Fatal(err)
	}
	return &used
}

// demoAIFlow is parleyctl demo's AI flow: a knowledge search, an llm
// answer saved as vars.answer and sent, and an end whose output is that
// answer and the search's sources.
func demoAIFlow(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "parleyctl", "internal", "cli", "demo_ai_flow.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGuardBlockedTextNeverLeavesTheRun: the demo's AI flow against a
// provider whose answer the guard blocks. The caller gets the fallback in
// messages and in the output built from the saved answer, the stored run
// has it in its vars and in the llm node's output (marked guard_blocked),
// a stream's message event carries it; the provider's text is in none of
// them. Text the guard passes goes through as the provider wrote it.
func TestGuardBlockedTextNeverLeavesTheRun(t *testing.T) {
	t.Parallel()
	provider := fakeProvider(t)
	h := start(t, func(c *svcconfig.Config) {
		c.LLMBaseURL = provider.URL + "/v1"
		c.GuardBlockList = []string{"forbidden"}
		c.GuardFallbackText = "Let me get a person to help."
	})
	used := h.fakeAIUnits()
	ws := uuid.NewString()
	h.addKB(ws, "Demo shop policy", "# Returns\n\nYou can return an item within 30 days of delivery.\n")
	id := h.publish(ws, "", demoAIFlow(t))
	path := "/v1/flows/" + id + "/invoke"

	const question = "How many days do I have to return a forbidden item?"
	provided := "Echo: " + question // what the provider answers, and the guard blocks
	fallback := map[string]any{"type": "text", "text": "Let me get a person to help.", "guard_blocked": true}
	wantNowhere := func(what string, body []byte) {
		t.Helper()
		if strings.Contains(string(body), provided) {
			t.Fatalf("%s carries the blocked text: %s", what, body)
		}
	}

	res := h.invoke(ws, id, map[string]any{"input": map[string]any{"question": question}})
	if res.Status != "completed" || len(res.Messages) != 1 || !reflect.DeepEqual(res.Messages[0], fallback) {
		t.Fatalf("invoke: %+v; want one message %v", res, fallback)
	}
	sources, _ := res.Output["sources"].([]any)
	if res.Output["answer"] != fallback["text"] || len(sources) != 1 || sources[0] != "Demo shop policy › Returns" {
		t.Fatalf("output %v; want the fallback as the answer, and the sources", res.Output)
	}
	if res.Usage == nil || res.Usage.BillableUnits != 1 || used.Load() != 1 {
		t.Fatalf("usage %+v, units in use %d; want the node billed once", res.Usage, used.Load())
	}
	status, raw := h.api(ws, full, http.MethodGet, "/v1/flows/"+id+"/runs/"+res.RunID, nil)
	type traceBody struct {
		Run struct {
			Vars map[string]any `json:"vars"`
		} `json:"run"`
		NodeRuns []struct {
			NodeID string `json:"node_id"`
			Output any    `json:"output"`
		} `json:"node_runs"`
	}
	var trace traceBody
	decode(t, raw, &trace)
	if status != http.StatusOK || trace.Run.Vars["answer"] != fallback["text"] || len(trace.NodeRuns) != 4 {
		t.Fatalf("trace: %d %s", status, raw)
	}
	if answer, _ := trace.NodeRuns[2].Output.(map[string]any); trace.NodeRuns[2].NodeID != "answer" || answer["text"] != fallback["text"] ||
		answer["guard_blocked"] != true || !reflect.DeepEqual(answer["message"], fallback) {
		t.Fatalf("the llm node's output %v; want the fallback, marked guard_blocked", trace.NodeRuns[2].Output)
	}
	wantNowhere("the trace", raw)

	status, hd, body := h.call(ws, full, http.MethodPost, path, map[string]any{"input": map[string]any{"question": question}, "stream": true}, nil)
	events, _ := parseSSE(t, string(body))
	if status != http.StatusOK || hd.Get("Content-Type") != "text/event-stream" || len(events) == 0 {
		t.Fatalf("stream: %d %v %s", status, hd, body)
	}
	var messages []map[string]any
	for _, ev := range events {
		if ev.name == "message" {
			messages = append(messages, ev.data)
		}
	}
	end := events[len(events)-1]
	if len(messages) != 1 || !reflect.DeepEqual(messages[0], fallback) || end.name != "end" {
		t.Fatalf("stream's message events %v and last event %v; want one message %v, then end", messages, end, fallback)
	}
	if output, _ := end.data["output"].(map[string]any); output["answer"] != fallback["text"] {
		t.Fatalf("end %v; want the fallback as the answer", end.data)
	}
	wantNowhere("the stream", body)

	// Text the guard passes is the answer everywhere, as written.
	const fine = "How many days do I have to return an item?"
	res = h.invoke(ws, id, map[string]any{"input": map[string]any{"question": fine}})
	passed := map[string]any{"type": "text", "text": "Echo: " + fine}
	if res.Status != "completed" || len(res.Messages) != 1 || !reflect.DeepEqual(res.Messages[0], passed) || res.Output["answer"] != passed["text"] {
		t.Fatalf("invoke: %+v; want %v as message and answer", res, passed)
	}
	status, raw = h.api(ws, full, http.MethodGet, "/v1/flows/"+id+"/runs/"+res.RunID, nil)
	trace = traceBody{}
	decode(t, raw, &trace)
	answer, _ := trace.NodeRuns[2].Output.(map[string]any)
	if _, blocked := answer["guard_blocked"]; status != http.StatusOK || trace.Run.Vars["answer"] != passed["text"] || answer["text"] != passed["text"] || blocked {
		t.Fatalf("trace of a passed answer: %d %s", status, raw)
	}
}
