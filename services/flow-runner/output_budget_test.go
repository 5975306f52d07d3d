package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/bytesize"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	"github.com/parleyhq/parley/services/flow-runner/internal/adapters"
	svcconfig "github.com/parleyhq/parley/services/flow-runner/internal/config"
	"github.com/parleyhq/parley/services/flow-runner/migrations"
)

// The abuse of a run's size, scaled to stay quick: a loop of 150
// send_message nodes of 200,000 characters each (the report's had 1 MB
// each and drove the flow-runner to 3 GB) against a RUN_OUTPUT_LIMIT of
// 512 KiB. The run fails in-run at the third message, which is neither
// sent nor kept, and what the caller is told (a JSON answer, its replay,
// a stream) is what is stored. BenchmarkFlowRunMemory (e2e) runs the
// report's sizes against the built binary and holds its memory.
func TestOutputBudgetStopsAFloodInRun(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *svcconfig.Config) { c.OutputLimit = 512 * bytesize.KiB })
	ws := uuid.NewString()
	id := h.publish(ws, "", doc("Flood", apiOnly, "each",
		`{"id": "each", "type": "loop", "over": "1..150", "as": "i", "body": "say", "max_iterations": 150, "next": "done"}`,
		`{"id": "say", "type": "send_message", "message": {"type": "text", "text": "{{repeat('x', 200000)}}"}}`,
		`{"id": "done", "type": "end", "output": {"sent": "all"}}`))
	path := "/v1/flows/" + id + "/invoke"
	want := flowrunnerapi.RunError{Code: "run_budget_exceeded",
		Message: `the run's messages and output would pass its budget of 512 KiB (RUN_OUTPUT_LIMIT); node "say" was stopped`}
	const nodeError = "run_budget_exceeded: the run's messages and output would pass its budget of 512 KiB (RUN_OUTPUT_LIMIT)"

	// The JSON answer: 200 failed, with the two messages that fit.
	status, _, first := h.call(ws, full, http.MethodPost, path, `{"input": {}}`, map[string]string{idempotency.Header: "flood-1"})
	if status != http.StatusOK {
		t.Fatalf("invoke: %d %.300s", status, first)
	}
	answer := apicheck.Body[flowrunnerapi.InvokeResponse](t, first)
	if answer.Status != "failed" || answer.Error == nil || *answer.Error != want || len(answer.Messages) != 2 || len(answer.Output) != 0 {
		t.Fatalf("invoke: %s %+v, %d messages, output %v", answer.Status, answer.Error, len(answer.Messages), answer.Output)
	}
	// An answer that large is not kept for its key: a repeat is told the
	// run, which is stored as the answer said.
	status, _, again := h.call(ws, full, http.MethodPost, path, `{"input": {}}`, map[string]string{idempotency.Header: "flood-1"})
	var refused struct {
		Code  string `json:"code"`
		RunID string `json:"run_id"`
	}
	decode(t, again, &refused)
	if status != http.StatusConflict || refused.Code != "idempotency_response_unavailable" || refused.RunID != answer.RunID {
		t.Fatalf("repeat: %d %.300s", status, again)
	}
	h.wantStored(ws, id, answer.RunID, want, nodeError, 2)

	// A stream: the two messages, the stopped node's end with its error,
	// the end failed with the run's.
	_, _, body := h.call(ws, full, http.MethodPost, path, `{"input": {}, "stream": true}`, nil)
	events, _ := parseSSE(t, string(body))
	if len(events) < 2 || events[0].name != "run_start" {
		t.Fatalf("events %v", names(events))
	}
	messages, stopped := 0, -1
	for i, e := range events {
		switch {
		case e.name == "message":
			messages++
		case e.name == "node_end" && e.data["node_id"] == "say" && e.data["error"] != nil:
			stopped = i
		}
	}
	end := events[len(events)-1]
	endErr, _ := end.data["error"].(map[string]any)
	if messages != 2 || stopped < 0 || events[stopped].data["error"] != nodeError || end.name != "end" ||
		end.data["status"] != "failed" || endErr["code"] != want.Code || endErr["message"] != want.Message {
		t.Fatalf("stream: %d messages, stopped node_end at %d, end %v", messages, stopped, end)
	}
	h.wantStored(ws, id, events[0].data["run_id"].(string), want, nodeError, 2)
}

// wantStored checks that the run is stored failed with the error it was
// answered, its stopped node in its trace, and as many messages as the
// caller got.
func (h *harness) wantStored(ws, flowID, runID string, want flowrunnerapi.RunError, nodeError string, messages int) {
	h.t.Helper()
	status, raw := h.api(ws, full, http.MethodGet, "/v1/flows/"+flowID+"/runs/"+runID, nil)
	if status != http.StatusOK {
		h.t.Fatalf("trace: %d %.300s", status, raw)
	}
	tr := apicheck.Body[flowrunnerapi.Trace](h.t, raw)
	last := tr.NodeRuns[len(tr.NodeRuns)-1]
	if tr.Run.Status != "failed" || tr.Run.Error == nil || *tr.Run.Error != want || last.NodeID != "say" || last.Error != nodeError {
		h.t.Fatalf("stored run %s %+v, last node run %s %q", tr.Run.Status, tr.Run.Error, last.NodeID, last.Error)
	}
	var stored int
	if err := h.env.DB(h.t, adapters.Schema, migrations.FS).Raw(`SELECT json_array_length(messages) FROM flows.runs WHERE id = ?`, runID).
		Scan(&stored).Error; err != nil || stored != messages {
		h.t.Fatalf("stored messages %d (%v); want %d", stored, err, messages)
	}
	if strings.Contains(string(raw), `"truncated"`) {
		h.t.Fatalf("the trace of two messages was cut: %.300s", raw)
	}
}
