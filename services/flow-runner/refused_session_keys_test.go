package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	svcconfig "github.com/parleyhq/parley/services/flow-runner/internal/config"
)

// Rule 7 for the refusals TestRefusedRequestLeavesTheKey does not make:
// 403 module_inactive, 410 session_expired and 409 session_busy. Each is
// the same refusal again for the same key and request (not a replay, not
// idempotency_in_progress), and the key is free for another request (not
// idempotency_key_reuse): nothing ran under it.
func TestModuleAndSessionRefusalsLeaveTheKey(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *svcconfig.Config) { c.SessionTTL = time.Minute })
	held := newHold(t)
	ws := uuid.NewString()
	counter := h.publish(ws, "", counterFlow)
	ask := h.publish(ws, "", doc("Order", apiOnly, "ask", askNode, byeNode))
	slow := h.publish(ws, "", doc("Slow", apiOnly, "ask", askNode,
		fmt.Sprintf(`{"id": "bye", "type": "http", "method": "GET", "url": %q, "save_as": "resp", "next": "done"}`, held.srv.URL),
		`{"id": "done", "type": "end", "output": {}}`))
	fresh := `{"input": {}}`
	// runs is how many runs the workspace has, checked after each step.
	runs := 0
	ran := func(step string, n int) {
		t.Helper()
		runs += n
		if got := h.runCount(ws); got != runs {
			t.Fatalf("%s: %d runs stored, want %d", step, got, runs)
		}
	}
	// runsFresh requires key, refused before, to run a fresh invoke of
	// flowID: answered 200, not replayed.
	runsFresh := func(step, flowID, key string) {
		t.Helper()
		status, hd, b := h.keyed(ws, flowID, key, fresh)
		if status != http.StatusOK || hd.Get(idempotency.ReplayedHeader) != "" {
			t.Fatalf("%s: key %q then = %d %v %s, want 200 not replayed", step, key, status, hd, b)
		}
	}

	// 403: without the flows module; with it, the same key and request run.
	path := "/v1/flows/" + counter + "/invoke"
	key := map[string]string{idempotency.Header: "module"}
	for range 2 {
		status, _, b := h.call(ws, full.without("flows"), http.MethodPost, path, fresh, key)
		wantError(t, status, b, http.StatusForbidden, "module_inactive")
	}
	ran("403", 0)
	runsFresh("after 403", counter, "module")
	ran("after 403", 1)

	// 410: a continue past FLOW_SESSION_TTL.
	waiting := h.invoke(ws, ask, map[string]any{"input": map[string]any{}})
	ran("waiting run", 1)
	h.clock.advance(time.Minute + time.Second)
	cont := fmt.Sprintf(`{"session_id": %q, "input": {"text": "A1"}}`, waiting.SessionID)
	for range 2 {
		status, _, b := h.keyed(ws, ask, "expired", cont)
		wantError(t, status, b, http.StatusGone, "session_expired")
	}
	runsFresh("after 410", ask, "expired")
	ran("after 410", 1)

	// 409: a continue while another continue of the session runs.
	busy := h.invoke(ws, slow, map[string]any{"input": map[string]any{}})
	ran("slow waiting run", 1)
	cont = fmt.Sprintf(`{"session_id": %q, "input": {"text": "A1"}}`, busy.SessionID)
	first := h.keyedLater(ws, slow, "first", cont)
	held.wait(t, 1)
	for range 2 {
		status, _, b := h.keyed(ws, slow, "busy", cont)
		wantError(t, status, b, http.StatusConflict, "session_busy")
	}
	held.letGo()
	<-first
	runsFresh("after 409", counter, "busy")
	ran("after 409", 1)
}

// Rule 2 on a continue: the same key and continue again is the first
// answer replayed, not 404 session_not_found for the run it finished, and
// the session is not continued twice.
func TestKeyedContinueIsReplayed(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	ask := h.publish(ws, "", doc("Order", apiOnly, "ask", askNode, byeNode))
	waiting := h.invoke(ws, ask, map[string]any{"input": map[string]any{"name": "Ann"}})
	cont := fmt.Sprintf(`{"session_id": %q, "input": {"text": "A1"}}`, waiting.SessionID)
	status, hd, first := h.keyed(ws, ask, "answer-1", cont)
	out := apicheck.Body[flowrunnerapi.InvokeResponse](t, first)
	if status != http.StatusOK || hd.Get(idempotency.ReplayedHeader) != "" || out.Status != "completed" || out.RunID != waiting.RunID {
		t.Fatalf("keyed continue: %d %v %s", status, hd, first)
	}
	nodeRuns := func() int {
		t.Helper()
		status, body := h.api(ws, full, http.MethodGet, "/v1/flows/"+ask+"/runs/"+waiting.RunID, nil)
		var tr struct {
			NodeRuns []map[string]any `json:"node_runs"`
		}
		if status != http.StatusOK {
			t.Fatalf("trace: %d %s", status, body)
		}
		decode(t, body, &tr)
		return len(tr.NodeRuns)
	}
	ran := nodeRuns()
	for range 2 {
		status, hd, again := h.keyed(ws, ask, "answer-1", cont)
		if status != http.StatusOK || hd.Get(idempotency.ReplayedHeader) != "true" || !jsonEqual(t, first, again) {
			t.Fatalf("repeat of the keyed continue: %d %v %s; want 200, replayed, %s", status, hd, again, first)
		}
	}
	if n := nodeRuns(); n != ran {
		t.Fatalf("the trace has %d node runs after the repeats, %d before: the session went on again", n, ran)
	}
	// Without the key, the finished run is no session.
	status, body := h.api(ws, full, http.MethodPost, "/v1/flows/"+ask+"/invoke", cont)
	wantError(t, status, body, http.StatusNotFound, "session_not_found")
}
