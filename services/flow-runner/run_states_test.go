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
