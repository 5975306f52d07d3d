package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// BenchmarkFlowRunMemory is issue 21's attack on a run's size, at its
// sizes: a flow that loops 150 times over a send_message of
// {{repeat('x', 1000000)}} once drove the flow-runner from 170 MB to 3 GB
// of memory, and four callers at once multiplied it. Here four such runs
// go at once (one op), through the built gateway to the built
// flow-runner with its defaults (RUN_OUTPUT_LIMIT 1 MiB), and every
// answer must be 200 failed run_budget_exceeded naming the limit, after
// the one message that fits. Reported: the flow-runner's resident memory
// before the first op (idle-MB), its peak over its life (peak-MB, VmHWM
// of /proc/<pid>/status) and right after the last op (after-MB). The
// benchmark fails if the peak passes 300 MB. after-MB still holds the
// last runs' garbage: an idle Go process collects it at the GC the
// runtime forces every two minutes, and gives the pages back over the
// minutes after (docs/benchmarks.md "A run's memory").
//
// Run with: go test -run '^$' -bench BenchmarkFlowRunMemory . (in e2e/).
func BenchmarkFlowRunMemory(b *testing.B) {
	// One suite for every round of the sub-benchmark, so that the peak is
	// over all of them.
	s := startSuite(b, "INVOKE_DAILY_CAP=100000000")
	ws, key := s.flowDeveloper(b)
	var pub struct {
		ID string `json:"id"`
	}
	s.ctl(b, &pub, "flow", "publish", "--workspace", ws, "--file", flowFile(b, floodFlow))
	runner := s.procs["flow-runner"].cmd.Process.Pid
	idle := residentMB(b, runner, "VmRSS")
	b.Run("four-runs", func(b *testing.B) {
		for range b.N {
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- checkFlood(postFlow(context.Background(), s.gatewayURL, key, invokePath(pub.ID), `{"input": {}}`))
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		peak, after := residentMB(b, runner, "VmHWM"), residentMB(b, runner, "VmRSS")
		b.ReportMetric(idle, "idle-MB")
		b.ReportMetric(peak, "peak-MB")
		b.ReportMetric(after, "after-MB")
		if peak > 300 {
			b.Fatalf("the flow-runner's memory peaked at %.0f MB (idle %.0f MB, %.0f MB after); want under 300 MB", peak, idle, after)
		}
	})
}

// floodFlow is the report's flow: 150 messages of 1 MB.
const floodFlow = `{
  "name": "Flood",
  "description": "150 messages of 1 MB",
  "triggers": ["api"],
  "nodes": [
    {"id": "start", "type": "start", "next": "each"},
    {"id": "each", "type": "loop", "over": "1..150", "as": "i", "body": "say", "max_iterations": 150, "next": "done"},
    {"id": "say", "type": "send_message", "message": {"type": "text", "text": "{{repeat('x', 1000000)}}"}},
    {"id": "done", "type": "end", "output": {}}
  ]
}`

// checkFlood checks an answer of floodFlow: 200, failed in-run by the
// output budget after the one message that fits.
func checkFlood(a flowAnswer, err error) error {
	if err != nil {
		return err
	}
	var out struct {
		Status string `json:"status"`
		Error  struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Messages []json.RawMessage `json:"messages"`
	}
	if a.status != http.StatusOK || json.Unmarshal(a.body, &out) != nil || out.Status != "failed" || out.Error.Code != "run_budget_exceeded" ||
		!strings.Contains(out.Error.Message, "1 MiB (RUN_OUTPUT_LIMIT)") || len(out.Messages) != 1 {
		return fmt.Errorf("flood = %d %.300s; want 200 failed run_budget_exceeded after 1 message", a.status, a.body)
	}
	return nil
}

// residentMB reads one of the memory lines of /proc/<pid>/status (VmRSS,
// VmHWM), in MB.
func residentMB(b *testing.B, pid int, field string) float64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(value), " kB"))
		if err != nil {
			b.Fatalf("%s: %q", field, value)
		}
		return float64(kb) / 1024
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
