package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	"github.com/parleyhq/parley/services/flow-runner/internal/adapters/script"
	svcconfig "github.com/parleyhq/parley/services/flow-runner/internal/config"
)

// TestRunawayScriptHoldsItsPlaceUntilStopped invokes a flow whose script
// node runs a regular expression that backtracks for hours, in a
// workspace with one concurrency place. The run fails at its time budget,
// and by its answer the script's worker is gone: no CPU of it outlives the
// run, and the place it frees takes the next run at once. Not parallel: it
// looks at every script worker of this process. The budget (3 s) is the
// next run's too: on a machine busy with other tests, its worker, started
// once the runaway one was stopped, must have time to come up.
func TestRunawayScriptHoldsItsPlaceUntilStopped(t *testing.T) {
	h := start(t, func(c *svcconfig.Config) { c.Concurrency = 1; c.BudgetTime = 3 * time.Second })
	ws := uuid.NewString()
	runaway := h.publish(ws, "", doc("Runaway", apiOnly, "js",
		`{"id": "js", "type": "script", "code": "return /^(a+)+\\1(?=b)$/.test('a'.repeat(40) + 'c')", "save_as": "x", "next": "done"}`, endNode))
	quick := h.publish(ws, "", doc("Quick", apiOnly, "js",
		`{"id": "js", "type": "script", "code": "return 42", "save_as": "x", "next": "done"}`, endNode))

	r := h.invoke(ws, runaway, map[string]any{"input": map[string]any{}})
	// At once: before the next request, as the next run would start.
	workers := scriptWorkers(t)
	if r.Status != "failed" || r.Error == nil || r.Error.Code != "run_budget_exceeded" {
		t.Fatalf("runaway script: %+v", r)
	}
	// The runaway one burned its budget; a worker started ahead has used
	// a few milliseconds.
	for pid, cpu := range workers {
		if cpu >= 1500*time.Millisecond {
			t.Errorf("worker %d has used %s of CPU after the run's answer", pid, cpu)
		}
	}
	if next := h.invoke(ws, quick, map[string]any{"input": map[string]any{}}); next.Status != "completed" {
		t.Errorf("the next run: %+v, error %+v", next, next.Error)
	}

	status, body := h.api(ws, full, http.MethodGet, "/v1/flows/"+runaway+"/runs/"+r.RunID, nil)
	tr := apicheck.Body[flowrunnerapi.Trace](t, body)
	if status != http.StatusOK || len(tr.NodeRuns) == 0 {
		t.Fatalf("trace: %d %s", status, body)
	}
	if last := tr.NodeRuns[len(tr.NodeRuns)-1]; last.NodeID != "js" || !strings.Contains(fmt.Sprint(last.Error), "run_budget_exceeded") {
		t.Errorf("the script node's run: %+v", last)
	}
}

// scriptWorkers is the CPU time each script worker of this process has
// used, by pid.
func scriptWorkers(t *testing.T) map[int]time.Duration {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	workers := map[int]time.Duration{}
	for _, path := range stats {
		stat, err := os.ReadFile(path)
		if err != nil {
			continue // ended meanwhile
		}
		// After "pid (comm) ": state ppid ... utime (14th field) stime.
		_, rest, ok := strings.Cut(string(stat), ") ")
		fields := strings.Fields(rest)
		if !ok || len(fields) < 13 || fields[1] != self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(filepath.Dir(path), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), script.WorkerCommand) {
			continue
		}
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		// /proc counts in USER_HZ, 100 a second on Linux.
		workers[pid] = time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return workers
}
