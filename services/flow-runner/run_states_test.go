package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// runTrace reads GET /v1/flows/:id/runs/:runId's run object.
func (h *harness) runTrace(ws, flowID, runID string) map[string]any {
	h.t.Helper()
	status, body := h.api(ws, full, http.MethodGet, "/v1/flows/"+flowID+"/runs/"+runID, nil)
	if status != http.StatusOK {
		h.t.Fatalf("GET run %s: %d %s", runID, status, body)
	}
	var tr struct {
		Run map[string]any `json:"run"`
	}
	decode(h.t, body, &tr)
	return tr.Run
}

// TestRunTraceFollowsItsStatus: the run object of the runs endpoint
// through each status of docs/flows.md: waiting (at its question, no
// completed_at, no error), then completed by a continue (completed_at,
// the same started_at), and failed (error {code, message}, completed_at).
func TestRunTraceFollowsItsStatus(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	ask := h.publish(ws, "", doc("Order", apiOnly, "ask", askNode, byeNode))

	r := h.invoke(ws, ask, map[string]any{"input": map[string]any{"name": "Ann"}})
	waiting := h.runTrace(ws, ask, r.RunID)
	if waiting["status"] != "waiting" || waiting["current_node_id"] != "ask" || waiting["started_at"] == nil {
		t.Fatalf("waiting run: %v", waiting)
	}
	for _, absent := range []string{"completed_at", "error"} {
		if v, has := waiting[absent]; has && v != nil {
			t.Fatalf("waiting run has %s %v: %v", absent, v, waiting)
		}
	}

	h.invoke(ws, ask, map[string]any{"session_id": r.SessionID, "input": map[string]any{"text": "A1"}})
	done := h.runTrace(ws, ask, r.RunID)
	if done["status"] != "completed" || done["current_node_id"] != "bye" || done["completed_at"] == nil || done["started_at"] != waiting["started_at"] {
		t.Fatalf("continued run: %v, started_at was %v", done, waiting["started_at"])
	}
	if v, has := done["error"]; has && v != nil {
		t.Fatalf("completed run has an error: %v", done)
	}

	failing := h.publish(ws, "", doc("Failing", apiOnly, "call",
		`{"id": "call", "type": "http", "method": "GET", "url": "http://127.0.0.1:1/nothing", "save_as": "resp", "next": "done"}`, endNode))
	f := h.invoke(ws, failing, map[string]any{"input": map[string]any{}})
	failed := h.runTrace(ws, failing, f.RunID)
	e, _ := failed["error"].(map[string]any)
	if failed["status"] != "failed" || failed["completed_at"] == nil || failed["current_node_id"] != "call" ||
		e["code"] != "node_failed" || !strings.Contains(e["message"].(string), "call") {
		t.Fatalf("failed run: %v", failed)
	}
}

// TestCallFlowTargetThatWaitsFailsTheRun: a call_flow target must be free
// of questions (docs/flows.md "call_flow"): one that has a question fails
// the run 200 node_failed naming it, even when the call would not reach
// it, and the run does not wait.
func TestCallFlowTargetThatWaitsFailsTheRun(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	target := h.publish(ws, "", doc("Asks sometimes", []string{"chat"}, "c",
		`{"id": "c", "type": "condition", "if": "vars.input.ask == true", "then": "ask", "else": "done"}`,
		askNode, byeNode, `{"id": "done", "type": "end", "output": {"asked": false}}`))
	caller := h.publish(ws, "", doc("Calls it", apiOnly, "call",
		`{"id": "call", "type": "call_flow", "flow_id": "`+target+`", "input": {"ask": "{{vars.input.ask}}"}, "save_as": "sub", "next": "done"}`, endNode))
	for _, ask := range []bool{false, true} {
		r := h.invoke(ws, caller, map[string]any{"input": map[string]any{"ask": ask}})
		if r.Status != "failed" || r.SessionID != "" || r.Error == nil || r.Error.Code != "node_failed" ||
			!strings.Contains(r.Error.Message, `"ask"`) || !strings.Contains(r.Error.Message, "question") {
			t.Fatalf("calling a flow with a question (ask %v): %+v, want failed node_failed naming the question", ask, r)
		}
	}
}

// TestFailedRunIsNoSession: a waiting run that a continue failed is
// finished, as a completed one is: a further continue is 404
// session_not_found and leaves it failed.
func TestFailedRunIsNoSession(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	id := h.publish(ws, "", doc("Ask then fail", apiOnly, "ask", askNode,
		`{"id": "bye", "type": "http", "method": "GET", "url": "http://127.0.0.1:1/nothing", "save_as": "resp", "next": "done"}`, endNode))
	r := h.invoke(ws, id, map[string]any{"input": map[string]any{}})
	if r.Status != "waiting" || r.SessionID == "" {
		t.Fatalf("invoke: %+v", r)
	}
	cont := map[string]any{"session_id": r.SessionID, "input": map[string]any{"text": "A1"}}
	if c := h.invoke(ws, id, cont); c.Status != "failed" || c.Error == nil || c.Error.Code != "node_failed" || c.SessionID != "" {
		t.Fatalf("continue: %+v, want failed node_failed", c)
	}
	status, body := h.api(ws, full, http.MethodPost, "/v1/flows/"+id+"/invoke", cont)
	wantError(t, status, body, http.StatusNotFound, "session_not_found")
	if run := h.runTrace(ws, id, r.RunID); run["status"] != "failed" {
		t.Fatalf("after the refused continue the run is %v", run["status"])
	}
}
