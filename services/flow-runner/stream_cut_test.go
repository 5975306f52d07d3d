package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// A stream's reader that stops reading, or goes before the end event was
// handed on, has its run stored failed (docs/flows.md "Streaming"); the
// gateway's side (a client that reads nothing is cut) is the gateway's
// test. Here the reader is the rpc client, as the gateway's relay is.

// keyedRun waits until the key's call has finished and returns the id of
// the run it ran, and its answer, replayed as JSON, unless that was too
// large to keep.
func (h *harness) keyedRun(ws, flowID, key, body string) (runID string, answer *flowrunnerapi.InvokeResponse) {
	h.t.Helper()
	wait.For(h.t, 20*time.Second, "the call's answer to be kept", func() error {
		status, hd, b := h.keyed(ws, flowID, key, body)
		var unkept struct {
			Code  string `json:"code"`
			RunID string `json:"run_id"`
		}
		switch {
		case status == http.StatusOK && hd.Get(idempotency.ReplayedHeader) == "true":
			answer = apicheck.Body[*flowrunnerapi.InvokeResponse](h.t, b)
			runID = answer.RunID
		case status == http.StatusConflict && json.Unmarshal(b, &unkept) == nil && unkept.Code == "idempotency_response_unavailable":
			runID = unkept.RunID
		default:
			return errors.New(string(b))
		}
		return nil
	})
	return runID, answer
}

// wantCut checks that a run is stored as the failure of a stream cut:
// node_failed, run canceled; it returns the run's trace.
func (h *harness) wantCut(ws, flowID, runID string) flowrunnerapi.Trace {
	h.t.Helper()
	status, raw := h.api(ws, full, http.MethodGet, "/v1/flows/"+flowID+"/runs/"+runID, nil)
	if status != http.StatusOK {
		h.t.Fatalf("stored run: %d %s", status, raw)
	}
	trace := apicheck.Body[flowrunnerapi.Trace](h.t, raw)
	if r := trace.Run; r.Status != "failed" || r.Error == nil || r.Error.Code != "node_failed" || !strings.Contains(r.Error.Message, "run canceled") {
		h.t.Fatalf("stored run %+v (error %+v), want failed, node_failed run canceled", r, r.Error)
	}
	return trace
}

// A flow that sends many large messages, streamed to a reader that reads
// nothing: flow control holds the run a window ahead of it (it is still
// going long after it would have finished), and once the reader goes, as
// the gateway lets go of a client that stopped reading, the run stops and
// is stored failed, having sent only a window's worth.
func TestSilentStreamReaderFailsItsRun(t *testing.T) {
	t.Parallel()
	const (
		messages = 40
		size     = 64 << 10
	)
	h := start(t, nil)
	ws := uuid.NewString()
	id := h.publish(ws, "", doc("Flood", apiOnly, "flood",
		`{"id": "flood", "type": "loop", "over": "1..40", "as": "i", "body": "say", "next": "done"}`,
		`{"id": "say", "type": "send_message", "message": {"type": "text", "text": "{{repeat(vars.input.fill, vars.input.size)}}"}}`,
		`{"id": "done", "type": "end", "output": {"sent": true}}`))
	body := `{"input": {"fill": "x", "size": 65536}, "stream": true}`

	reply := h.openStream(ws, id, "silent", body)
	// Unheld, the run would be stored within milliseconds; held, its key
	// stays in progress.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		status, _, b := h.keyed(ws, id, "silent", body)
		wantError(t, status, b, http.StatusConflict, "idempotency_in_progress")
		time.Sleep(100 * time.Millisecond)
	}
	reply.Close()

	runID, _ := h.keyedRun(ws, id, "silent", body)
	trace := h.wantCut(ws, id, runID)
	said := 0
	for _, nr := range trace.NodeRuns {
		if nr.NodeID == "say" && nr.Error == "" {
			said++
		}
	}
	// A window's worth and the message whose flush was held.
	if most := rpc.StreamWindow/size + 2; said > most {
		t.Fatalf("the run sent %d of its %d messages to a reader that read none, want at most %d", said, messages, most)
	}
}

// The end event is the run's last word: a reader that has it and reads on
// (the gateway wrote it to its client) gets a clean end, and the run is
// stored completed; one that goes before handing it on (the write of the
// end timed out, or the client hung up then) never told its client, and
// the run is stored failed.
func TestStreamedRunIsCompletedOnlyOnceItsEndWasHandedOn(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	id := h.publish(ws, "", doc("Greeter", apiOnly, "hi", greet, endNode))
	body := `{"input": {"name": "Ada"}, "stream": true}`

	reply := h.openStream(ws, id, "read", body)
	var read strings.Builder
	readUntil(t, reply, &read, "event: end\n")
	events, _ := parseSSE(t, read.String())
	if end := events[len(events)-1]; end.name != "end" || end.data["status"] != "completed" {
		t.Fatalf("end %v", end)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if rest, err := reply.Next(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("after the end: %q, %v; want io.EOF", rest, err)
	}
	if _, got := h.keyedRun(ws, id, "read", body); got == nil || got.Status != "completed" {
		t.Fatalf("the run whose end was handed on: %+v", got)
	}

	reply = h.openStream(ws, id, "gone", body)
	read.Reset()
	readUntil(t, reply, &read, "event: end\n")
	events, _ = parseSSE(t, read.String())
	if end := events[len(events)-1]; end.name != "end" || end.data["status"] != "completed" {
		t.Fatalf("end %v", end)
	}
	reply.Close()
	runID, got := h.keyedRun(ws, id, "gone", body)
	stored := h.wantCut(ws, id, runID)
	if got == nil || got.Status != "failed" || got.Error == nil || *got.Error != *stored.Run.Error ||
		len(got.Messages) != 1 || len(got.Output) != 0 || got.SessionID != "" {
		t.Fatalf("the cut run's answer %+v, want failed as stored, with its message and no output", got)
	}
}
