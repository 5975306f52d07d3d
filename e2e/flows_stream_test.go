package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/sse"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// streamFlood sends input.count messages of input.size characters each, the
// shape of a flow that says a lot; its count is fixed by the loop.
const streamFlood = `{
  "name": "Flood",
  "description": "Many large messages",
  "triggers": ["api"],
  "nodes": [
    {"id": "start", "type": "start", "next": "flood"},
    {"id": "flood", "type": "loop", "over": "1..96", "as": "i", "body": "say", "next": "done"},
    {"id": "say", "type": "send_message", "message": {"type": "text", "text": "{{repeat(vars.input.fill, vars.input.size)}}"}},
    {"id": "done", "type": "end", "output": {"sent": true}}
  ]
}`

// streamFloodMessages is streamFlood's loop count.
const streamFloodMessages = 96

var flowRunnerAnswers = regexp.MustCompile(`(?m)^parley_gateway_upstream_duration_seconds_count\{service="flow-runner"\} (\S+)$`)

// TestStreamToASilentReaderFailsItsRun is the finding of a streamed run
// that finished at once whatever its reader did, scaled down: a flow that
// sends 96 messages of 128 KiB (12 MiB, under a RUN_OUTPUT_LIMIT raised to
// its 16 MiB maximum, so that only the stream stops it), streamed through
// the gateway to a client that reads nothing. The gateway cuts the client
// once a write has waited SSE_WRITE_TIMEOUT (1 s here), the run stops
// there, having sent what the sockets and a window hold, and is stored
// failed. (What a run may hold in memory is RUN_OUTPUT_LIMIT's, measured
// by BenchmarkFlowRunMemory.) A client that reads everything gets every
// event and the end, and its run is stored completed.
func TestStreamToASilentReaderFailsItsRun(t *testing.T) {
	t.Parallel()
	const size = 128 << 10
	s := startSuite(t, "SSE_WRITE_TIMEOUT=1s", "RUN_OUTPUT_LIMIT=16MiB")
	ws, key := s.flowDeveloper(t)
	var pub struct {
		ID string `json:"id"`
	}
	s.ctl(t, &pub, "flow", "publish", "--workspace", ws, "--file", flowFile(t, streamFlood))
	path := invokePath(pub.ID)
	body := fmt.Sprintf(`{"input": {"fill": "x", "size": %d}}`, size)

	req, err := http.NewRequest(http.MethodPost, s.gatewayURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(idempotencyKeyHeader, "silent")
	silent := sse.OpenSilent(t, req)
	sent := time.Now()
	// Its stream has begun (the gateway has its head) once the gateway
	// counts an answer of the flow-runner: the run started, and a repeat
	// now finds its key taken.
	wait.Until(t, 30*time.Second, "the silent stream to begin", func() bool {
		return metric(s.procs["gateway"].addr, flowRunnerAnswers) >= 1
	})

	// The run's answer is kept once it is stored: too large to replay, so
	// a repeat names its run.
	var runID string
	wait.For(t, 30*time.Second, "the silent stream's run to be stored", func() error {
		a, err := postFlow(context.Background(), s.gatewayURL, key, path, body, idempotencyKeyHeader, "silent")
		if err != nil {
			return err
		}
		var answer struct {
			RunID string `json:"run_id"`
		}
		switch {
		case a.status == http.StatusOK && a.header.Get(replayedHeader) == "true",
			a.status == http.StatusConflict && a.code() == "idempotency_response_unavailable":
			if err := json.Unmarshal(a.body, &answer); err != nil || answer.RunID == "" {
				t.Fatalf("the repeat's answer %s names no run", a)
			}
			runID = answer.RunID
			return nil
		case a.status == http.StatusConflict && a.code() == "idempotency_in_progress":
			return errors.New(a.String())
		}
		t.Fatalf("repeat of the silent stream: %s", a)
		return nil
	})
	t.Logf("silent stream's run stored %s after the request", time.Since(sent).Round(time.Millisecond))

	trace := s.runTrace(t, key, "/v1/flows/"+pub.ID, runID)
	run := trace["run"].(map[string]any)
	runErr, _ := run["error"].(map[string]any)
	if run["status"] != "failed" || runErr["code"] != "node_failed" || !strings.Contains(fmt.Sprint(runErr["message"]), "run canceled") {
		t.Fatalf("the silent stream's run: %v; want failed, node_failed run canceled", run)
	}
	said := 0
	for _, nr := range trace["node_runs"].([]any) {
		if n := nr.(map[string]any); n["node_id"] == "say" && n["error"] == nil {
			said++
		}
	}
	t.Logf("the run sent %d of its %d messages", said, streamFloodMessages)
	if said >= streamFloodMessages/2 {
		t.Fatalf("the run sent %d of its %d messages to a client that read none", said, streamFloodMessages)
	}
	got := silent.Drain(t, 10*time.Second)
	if strings.Contains(string(got), "event: end") {
		t.Fatal("the silent client was sent the end of a run it never read")
	}
	// A client that reads everything, of a smaller flood: every message,
	// then the end, and the run stored completed.
	st := openEventStream(t, s.gatewayURL, key, path, `{"input": {"fill": "x", "size": 65536}}`)
	events := st.rest(t, 60*time.Second)
	messages := 0
	for _, ev := range events {
		if ev.name == "message" {
			messages++
		}
	}
	end := events[len(events)-1]
	if messages != streamFloodMessages || end.name != "end" || end.data["status"] != "completed" {
		t.Fatalf("the reading client got %d messages and last %s %v; want %d and a completed end", messages, end.name, end.data, streamFloodMessages)
	}
	runID, _ = events[0].data["run_id"].(string)
	if run := s.runTrace(t, key, "/v1/flows/"+pub.ID, runID)["run"].(map[string]any); run["status"] != "completed" {
		t.Fatalf("the read stream's run stored as %v", run)
	}
}
