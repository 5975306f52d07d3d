package main

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	"github.com/parleyhq/parley/pkg/testenv/sse"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	svcconfig "github.com/parleyhq/parley/services/flow-runner/internal/config"
)

// Streaming (SSE): the events of a run, in order, as the flow-runner
// writes them; the gateway relays them as they come (e2e tests that).

type sseEvent struct {
	name string
	data map[string]any
}

// parseSSE reads a whole event stream: its events, and how many ": ping"
// comments it had.
func parseSSE(t *testing.T, body string) (events []sseEvent, pings int) {
	t.Helper()
	all, err := sse.Parse(body)
	if err != nil {
		t.Fatalf("%v in %q", err, body)
	}
	for _, e := range all {
		if e.Comment == "ping" {
			pings++
			continue
		}
		ev := sseEvent{name: e.Name}
		if err := e.JSON(&ev.data); err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	return events, pings
}

func names(events []sseEvent) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.name
		if id, ok := e.data["node_id"].(string); ok {
			out[i] += " " + id
		}
	}
	return out
}

// The events of a run and their fields, requested by stream:true or by
// Accept: text/event-stream.
func TestStreamEvents(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	id := h.publish(ws, "", doc("Greeter", apiOnly, "hi", greet, endNode))
	path := "/v1/flows/" + id + "/invoke"
	for name, send := range map[string]func() (int, http.Header, []byte){
		"stream true": func() (int, http.Header, []byte) {
			return h.call(ws, full, http.MethodPost, path, `{"input": {"name": "Ada"}, "stream": true}`, nil)
		},
		"accept": func() (int, http.Header, []byte) {
			return h.call(ws, full, http.MethodPost, path, `{"input": {"name": "Ada"}}`, map[string]string{"Accept": "application/json, text/event-stream;q=0.9"})
		},
	} {
		status, hd, body := send()
		if status != http.StatusOK || hd.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%s: %d %v %s", name, status, hd, body)
		}
		events, _ := parseSSE(t, string(body))
		want := []string{"run_start", "node_start start", "node_end start", "node_start hi", "message", "node_end hi", "node_start done", "node_end done", "end"}
		if got := names(events); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: events %v, want %v", name, got, want)
		}
		runID, _ := events[0].data["run_id"].(string)
		if _, err := uuid.Parse(runID); err != nil {
			t.Fatalf("run_start %v", events[0].data)
		}
		if events[1].data["type"] != "start" || events[3].data["type"] != "send_message" {
			t.Fatalf("node_start types: %v %v", events[1].data, events[3].data)
		}
		if events[4].data["text"] != "Hi Ada" || events[4].data["type"] != "text" {
			t.Fatalf("message %v", events[4].data)
		}
		for _, i := range []int{2, 5, 7} {
			d := events[i].data
			_, ms := d["ms"].(float64)
			_, tokens := d["tokens"].(float64)
			_, input := d["input"]
			_, output := d["output"]
			_, failed := d["error"]
			if !ms || !tokens || input || output || failed || d["type"] == nil {
				t.Fatalf("node_end %v: want node_id, type, ms, tokens and no input, output or error", d)
			}
		}
		end := events[8].data
		_, messages := end["messages"]
		_, session := end["session_id"]
		if end["status"] != "completed" || messages || session || end["usage"] == nil ||
			!reflect.DeepEqual(end["output"], map[string]any{"name": "Ada"}) {
			t.Fatalf("end %v", end)
		}
		// The run is stored as streamed.
		status, raw := h.api(ws, full, http.MethodGet, "/v1/flows/"+id+"/runs/"+runID, nil)
		if status != http.StatusOK || !strings.Contains(string(raw), `"status":"completed"`) {
			t.Fatalf("trace: %d %s", status, raw)
		}
	}
}

// A waiting run's end event has its session; an error before the run
// starts is a plain JSON answer.
func TestStreamWaitingAndRefusals(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	id := h.publish(ws, "", doc("Ask", apiOnly, "ask", askNode, `{"id": "bye", "type": "end"}`))
	status, hd, body := h.call(ws, full, http.MethodPost, "/v1/flows/"+id+"/invoke", `{"input": {}, "stream": true}`, nil)
	events, _ := parseSSE(t, string(body))
	if status != http.StatusOK || hd.Get("Content-Type") != "text/event-stream" || len(events) == 0 {
		t.Fatalf("%d %v %s", status, hd, body)
	}
	end := events[len(events)-1]
	if end.name != "end" || end.data["status"] != "waiting" || end.data["session_id"] == nil {
		t.Fatalf("end %v", end)
	}
	for _, give := range []struct{ flow, body, code string }{
		{uuid.NewString(), `{"input": {}, "stream": true}`, "flow_not_found"},
		{id, `{"input": [], "stream": true}`, "input_invalid"},
		{id, `{"session_id": "` + uuid.NewString() + `", "input": {"text": "x"}, "stream": true}`, "session_not_found"},
	} {
		status, hd, body := h.call(ws, full, http.MethodPost, "/v1/flows/"+give.flow+"/invoke", give.body, nil)
		if !strings.HasPrefix(hd.Get("Content-Type"), "application/json") || !strings.Contains(string(body), `"`+give.code+`"`) || status < 400 {
			t.Fatalf("%s: %d %v %s; want a JSON error", give.code, status, hd, body)
		}
	}
}

// A node stopped by a limit gets a synthetic node_start and a node_end
// with its error; the end says failed.
func TestStreamBudgetStop(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *svcconfig.Config) { c.BudgetNodes = 2 })
	ws := uuid.NewString()
	id := h.publish(ws, "", doc("Long", apiOnly, "hi", greet, endNode))
	_, _, body := h.call(ws, full, http.MethodPost, "/v1/flows/"+id+"/invoke", `{"input": {}, "stream": true}`, nil)
	events, _ := parseSSE(t, string(body))
	want := []string{"run_start", "node_start start", "node_end start", "node_start hi", "message", "node_end hi", "node_start done", "node_end done", "end"}
	if got := names(events); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	stopped := events[7].data
	if !strings.Contains(fmt.Sprint(stopped["error"]), "run_budget_exceeded") || stopped["ms"] != float64(0) {
		t.Fatalf("stopped node_end %v", stopped)
	}
	end := events[8].data
	if end["status"] != "failed" || !strings.Contains(fmt.Sprint(end["error"]), "run_budget_exceeded") {
		t.Fatalf("end %v", end)
	}
}

// openStream starts a streamed invoke and returns it as it comes.
func (h *harness) openStream(ws, flowID, key, body string) *rpc.Reply {
	h.t.Helper()
	req := &rpcv1.Request{
		WorkspaceId: ws, Method: http.MethodPost, Path: "/v1/flows/" + flowID + "/invoke", RequestId: uuid.NewString(),
		Modules: full.modules, Features: full.features, Body: []byte(body),
		Headers: []*rpcv1.Header{{Name: "Content-Type", Value: "application/json"}, {Name: idempotency.Header, Value: key}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reply, err := h.rpc.Open(ctx, rpc.ServiceFlowRunner, rpc.EndpointAPI, req)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(reply.Close)
	if !reply.Streaming() {
		h.t.Fatalf("not a stream: %d %s", reply.Response.GetStatus(), reply.Response.GetBody())
	}
	return reply
}

// readUntil reads a stream until its text so far contains want.
func readUntil(t *testing.T, r *rpc.Reply, got *strings.Builder, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	got.Write(r.Response.GetBody())
	for !strings.Contains(got.String(), want) {
		data, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %q in %q: %v", want, got.String(), err)
		}
		got.Write(data)
	}
}

// ": ping" keeps a quiet stream alive; when the client hangs up, the run
// stops and is stored failed, and that failed answer is what its key
// replays, as JSON also to a stream request.
func TestStreamPingAndHangUp(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *svcconfig.Config) { c.SSEPingInterval = 100 * time.Millisecond })
	held := newHold(t)
	ws := uuid.NewString()
	id := h.publish(ws, "", heldFlow(held))
	const body = `{"input": {}, "stream": true}`
	reply := h.openStream(ws, id, "dropped", body)
	var got strings.Builder
	readUntil(t, reply, &got, "event: node_start\ndata: {\"node_id\":\"call\"")
	readUntil(t, reply, &got, ": ping\n\n")
	held.wait(t, 1)
	reply.Close()

	var runID string
	wait.For(t, 15*time.Second, "the dropped run to be stored", func() error {
		status, hd, raw := h.call(ws, full, http.MethodPost, "/v1/flows/"+id+"/invoke", body, map[string]string{idempotency.Header: "dropped"})
		if status != http.StatusOK {
			return fmt.Errorf("%d %s", status, raw)
		}
		out := apicheck.Body[flowrunnerapi.InvokeResponse](t, raw)
		if hd.Get(idempotency.ReplayedHeader) != "true" || !strings.HasPrefix(hd.Get("Content-Type"), "application/json") || out.Status != "failed" {
			t.Fatalf("replay of the dropped stream: %v %s", hd, raw)
		}
		runID = out.RunID
		return nil
	})
	status, raw := h.api(ws, full, http.MethodGet, "/v1/flows/"+id+"/runs/"+runID, nil)
	if status != http.StatusOK || !strings.Contains(string(raw), `"status":"failed"`) {
		t.Fatalf("trace of the dropped run: %d %s", status, raw)
	}
}
