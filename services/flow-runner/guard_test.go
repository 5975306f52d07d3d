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

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	"github.com/parleyhq/parley/pkg/testenv/rpcserver"
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
	e.POST("/admin/ai-units", func(c echo.Context) error {
		var in gatewayapi.UseAIUnits
		if err := c.Bind(&in); err != nil || len(in.Uses) == 0 {
			return echo.NewHTTPError(http.StatusBadRequest, "uses is required")
		}
		var out gatewayapi.AIUnitsAnswer
		for _, u := range in.Uses {
			out.Uses = append(out.Uses, gatewayapi.AIUnitsUsed{WorkspaceID: u.WorkspaceID, AIUsed: used.Add(u.Units), AILimit: 1000})
		}
		return c.JSON(http.StatusOK, out)
	})
	rpcserver.Serve(h.t, h.env.NATS(h.t), h.cfg.RPCSubjectPrefix, rpc.ServiceGateway, h.env.Logger(h.t), map[string]http.Handler{rpc.EndpointAdmin: e})
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
	fallback := flowrunnerapi.Message{Type: "text", Text: "Let me get a person to help.", GuardBlocked: true}
	wantNowhere := func(what string, body []byte) {
		t.Helper()
		if strings.Contains(string(body), provided) {
			t.Fatalf("%s carries the blocked text: %s", what, body)
		}
	}

	res := h.invoke(ws, id, map[string]any{"input": map[string]any{"question": question}})
	if res.Status != "completed" || !reflect.DeepEqual(res.Messages, []flowrunnerapi.Message{fallback}) {
		t.Fatalf("invoke: %+v; want one message %+v", res, fallback)
	}
	sources, _ := res.Output["sources"].([]any)
	if res.Output["answer"] != fallback.Text || len(sources) != 1 || sources[0] != "Demo shop policy › Returns" {
		t.Fatalf("output %v; want the fallback as the answer, and the sources", res.Output)
	}
	if res.Usage.BillableUnits != 1 || used.Load() != 1 {
		t.Fatalf("usage %+v, units in use %d; want the node billed once", res.Usage, used.Load())
	}
	status, raw := h.api(ws, full, http.MethodGet, "/v1/flows/"+id+"/runs/"+res.RunID, nil)
	trace := apicheck.Body[flowrunnerapi.Trace](t, raw)
	if status != http.StatusOK || trace.Run.Vars["answer"] != fallback.Text || len(trace.NodeRuns) != 4 {
		t.Fatalf("trace: %d %s", status, raw)
	}
	if answer, _ := trace.NodeRuns[2].Output.(map[string]any); trace.NodeRuns[2].NodeID != "answer" || answer["text"] != fallback.Text ||
		answer["guard_blocked"] != true || !reflect.DeepEqual(asMessage(t, answer["message"]), fallback) {
		t.Fatalf("the llm node's output %v; want the fallback, marked guard_blocked", trace.NodeRuns[2].Output)
	}
	wantNowhere("the trace", raw)

	status, hd, body := h.call(ws, full, http.MethodPost, path, map[string]any{"input": map[string]any{"question": question}, "stream": true}, nil)
	events, _ := parseSSE(t, string(body))
	if status != http.StatusOK || hd.Get("Content-Type") != "text/event-stream" || len(events) == 0 {
		t.Fatalf("stream: %d %v %s", status, hd, body)
	}
	var messages []flowrunnerapi.Message
	for _, ev := range events {
		if ev.name == flowrunnerapi.EventMessage {
			messages = append(messages, asMessage(t, ev.data))
		}
	}
	end := events[len(events)-1]
	if !reflect.DeepEqual(messages, []flowrunnerapi.Message{fallback}) || end.name != flowrunnerapi.EventEnd {
		t.Fatalf("stream's message events %+v and last event %v; want one message %+v, then end", messages, end, fallback)
	}
	if output, _ := end.data["output"].(map[string]any); output["answer"] != fallback.Text {
		t.Fatalf("end %v; want the fallback as the answer", end.data)
	}
	wantNowhere("the stream", body)

	// Text the guard passes is the answer everywhere, as written.
	const fine = "How many days do I have to return an item?"
	res = h.invoke(ws, id, map[string]any{"input": map[string]any{"question": fine}})
	passed := flowrunnerapi.Message{Type: "text", Text: "Echo: " + fine}
	if res.Status != "completed" || !reflect.DeepEqual(res.Messages, []flowrunnerapi.Message{passed}) || res.Output["answer"] != passed.Text {
		t.Fatalf("invoke: %+v; want %+v as message and answer", res, passed)
	}
	status, raw = h.api(ws, full, http.MethodGet, "/v1/flows/"+id+"/runs/"+res.RunID, nil)
	trace = apicheck.Body[flowrunnerapi.Trace](t, raw)
	answer, _ := trace.NodeRuns[2].Output.(map[string]any)
	if _, blocked := answer["guard_blocked"]; status != http.StatusOK || trace.Run.Vars["answer"] != passed.Text || answer["text"] != passed.Text || blocked {
		t.Fatalf("trace of a passed answer: %d %s", status, raw)
	}
}

// asMessage reads v, a message as decoded into a map (a stream's event, a
// node's output), as the flow message it must be, field for field.
func asMessage(t *testing.T, v any) flowrunnerapi.Message {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return apicheck.Body[flowrunnerapi.Message](t, b)
}
