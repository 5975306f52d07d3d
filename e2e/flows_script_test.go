package e2e

import (
	"net/http"
	"testing"
)

// TestScriptNodesRunInWorkers runs script nodes through the built
// flow-runner, whose own binary is each script's worker process: a
// script's value comes back in the run's output, and a regular expression
// that backtracks for hours fails its run at the time budget, answered.
func TestScriptNodesRunInWorkers(t *testing.T) {
	t.Parallel()
	s := startSuite(t, "RUN_BUDGET_TIME=1s")
	wsID, key := s.workspaceWithKey(t, "Scripts", "developer_api,flows,flow_script")
	publish := func(doc string) string {
		t.Helper()
		var pub struct {
			ID string `json:"id"`
		}
		s.ctl(t, &pub, "flow", "publish", "--workspace", wsID, "--file", flowFile(t, doc))
		return pub.ID
	}

	double := publish(`{"name": "Double", "triggers": ["api"], "nodes": [
		{"id": "start", "type": "start", "next": "js"},
		{"id": "js", "type": "script", "code": "return vars.input.n * 2", "save_as": "twice", "next": "done"},
		{"id": "done", "type": "end", "output": {"twice": "{{vars.twice}}"}}]}`)
	status, _, run := s.api(t, key, http.MethodPost, "/v1/flows/"+double+"/invoke", map[string]any{"input": map[string]any{"n": 21}})
	if out, _ := run["output"].(map[string]any); status != http.StatusOK || run["status"] != "completed" || out["twice"] != float64(42) {
		t.Fatalf("a script doubling 21: %d %v", status, run)
	}

	runaway := publish(`{"name": "Runaway", "triggers": ["api"], "nodes": [
		{"id": "start", "type": "start", "next": "js"},
		{"id": "js", "type": "script", "code": "return /^(a+)+\\1(?=b)$/.test('a'.repeat(40) + 'c')", "save_as": "x", "next": "done"},
		{"id": "done", "type": "end"}]}`)
	status, _, run = s.api(t, key, http.MethodPost, "/v1/flows/"+runaway+"/invoke", map[string]any{"input": map[string]any{}})
	if e, _ := run["error"].(map[string]any); status != http.StatusOK || run["status"] != "failed" || e["code"] != "run_budget_exceeded" {
		t.Fatalf("a runaway regular expression: %d %v", status, run)
	}
}
