package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	svcconfig "github.com/parleyhq/parley/services/flow-runner/internal/config"
	"github.com/parleyhq/parley/services/flow-runner/migrations"
)

const (
	endNode  = `{"id": "done", "type": "end", "output": {"name": "{{vars.input.name}}"}}`
	greet    = `{"id": "hi", "type": "send_message", "message": {"type": "text", "text": "Hi {{vars.input.name}}"}, "next": "done"}`
	askNode  = `{"id": "ask", "type": "question", "text": "Your order?", "save_as": "order", "next": "bye"}`
	byeNode  = `{"id": "bye", "type": "end", "output": {"order": "{{vars.order}}", "first": "{{vars.input.name}}"}}`
	chatNode = `{"id": "hand", "type": "handover", "next": "done"}`
)

func TestPublishListAndDeactivate(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws, other := uuid.NewString(), uuid.NewString()

	api, _, gone := h.publishFlowKinds(ws, other)

	// A new version counts up, and of another workspace's flow is unknown.
	status, body := h.admin(http.MethodPost, "/admin/workspaces/"+ws+"/flows?flow_id="+api, doc("Greeter 2", apiOnly, "hi", greet, endNode))
	if status != http.StatusCreated || !strings.Contains(string(body), `"published_version":2`) || !strings.Contains(string(body), api) {
		t.Fatalf("republish: %d %s", status, body)
	}
	status, body = h.admin(http.MethodPost, "/admin/workspaces/"+other+"/flows?flow_id="+api, doc("Stolen", apiOnly, "done", endNode))
	wantError(t, status, body, http.StatusNotFound, "flow_not_found")
	status, body = h.admin(http.MethodPost, "/admin/workspaces/"+ws+"/flows?flow_id="+uuid.NewString(), doc("Nobody", apiOnly, "done", endNode))
	wantError(t, status, body, http.StatusNotFound, "flow_not_found")
	status, body = h.admin(http.MethodPost, "/admin/workspaces/"+ws+"/flows?flow_id=nope", doc("Nobody", apiOnly, "done", endNode))
	wantError(t, status, body, http.StatusNotFound, "flow_not_found")

	// A refusal is one line naming node and field.
	status, body = h.admin(http.MethodPost, "/admin/workspaces/"+ws+"/flows", doc("Bad", apiOnly, "hi", `{"id": "hi", "type": "send_message", "message": {"type": "text", "text": "x"}, "next": "nowhere"}`))
	msg := wantError(t, status, body, http.StatusBadRequest, "invalid_request")
	if !strings.Contains(msg, "hi") || !strings.Contains(msg, "next") || strings.Contains(msg, "\n") {
		t.Fatalf("refusal message %q", msg)
	}
	status, body = h.admin(http.MethodPost, "/admin/workspaces/"+ws+"/flows", "not json")
	wantError(t, status, body, http.StatusBadRequest, "invalid_request")
	status, body = h.admin(http.MethodPost, "/admin/workspaces/nope/flows", doc("X", apiOnly, "done", endNode))
	wantError(t, status, body, http.StatusBadRequest, "invalid_request")

	// Deactivate.
	status, body = h.admin(http.MethodPost, "/admin/flows/"+gone+"/deactivate", nil)
	if status != http.StatusOK || string(body) != fmt.Sprintf(`{"id":%q,"status":"inactive"}`+"\n", gone) && string(body) != fmt.Sprintf(`{"id":%q,"status":"inactive"}`, gone) {
		t.Fatalf("deactivate: %d %s", status, body)
	}
	status, body = h.admin(http.MethodPost, "/admin/flows/"+uuid.NewString()+"/deactivate", nil)
	wantError(t, status, body, http.StatusNotFound, "flow_not_found")
	// workspace_id, when given, must be a workspace id and the flow's.
	status, body = h.admin(http.MethodPost, "/admin/flows/"+gone+"/deactivate?workspace_id=nope", nil)
	wantError(t, status, body, http.StatusBadRequest, "invalid_request")
	status, body = h.admin(http.MethodPost, "/admin/flows/"+gone+"/deactivate?workspace_id="+uuid.NewString(), nil)
	wantError(t, status, body, http.StatusNotFound, "flow_not_found")
	status, body = h.admin(http.MethodPost, "/admin/flows/"+gone+"/deactivate?workspace_id="+ws, nil)
	if status != http.StatusOK {
		t.Fatalf("deactivate as its workspace: %d %s", status, body)
	}

	// The list: active api flows of the workspace, every field; no module
	// needed.
	status, body = h.api(ws, full.without("flows"), http.MethodGet, "/v1/flows", nil)
	if status != http.StatusOK {
		t.Fatalf("list: %d %s", status, body)
	}
	var list struct {
		Flows []map[string]any `json:"flows"`
	}
	decode(t, body, &list)
	if len(list.Flows) != 1 {
		t.Fatalf("list: %s", body)
	}
	f := list.Flows[0]
	if f["id"] != api || f["name"] != "Greeter 2" || f["description"] != "about Greeter 2" || f["status"] != "active" || f["published_version"] != float64(2) {
		t.Fatalf("flow: %v", f)
	}
	if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(f["updated_at"])); err != nil {
		t.Fatalf("updated_at: %v", f["updated_at"])
	}
	if len(f) != 6 {
		t.Fatalf("flow fields: %v", f)
	}

	// Deactivated: not invokable; republished: active again.
	status, body = h.api(ws, full, http.MethodPost, "/v1/flows/"+gone+"/invoke", map[string]any{"input": map[string]any{}})
	wantError(t, status, body, http.StatusNotFound, "flow_not_found")
	h.publish(ws, gone, doc("Back", apiOnly, "done", endNode))
	if r := h.invoke(ws, gone, map[string]any{"input": map[string]any{}}); r.Status != "completed" {
		t.Fatalf("republished: %+v", r)
	}

	// The list is the most recently updated first, whichever was created
	// first: each publish moves its flow to the top.
	for _, top := range []string{api, gone, api} {
		h.publish(ws, top, doc("Greeter", apiOnly, "done", endNode))
		status, body := h.api(ws, full, http.MethodGet, "/v1/flows", nil)
		list := apicheck.Body[flowrunnerapi.FlowsResponse](t, body)
		if status != http.StatusOK || len(list.Flows) != 2 || list.Flows[0].ID != top {
			t.Fatalf("list after publishing %s: %d %s", top, status, body)
		}
	}
}

func TestFeatureOffAndModules(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	id := h.publish(ws, "", doc("Greeter", apiOnly, "hi", greet, endNode))
	run := h.invoke(ws, id, map[string]any{"input": map[string]any{"name": "Ann"}})

	off := full.without("flows_api")
	for _, req := range []struct{ method, path string }{
		{http.MethodGet, "/v1/flows"},
		{http.MethodPost, "/v1/flows/" + id + "/invoke"},
		{http.MethodGet, "/v1/flows/" + id + "/runs/" + run.RunID},
	} {
		status, body := h.api(ws, off, req.method, req.path, map[string]any{"input": map[string]any{}})
		wantError(t, status, body, http.StatusNotFound, "not_found")
	}

	downgraded := full.without("flows", "flow_script", "flow_ai")
	status, body := h.api(ws, downgraded, http.MethodPost, "/v1/flows/"+id+"/invoke", map[string]any{"input": map[string]any{}})
	if msg := wantError(t, status, body, http.StatusForbidden, "module_inactive"); !strings.Contains(msg, "flows") {
		t.Fatalf("message %q names no module", msg)
	}
	if status, body := h.api(ws, downgraded, http.MethodGet, "/v1/flows", nil); status != http.StatusOK || !strings.Contains(string(body), id) {
		t.Fatalf("list after a downgrade: %d %s", status, body)
	}
	if status, body := h.api(ws, downgraded, http.MethodGet, "/v1/flows/"+id+"/runs/"+run.RunID, nil); status != http.StatusOK {
		t.Fatalf("run after a downgrade: %d %s", status, body)
	}
}

func TestInvokeRefusals(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws, other := uuid.NewString(), uuid.NewString()
	id := h.publish(ws, "", doc("Greeter", apiOnly, "hi", greet, endNode))
	chat := h.publish(ws, "", doc("Chat", []string{"chat"}, "done", endNode))
	path := "/v1/flows/" + id + "/invoke"

	nest := func(levels int) map[string]any {
		v := map[string]any{"leaf": 1}
		for i := 1; i < levels; i++ {
			v = map[string]any{"n": v}
		}
		return v
	}
	// sized is an input whose compact encoding is n bytes: {"s":"..."}.
	sized := func(n int) string { return `{"s":"` + strings.Repeat("a", n-8) + `"}` }

	for _, tt := range []struct {
		name string
		give string
	}{
		{"missing", `{}`},
		{"null", `{"input": null}`},
		{"string", `{"input": "hello"}`},
		{"array", `{"input": [1, 2]}`},
		{"number", `{"input": 3}`},
		{"16 KB and one byte", `{"input": ` + sized(16<<10+1) + `}`},
		{"six levels", `{"input": ` + mustJSON(nest(6)) + `}`},
		{"six levels through an array", `{"input": {"a": [{"b": {"c": {"d": [1]}}}]}}`},
	} {
		status, body := h.api(ws, full, http.MethodPost, path, tt.give)
		if msg := wantError(t, status, body, http.StatusBadRequest, "input_invalid"); !strings.Contains(msg, "input") {
			t.Errorf("%s: message %q", tt.name, msg)
		}
	}
	// At the limits it runs.
	for _, give := range []string{`{"input": ` + sized(16<<10) + `}`, `{"input": ` + mustJSON(nest(5)) + `}`, "{\"input\":   " + sized(16<<10) + "  }"} {
		if status, body := h.api(ws, full, http.MethodPost, path, give); status != http.StatusOK {
			t.Fatalf("at the limit: %d %s", status, body)
		}
	}
	status, body := h.api(ws, full, http.MethodPost, path, `{"input": `)
	wantError(t, status, body, http.StatusBadRequest, "invalid_request")

	for _, flowID := range []string{uuid.NewString(), "not-a-uuid", chat} {
		status, body := h.api(ws, full, http.MethodPost, "/v1/flows/"+flowID+"/invoke", `{"input": {}}`)
		wantError(t, status, body, http.StatusNotFound, "flow_not_found")
	}
	status, body = h.api(other, full, http.MethodPost, path, `{"input": {}}`)
	wantError(t, status, body, http.StatusNotFound, "flow_not_found")
}

func TestNotInvokableIsCheckedOnEveryInvoke(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	id := h.publish(ws, "", doc("Greeter", apiOnly, "hi", greet, endNode))
	if r := h.invoke(ws, id, map[string]any{"input": map[string]any{"name": "Ann"}}); r.Status != "completed" {
		t.Fatalf("first: %+v", r)
	}
	h.publish(ws, id, doc("Greeter", apiOnly, "hand", chatNode, endNode))
	status, body := h.api(ws, full, http.MethodPost, "/v1/flows/"+id+"/invoke", `{"input": {}}`)
	if msg := wantError(t, status, body, http.StatusUnprocessableEntity, "flow_not_invokable"); !strings.Contains(msg, "hand") {
		t.Fatalf("message %q does not name the node", msg)
	}
	// A fixed version runs again at once.
	h.publish(ws, id, doc("Greeter", apiOnly, "hi", greet, endNode))
	if r := h.invoke(ws, id, map[string]any{"input": map[string]any{}}); r.Status != "completed" {
		t.Fatalf("fixed: %+v", r)
	}
}

func TestCompletedRunAndTrace(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws, other := uuid.NewString(), uuid.NewString()
	id := h.publish(ws, "", doc("Greeter", apiOnly, "hi", greet, endNode))
	second := h.publish(ws, "", doc("Second", apiOnly, "done", endNode))

	status, raw := h.api(ws, full, http.MethodPost, "/v1/flows/"+id+"/invoke", map[string]any{"input": map[string]any{"name": "Ann"}})
	r := apicheck.Body[flowrunnerapi.InvokeResponse](t, raw)
	if status != http.StatusOK || r.Status != "completed" || r.SessionID != "" || r.Error != nil || r.Output["name"] != "Ann" ||
		!strings.Contains(string(raw), `"usage":{"tokens":0,"cost_usd":0,"billable_units":0}`) {
		t.Fatalf("invoke: %d %s", status, raw)
	}
	if len(r.Messages) != 1 || r.Messages[0].Type != "text" || r.Messages[0].Text != "Hi Ann" {
		t.Fatalf("messages: %v", r.Messages)
	}
	if v, err := uuid.Parse(r.RunID); err != nil || v.Version() != 7 {
		t.Fatalf("run id %q is not a UUIDv7", r.RunID)
	}
	// The run is counted on the instance's /metrics.
	resp, err := http.Get("http://" + h.cfg.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`parley_flow_runner_runs_total{status="completed"} 1`, `parley_flow_runner_run_duration_seconds_count{status="completed"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}

	status, body := h.api(ws, full, http.MethodGet, "/v1/flows/"+id+"/runs/"+r.RunID, nil)
	if status != http.StatusOK {
		t.Fatalf("trace: %d %s", status, body)
	}
	var tr struct {
		Run      map[string]any   `json:"run"`
		NodeRuns []map[string]any `json:"node_runs"`
	}
	decode(t, body, &tr)
	run := tr.Run
	if run["id"] != r.RunID || run["flow_id"] != id || run["status"] != "completed" || run["current_node_id"] != "done" ||
		run["nodes_executed"] != float64(3) || run["completed_at"] == nil || run["started_at"] == nil {
		t.Fatalf("run: %v", run)
	}
	if _, has := run["error"]; has {
		t.Fatalf("run of a completed run has an error: %v", run)
	}
	vars, _ := run["vars"].(map[string]any)
	if in, _ := vars["input"].(map[string]any); in["name"] != "Ann" {
		t.Fatalf("vars: %v", vars)
	}
	if out, _ := run["output"].(map[string]any); out["name"] != "Ann" {
		t.Fatalf("output: %v", run["output"])
	}
	var ids []string
	for _, n := range tr.NodeRuns {
		ids = append(ids, fmt.Sprint(n["node_id"], ":", n["node_type"]))
		for _, k := range []string{"started_at", "duration_ms", "input", "output", "tokens", "cost_usd"} {
			if _, ok := n[k]; !ok {
				t.Fatalf("node run without %s: %v", k, n)
			}
		}
	}
	if strings.Join(ids, " ") != "start:start hi:send_message done:end" {
		t.Fatalf("node runs: %v", ids)
	}

	for _, tt := range []struct{ ws, flow, run string }{
		{other, id, r.RunID},
		{ws, second, r.RunID},
		{ws, id, uuid.NewString()},
		{ws, id, "nope"},
	} {
		status, body := h.api(tt.ws, full, http.MethodGet, "/v1/flows/"+tt.flow+"/runs/"+tt.run, nil)
		wantError(t, status, body, http.StatusNotFound, "run_not_found")
	}
	// A chat run is not readable through the API.
	if err := h.env.DB(t, "flows", migrations.FS).Exec(`UPDATE flows.runs SET source = 'chat', conversation_id = gen_random_uuid(), channel_id = gen_random_uuid() WHERE id = ?`, r.RunID).Error; err != nil {
		t.Fatal(err)
	}
	status, body = h.api(ws, full, http.MethodGet, "/v1/flows/"+id+"/runs/"+r.RunID, nil)
	wantError(t, status, body, http.StatusNotFound, "run_not_found")
}

func TestSession(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws, other := uuid.NewString(), uuid.NewString()
	id := h.publish(ws, "", doc("Order", apiOnly, "ask", askNode, byeNode))
	another := h.publish(ws, "", doc("Another", apiOnly, "ask", askNode, byeNode))
	path := "/v1/flows/" + id + "/invoke"

	r := h.invoke(ws, id, map[string]any{"input": map[string]any{"name": "Ann"}})
	if r.Status != "waiting" || r.SessionID == "" || len(r.Messages) != 1 || r.Messages[0].Text != "Your order?" {
		t.Fatalf("invoke: %+v", r)
	}
	// Refusals that leave the session waiting.
	status, body := h.api(ws, full, http.MethodPost, path, map[string]any{"session_id": r.SessionID, "input": map[string]any{"name": "Bob"}})
	if msg := wantError(t, status, body, http.StatusBadRequest, "input_invalid"); !strings.Contains(msg, "input.text") {
		t.Fatalf("message %q", msg)
	}
	status, body = h.api(ws, full, http.MethodPost, path, map[string]any{"session_id": r.SessionID, "input": map[string]any{"text": 42}})
	wantError(t, status, body, http.StatusBadRequest, "input_invalid")
	status, body = h.api(ws, full, http.MethodPost, path, map[string]any{"session_id": r.SessionID})
	if msg := wantError(t, status, body, http.StatusBadRequest, "input_invalid"); !strings.HasPrefix(msg, "input: ") {
		t.Fatalf("a continue without input: message %q, want it to name input", msg)
	}
	for _, tt := range []struct{ ws, path, session string }{
		{ws, path, uuid.NewString()},
		{ws, path, "nope"},
		{other, path, r.SessionID},
		{ws, "/v1/flows/" + another + "/invoke", r.SessionID},
	} {
		status, body := h.api(tt.ws, full, http.MethodPost, tt.path, map[string]any{"session_id": tt.session, "input": map[string]any{"text": "A1"}})
		if tt.ws == other {
			wantError(t, status, body, http.StatusNotFound, "flow_not_found")
			continue
		}
		wantError(t, status, body, http.StatusNotFound, "session_not_found")
	}

	// The continue: only input.text is read, vars.input stays the first.
	c := h.invoke(ws, id, map[string]any{"session_id": r.SessionID, "input": map[string]any{"text": "A1", "name": "Bob"}})
	if c.Status != "completed" || c.RunID != r.RunID || c.SessionID != "" || c.Output["order"] != "A1" || c.Output["first"] != "Ann" {
		t.Fatalf("continue: %+v", c)
	}
	// A finished run is not a session.
	status, body = h.api(ws, full, http.MethodPost, path, map[string]any{"session_id": r.SessionID, "input": map[string]any{"text": "again"}})
	wantError(t, status, body, http.StatusNotFound, "session_not_found")

	// The trace holds both calls in order.
	status, body = h.api(ws, full, http.MethodGet, "/v1/flows/"+id+"/runs/"+r.RunID, nil)
	if status != http.StatusOK || !strings.Contains(string(body), `"node_id":"ask"`) || !strings.Contains(string(body), `"node_id":"bye"`) ||
		strings.Index(string(body), `"node_id":"ask"`) > strings.Index(string(body), `"node_id":"bye"`) {
		t.Fatalf("trace: %d %s", status, body)
	}
}

func TestSessionExpired(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *svcconfig.Config) { c.SessionTTL = time.Minute })
	ws := uuid.NewString()
	id := h.publish(ws, "", doc("Order", apiOnly, "ask", askNode, byeNode))
	r := h.invoke(ws, id, map[string]any{"input": map[string]any{}})
	h.clock.advance(time.Minute + time.Second)
	status, body := h.api(ws, full, http.MethodPost, "/v1/flows/"+id+"/invoke", map[string]any{"session_id": r.SessionID, "input": map[string]any{"text": "A1"}})
	wantError(t, status, body, http.StatusGone, "session_expired")
	// Unchanged: still expired, not finished.
	status, body = h.api(ws, full, http.MethodPost, "/v1/flows/"+id+"/invoke", map[string]any{"session_id": r.SessionID, "input": map[string]any{"text": "A1"}})
	wantError(t, status, body, http.StatusGone, "session_expired")
}

// TestSessionBusyAcrossInstances races two continues of one session on two
// instances sharing the database: the first holds the run in an http node
// whose receiver blocks, the second is refused at once.
func TestSessionBusyAcrossInstances(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	arrived := make(chan struct{}, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok": true}`))
	}))
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }); recv.Close() })

	one := start(t, nil)
	two := startOn(t, one.env, "-two", nil)
	ws := uuid.NewString()
	id := one.publish(ws, "", doc("Slow", apiOnly, "ask", askNode,
		fmt.Sprintf(`{"id": "bye", "type": "http", "method": "GET", "url": %q, "save_as": "resp", "next": "done"}`, recv.URL),
		`{"id": "done", "type": "end", "output": {"ok": "{{vars.resp.body.ok}}"}}`))
	r := one.invoke(ws, id, map[string]any{"input": map[string]any{}})
	cont := map[string]any{"session_id": r.SessionID, "input": map[string]any{"text": "A1"}}

	first := make(chan flowrunnerapi.InvokeResponse, 1)
	go func() {
		status, body := one.api(ws, full, http.MethodPost, "/v1/flows/"+id+"/invoke", cont)
		var out flowrunnerapi.InvokeResponse
		if status == http.StatusOK {
			decode(t, body, &out)
		} else {
			out.Status = fmt.Sprintf("%d %s", status, body)
		}
		first <- out
	}()
	select {
	case <-arrived:
	case <-time.After(15 * time.Second):
		t.Fatal("the first continue did not reach the http node")
	}
	began := time.Now()
	status, body := two.api(ws, full, http.MethodPost, "/v1/flows/"+id+"/invoke", cont)
	wantError(t, status, body, http.StatusConflict, "session_busy")
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("session_busy took %s", took)
	}
	releaseOnce.Do(func() { close(release) })
	if out := <-first; out.Status != "completed" || out.Output["ok"] != true {
		t.Fatalf("first continue: %+v", out)
	}
	status, body = two.api(ws, full, http.MethodPost, "/v1/flows/"+id+"/invoke", cont)
	wantError(t, status, body, http.StatusNotFound, "session_not_found")
}

func TestRunBudget(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *svcconfig.Config) { c.BudgetTime = 2 * time.Second })
	ws := uuid.NewString()

	loop := h.publish(ws, "", doc("Loop", apiOnly, "loop",
		`{"id": "loop", "type": "loop", "over": "1..201", "as": "item", "body": "each", "max_iterations": 1000, "next": "done"}`,
		`{"id": "each", "type": "variable", "set": {"last": "{{vars.item}}"}}`,
		`{"id": "done", "type": "end", "output": {}}`))
	began := time.Now()
	r := h.invoke(ws, loop, map[string]any{"input": map[string]any{}})
	if r.Status != "failed" || r.Error == nil || r.Error.Code != "run_budget_exceeded" {
		t.Fatalf("201-node loop: %+v", r)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("201-node loop took %s", took)
	}
	// The node the budget stopped is in the trace as not run.
	status, body := h.api(ws, full, http.MethodGet, "/v1/flows/"+loop+"/runs/"+r.RunID, nil)
	var tr struct {
		Run      map[string]any   `json:"run"`
		NodeRuns []map[string]any `json:"node_runs"`
	}
	decode(t, body, &tr)
	last := tr.NodeRuns[len(tr.NodeRuns)-1]
	if status != http.StatusOK || tr.Run["nodes_executed"] != float64(200) || last["node_id"] != "each" || last["duration_ms"] != float64(0) ||
		!strings.Contains(fmt.Sprint(last["error"]), "run_budget_exceeded") {
		t.Fatalf("trace of the loop: %d run %v last %v", status, tr.Run, last)
	}

	endless := h.publish(ws, "", doc("Endless", apiOnly, "js",
		`{"id": "js", "type": "script", "code": "while (true) {}", "save_as": "x", "next": "done"}`,
		`{"id": "done", "type": "end", "output": {}}`))
	began = time.Now()
	r = h.invoke(ws, endless, map[string]any{"input": map[string]any{}})
	if r.Status != "failed" || r.Error == nil || r.Error.Code != "run_budget_exceeded" {
		t.Fatalf("endless script: %+v", r)
	}
	if took := time.Since(began); took > 8*time.Second {
		t.Fatalf("endless script took %s", took)
	}

	// Without flow_script the run fails module_inactive; the node's error
	// says why.
	status, body = h.api(ws, full.without("flow_script"), http.MethodPost, "/v1/flows/"+endless+"/invoke", `{"input": {}}`)
	out := apicheck.Body[flowrunnerapi.InvokeResponse](t, body)
	if status != http.StatusOK || out.Status != "failed" || out.Error == nil || out.Error.Code != "module_inactive" {
		t.Fatalf("without flow_script: %d %s", status, body)
	}
	status, body = h.api(ws, full, http.MethodGet, "/v1/flows/"+endless+"/runs/"+out.RunID, nil)
	if status != http.StatusOK || !strings.Contains(string(body), "flow_script_module_inactive") {
		t.Fatalf("trace without flow_script: %d %s", status, body)
	}
}

func TestCallFlowDepth(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	// chain publishes n flows, each calling the next, the last ending; it
	// returns the first.
	chain := func(n int) string {
		next := h.publish(ws, "", doc("Leaf", []string{"chat"}, "done", `{"id": "done", "type": "end", "output": {"leaf": true}}`))
		for i := 1; i < n; i++ {
			next = h.publish(ws, "", doc(fmt.Sprint("Caller ", i), apiOnly, "call",
				fmt.Sprintf(`{"id": "call", "type": "call_flow", "flow_id": %q, "input": {}, "save_as": "sub", "next": "done"}`, next),
				`{"id": "done", "type": "end", "output": {"leaf": "{{vars.sub.leaf}}"}}`))
		}
		return next
	}
	// The invoked flow and 3 nested calls: depth 3.
	if r := h.invoke(ws, chain(4), map[string]any{"input": map[string]any{}}); r.Status != "completed" || r.Output["leaf"] != true {
		t.Fatalf("depth 3: %+v", r)
	}
	if r := h.invoke(ws, chain(5), map[string]any{"input": map[string]any{}}); r.Status != "failed" || r.Error == nil || r.Error.Code != "node_failed" {
		t.Fatalf("depth 4: %+v", r)
	}
	// A call_flow target that is not invokable fails the run.
	bad := h.publish(ws, "", doc("Bad target", []string{"chat"}, "hand", chatNode, endNode))
	caller := h.publish(ws, "", doc("Calls bad", apiOnly, "call",
		fmt.Sprintf(`{"id": "call", "type": "call_flow", "flow_id": %q, "input": {}, "save_as": "sub", "next": "done"}`, bad), endNode))
	if r := h.invoke(ws, caller, map[string]any{"input": map[string]any{}}); r.Status != "failed" {
		t.Fatalf("bad target: %+v", r)
	}
	// So does a target that is inactive, or another workspace's.
	inactive := h.publish(ws, "", doc("Inactive", []string{"chat"}, "done", endNode))
	if status, body := h.admin(http.MethodPost, "/admin/flows/"+inactive+"/deactivate", nil); status != http.StatusOK {
		t.Fatalf("deactivate: %d %s", status, body)
	}
	foreign := h.publish(uuid.NewString(), "", doc("Foreign", []string{"chat"}, "done", endNode))
	for _, target := range []string{inactive, foreign} {
		caller := h.publish(ws, "", doc("Calls "+target, apiOnly, "call",
			fmt.Sprintf(`{"id": "call", "type": "call_flow", "flow_id": %q, "input": {}, "save_as": "sub", "next": "done"}`, target), endNode))
		if r := h.invoke(ws, caller, map[string]any{"input": map[string]any{}}); r.Status != "failed" || r.Error == nil || r.Error.Code != "node_failed" {
			t.Fatalf("target %s: %+v", target, r)
		}
	}
}

func mustJSON(v any) string {
	var b strings.Builder
	if err := jsonEncoder(&b).Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSpace(b.String())
}

// TestNULIsStored runs flows whose input, name and node error hold a NUL:
// each run is stored and readable, never a 500.
func TestNULIsStored(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	id := h.publish(ws, "", doc("Nul\u0000name", apiOnly, "hi", greet, endNode))
	r := h.invoke(ws, id, map[string]any{"input": map[string]any{"name": "a\u0000b"}})
	if r.Status != "completed" || r.Output["name"] != "a\u0000b" {
		t.Fatalf("invoke: %+v", r)
	}
	if status, body := h.api(ws, full, http.MethodGet, "/v1/flows/"+id+"/runs/"+r.RunID, nil); status != http.StatusOK {
		t.Fatalf("trace: %d %s", status, body)
	}
	thrower := h.publish(ws, "", doc("Thrower", apiOnly, "js",
		`{"id": "js", "type": "script", "code": "throw new Error('a\\u0000b')", "save_as": "x", "next": "done"}`, endNode))
	r = h.invoke(ws, thrower, map[string]any{"input": map[string]any{}})
	if r.Status != "failed" || r.Error == nil || r.Error.Code != "node_failed" {
		t.Fatalf("thrower: %+v", r)
	}
	if status, body := h.api(ws, full, http.MethodGet, "/v1/flows/"+thrower+"/runs/"+r.RunID, nil); status != http.StatusOK {
		t.Fatalf("thrower trace: %d %s", status, body)
	}
}

// TestTwoQuestions continues a run that waits twice: waiting, waiting,
// completed, one session throughout.
func TestTwoQuestions(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	id := h.publish(ws, "", doc("Two", apiOnly, "q1",
		`{"id": "q1", "type": "question", "text": "First?", "save_as": "a", "next": "q2"}`,
		`{"id": "q2", "type": "question", "text": "Second?", "save_as": "b", "next": "done"}`,
		`{"id": "done", "type": "end", "output": {"both": "{{vars.a + vars.b}}"}}`))
	r := h.invoke(ws, id, map[string]any{"input": map[string]any{}})
	c1 := h.invoke(ws, id, map[string]any{"session_id": r.SessionID, "input": map[string]any{"text": "x"}})
	if c1.Status != "waiting" || c1.SessionID != r.SessionID || len(c1.Messages) != 1 || c1.Messages[0].Text != "Second?" {
		t.Fatalf("first continue: %+v", c1)
	}
	c2 := h.invoke(ws, id, map[string]any{"session_id": r.SessionID, "input": map[string]any{"text": "y"}})
	if c2.Status != "completed" || c2.Output["both"] != "xy" {
		t.Fatalf("second continue: %+v", c2)
	}
	// The trace holds every call's node runs in order: a question once when
	// asked and once when answered.
	status, body := h.api(ws, full, http.MethodGet, "/v1/flows/"+id+"/runs/"+r.RunID, nil)
	tr := apicheck.Body[flowrunnerapi.Trace](t, body)
	var ids []string
	for _, n := range tr.NodeRuns {
		ids = append(ids, n.NodeID)
	}
	if status != http.StatusOK || strings.Join(ids, " ") != "start q1 q1 q2 q2 done" {
		t.Fatalf("trace: %d %v", status, ids)
	}
}

// TestStagesAndPrivateTargets runs a flow-runner with script closed and
// private targets refused: a script flow is refused at publish naming the
// node, and an http node to loopback fails the run.
func TestStagesAndPrivateTargets(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *svcconfig.Config) {
		c.StagesOpen = "call_flow,condition.cases"
		c.AllowPrivateTargets = false
	})
	ws := uuid.NewString()
	status, body := h.admin(http.MethodPost, "/admin/workspaces/"+ws+"/flows", doc("Script", apiOnly, "js",
		`{"id": "js", "type": "script", "code": "return 1", "save_as": "x", "next": "done"}`, endNode))
	if msg := wantError(t, status, body, http.StatusBadRequest, "invalid_request"); !strings.Contains(msg, "js") {
		t.Fatalf("message %q does not name the node", msg)
	}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(recv.Close)
	id := h.publish(ws, "", doc("Local", apiOnly, "call",
		fmt.Sprintf(`{"id": "call", "type": "http", "url": %q, "save_as": "resp", "next": "done"}`, recv.URL), endNode))
	if r := h.invoke(ws, id, map[string]any{"input": map[string]any{}}); r.Status != "failed" || r.Error == nil || r.Error.Code != "node_failed" {
		t.Fatalf("http to loopback: %+v", r)
	}
}
