package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// flowDeveloper is developer for flows: a workspace with the developer
// API and the flows module, and an API key. The flows_api feature is on
// without a switch: flow invoke is generally available.
func (s *suite) flowDeveloper(t testing.TB) (workspaceID, key string) {
	t.Helper()
	return s.workspaceWithKey(t, "Flows", "developer_api,flows")
}

// flowFile writes a flow document for parleyctl flow publish.
func flowFile(t testing.TB, doc string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "flow.json")
	if err := os.WriteFile(name, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// A question, a condition on the answer and on the input, a message and
// an end; everything a headless run may use.
const greetingFlow = `{
  "name": "Greeting",
  "description": "Asks a name and greets",
  "triggers": ["api"],
  "nodes": [
    {"id": "start", "type": "start", "next": "ask"},
    {"id": "ask", "type": "question", "text": "Your name?", "save_as": "name", "next": "vip"},
    {"id": "vip", "type": "condition", "if": "vars.input.vip == true", "then": "hello_vip", "else": "hello"},
    {"id": "hello_vip", "type": "send_message", "message": {"type": "text", "text": "Welcome back, {{vars.name}}!"}, "next": "done"},
    {"id": "hello", "type": "send_message", "message": {"type": "text", "text": "Hello, {{vars.name}}"}, "next": "done"},
    {"id": "done", "type": "end", "output": {"name": "{{vars.name}}", "vip": "{{vars.input.vip}}"}}
  ]
}`

// The same flow with a chat-only node on its path: accepted at publish,
// refused at invoke.
const greetingWithHandover = `{
  "name": "Greeting",
  "description": "Asks a name and hands over",
  "triggers": ["api"],
  "nodes": [
    {"id": "start", "type": "start", "next": "ask"},
    {"id": "ask", "type": "question", "text": "Your name?", "save_as": "name", "next": "agent"},
    {"id": "agent", "type": "handover", "next": "done"},
    {"id": "done", "type": "end"}
  ]
}`

// TestFlowsEndToEnd: an operator publishes a flow with parleyctl and a
// developer lists, invokes, continues and traces it through the gateway;
// the module, the feature, a republish and a deactivation take effect on
// the next request.
func TestFlowsEndToEnd(t *testing.T) {
	t.Parallel()
	s := startSuite(t)

	wsID, key := s.flowDeveloper(t)

	// A refusal is one line on stderr naming node and field, exit 1.
	_, stderr, err := s.ctlRaw("flow", "publish", "--workspace", wsID, "--file", flowFile(t, `{"name": "x", "triggers": ["api"], "nodes": [
		{"id": "start", "type": "start", "next": "call"},
		{"id": "call", "type": "http", "method": "GET", "url": "https://example.com", "timeout_ms": 20000}]}`))
	var exit *exec.ExitError
	line := strings.TrimSuffix(string(stderr), "\n")
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || strings.Contains(line, "\n") ||
		!strings.Contains(line, `node "call"`) || !strings.Contains(line, "timeout_ms") {
		t.Fatalf("refused publish: %v, stderr %q; want exit 1 and one line naming node and field", err, stderr)
	}

	var pub struct {
		ID               string `json:"id"`
		PublishedVersion int    `json:"published_version"`
	}
	s.ctl(t, &pub, "flow", "publish", "--workspace", wsID, "--file", flowFile(t, greetingFlow))
	if pub.ID == "" || pub.PublishedVersion != 1 {
		t.Fatalf("publish printed %+v", pub)
	}
	flowPath := "/v1/flows/" + pub.ID

	status, _, list := s.api(t, key, http.MethodGet, "/v1/flows", nil)
	flows, _ := list["flows"].([]any)
	if status != http.StatusOK || len(flows) != 1 {
		t.Fatalf("GET /v1/flows = %d %v", status, list)
	}
	f := flows[0].(map[string]any)
	if f["id"] != pub.ID || f["name"] != "Greeting" || f["description"] != "Asks a name and greets" ||
		f["status"] != "active" || f["published_version"] != float64(1) || f["updated_at"] == nil {
		t.Fatalf("listed flow %v", f)
	}

	// Invoke: the run waits at the question.
	status, _, inv := s.api(t, key, http.MethodPost, flowPath+"/invoke", map[string]any{"input": map[string]any{"vip": true}})
	sessionID, _ := inv["session_id"].(string)
	runID, _ := inv["run_id"].(string)
	if status != http.StatusOK || inv["status"] != "waiting" || sessionID == "" || runID == "" {
		t.Fatalf("invoke = %d %v", status, inv)
	}
	if msgs, _ := inv["messages"].([]any); len(msgs) != 1 || msgs[0].(map[string]any)["text"] != "Your name?" {
		t.Fatalf("invoke messages %v", inv["messages"])
	}

	// Continue: only input.text is read; the run completes.
	status, _, cont := s.api(t, key, http.MethodPost, flowPath+"/invoke", map[string]any{"session_id": sessionID, "input": map[string]any{"text": "Ada", "vip": false}})
	if status != http.StatusOK || cont["status"] != "completed" || cont["run_id"] != runID || cont["session_id"] != nil {
		t.Fatalf("continue = %d %v", status, cont)
	}
	if out := cont["output"].(map[string]any); out["name"] != "Ada" || out["vip"] != true {
		t.Fatalf("continue output %v", cont["output"])
	}
	if msgs, _ := cont["messages"].([]any); len(msgs) != 1 || msgs[0].(map[string]any)["text"] != "Welcome back, Ada!" {
		t.Fatalf("continue messages %v", cont["messages"])
	}
	if usage, _ := cont["usage"].(map[string]any); usage["billable_units"] != float64(0) {
		t.Fatalf("continue usage %v", cont["usage"])
	}
	status, _, again := s.api(t, key, http.MethodPost, flowPath+"/invoke", map[string]any{"session_id": sessionID, "input": map[string]any{"text": "Ada"}})
	if status != http.StatusNotFound || again["code"] != "session_not_found" {
		t.Fatalf("continue of a finished run = %d %v", status, again)
	}

	// A NUL character in a flow's input passes the gateway and is kept by
	// the run, unlike in a send (docs/limits-and-errors.md "Error codes").
	_, _, inv = s.api(t, key, http.MethodPost, flowPath+"/invoke", map[string]any{"input": map[string]any{"vip": false}})
	status, _, cont = s.api(t, key, http.MethodPost, flowPath+"/invoke", map[string]any{"session_id": inv["session_id"], "input": map[string]any{"text": "N\x00ul"}})
	if out, _ := cont["output"].(map[string]any); status != http.StatusOK || cont["status"] != "completed" || out["name"] != "N\x00ul" {
		t.Fatalf("continue with a NUL = %d %v", status, cont)
	}

	// The trace.
	trace := s.runTrace(t, key, flowPath, runID)
	run := trace["run"].(map[string]any)
	if run["id"] != runID || run["flow_id"] != pub.ID || run["status"] != "completed" || run["completed_at"] == nil ||
		run["vars"].(map[string]any)["name"] != "Ada" {
		t.Fatalf("trace run %v", run)
	}
	var visited []string
	for _, nr := range trace["node_runs"].([]any) {
		visited = append(visited, nr.(map[string]any)["node_id"].(string))
	}
	if got := strings.Join(visited, ","); !strings.Contains(got, "ask,vip,hello_vip,done") {
		t.Fatalf("node runs %s, want ask, vip, hello_vip and done in order", got)
	}

	// Without the flows module: invoke is 403; listing and traces still work.
	s.ctl(t, nil, "workspace", "update", "--workspace", wsID, "--modules", "developer_api")
	if status, _, body := s.api(t, key, http.MethodPost, flowPath+"/invoke", map[string]any{"input": map[string]any{}}); status != http.StatusForbidden || body["code"] != "module_inactive" {
		t.Fatalf("invoke without flows = %d %v", status, body)
	}
	if status, _, body := s.api(t, key, http.MethodGet, "/v1/flows", nil); status != http.StatusOK || len(body["flows"].([]any)) != 1 {
		t.Fatalf("list without flows = %d %v", status, body)
	}
	s.runTrace(t, key, flowPath, runID)
	s.ctl(t, nil, "workspace", "update", "--workspace", wsID, "--modules", "developer_api,flows")

	// With the feature off every flow route is 404 not_found.
	s.ctl(t, nil, "workspace", "feature", "--workspace", wsID, "--feature", "flows_api", "--off")
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/v1/flows"}, {http.MethodPost, flowPath + "/invoke"}, {http.MethodGet, flowPath + "/runs/" + runID},
	} {
		var body any
		if r.method == http.MethodPost {
			body = map[string]any{"input": map[string]any{}}
		}
		if status, _, got := s.api(t, key, r.method, r.path, body); status != http.StatusNotFound || got["code"] != "not_found" {
			t.Fatalf("%s %s with flows_api off = %d %v", r.method, r.path, status, got)
		}
	}
	s.ctl(t, nil, "workspace", "feature", "--workspace", wsID, "--feature", "flows_api", "--on")

	// A republished version with a chat-only node is refused at once.
	s.ctl(t, &pub, "flow", "publish", "--workspace", wsID, "--flow", pub.ID, "--file", flowFile(t, greetingWithHandover))
	if pub.PublishedVersion != 2 {
		t.Fatalf("republish printed %+v", pub)
	}
	status, _, body := s.api(t, key, http.MethodPost, flowPath+"/invoke", map[string]any{"input": map[string]any{}})
	if msg, _ := body["message"].(string); status != http.StatusUnprocessableEntity || body["code"] != "flow_not_invokable" || !strings.Contains(msg, `"agent"`) {
		t.Fatalf("invoke of a flow with a handover = %d %v", status, body)
	}

	// Deactivated: gone from the list, and unknown to invoke.
	var off struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	s.ctl(t, &off, "flow", "deactivate", "--flow", pub.ID)
	if off.ID != pub.ID || off.Status != "inactive" {
		t.Fatalf("deactivate printed %+v", off)
	}
	if status, _, body := s.api(t, key, http.MethodPost, flowPath+"/invoke", map[string]any{"input": map[string]any{}}); status != http.StatusNotFound || body["code"] != "flow_not_found" {
		t.Fatalf("invoke of a deactivated flow = %d %v", status, body)
	}
	if status, _, body := s.api(t, key, http.MethodGet, "/v1/flows", nil); status != http.StatusOK || len(body["flows"].([]any)) != 0 {
		t.Fatalf("list after deactivation = %d %v", status, body)
	}
}

// TestDemoFlowWalkthrough plays the demo flow of the README "Quick start":
// parleyctl demo publishes it once, and the demo key lists, invokes,
// continues and traces it; its http node reaches the flow-runner's own
// /healthz.
func TestDemoFlowWalkthrough(t *testing.T) {
	t.Parallel()
	s := startSuite(t, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true")

	type demoOut struct {
		APIKey string `json:"api_key"`
		FlowID string `json:"flow_id"`
		Flow   struct {
			PublishedVersion int `json:"published_version"`
		} `json:"flow"`
	}
	var demo, again demoOut
	s.ctl(t, &demo, "demo")
	s.ctl(t, &again, "demo")
	if demo.FlowID == "" || again != demo {
		t.Fatalf("demo printed %+v, then %+v; want the same flow, not republished", demo, again)
	}
	key, flowPath := demo.APIKey, "/v1/flows/"+demo.FlowID

	status, _, list := s.api(t, key, http.MethodGet, "/v1/flows", nil)
	// The demo greeting and the demo AI flow (TestDemoAIFlowWalkthrough).
	listed := map[any]bool{}
	flows, _ := list["flows"].([]any)
	for _, f := range flows {
		listed[f.(map[string]any)["id"]] = true
	}
	if status != http.StatusOK || len(listed) != 2 || !listed[demo.FlowID] {
		t.Fatalf("GET /v1/flows = %d %v", status, list)
	}
	status, _, inv := s.api(t, key, http.MethodPost, flowPath+"/invoke", map[string]any{"input": map[string]any{}})
	if status != http.StatusOK || inv["status"] != "waiting" || inv["session_id"] == nil {
		t.Fatalf("invoke = %d %v", status, inv)
	}
	status, _, cont := s.api(t, key, http.MethodPost, flowPath+"/invoke", map[string]any{"session_id": inv["session_id"], "input": map[string]any{"text": "Ada"}})
	want := map[string]any{"name": "Ada", "healthy": true, "health_status": float64(200)}
	if status != http.StatusOK || cont["status"] != "completed" || fmt.Sprint(cont["output"]) != fmt.Sprint(want) {
		t.Fatalf("continue = %d %v; want output %v", status, cont, want)
	}
	trace := s.runTrace(t, key, flowPath, inv["run_id"].(string))
	for _, nr := range trace["node_runs"].([]any) {
		if n := nr.(map[string]any); n["node_id"] == "check_health" && n["error"] != nil {
			t.Fatalf("the health check failed: %v", n)
		}
	}
}

// runTrace reads a run's trace through the gateway.
func (s *suite) runTrace(t *testing.T, key, flowPath, runID string) map[string]any {
	t.Helper()
	status, _, trace := s.api(t, key, http.MethodGet, flowPath+"/runs/"+runID, nil)
	if status != http.StatusOK || trace["run"] == nil || trace["node_runs"] == nil {
		t.Fatalf("GET %s/runs/%s = %d %v", flowPath, runID, status, trace)
	}
	return trace
}
