package parley

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sse answers a stream, flushing after each chunk.
func sse(w http.ResponseWriter, chunks ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	for _, c := range chunks {
		io.WriteString(w, c)
		w.(http.Flusher).Flush()
	}
}

func collect(t *testing.T, events func(func(RunEvent, error) bool)) ([]RunEvent, []error) {
	t.Helper()
	var evs []RunEvent
	var errs []error
	for ev, err := range events {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		evs = append(evs, ev)
	}
	return evs, errs
}

func TestStreamEvents(t *testing.T) {
	t.Parallel()
	c, rec, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			apiError(w, 503, "service_unavailable", "1") // retried: the stream has not started
			return
		}
		sse(w,
			": ping\n\n",
			"event: run_start\ndata: {\"run_id\":\"r1\"}\n\n",
			"event: node_start\r\ndata: {\"node_id\":\"ask\",\"type\":\"question\"}\r\n\r\n",
			// One event's data over two lines, and a ping within it.
			"event: message\ndata: {\"type\":\"text\",\n: ping\ndata: \"text\":\"Hi! What is\\nyour name?\"}\n\n",
			"event: some_future_event\ndata: {}\n\n",
			"event: node_end\ndata: {\"node_id\":\"ask\",\"type\":\"question\",\"ms\":1,\"tokens\":0}\n\n",
			": ping\n\n",
			"event: end\ndata: {\"status\":\"waiting\",\"session_id\":\"s1\",\"output\":{},\"usage\":{\"tokens\":3,\"cost_usd\":0.5,\"billable_units\":1}}\n\n",
		)
	})
	evs, errs := collect(t, c.InvokeStream(context.Background(), "f1", map[string]any{"name": "Ada"}))
	if len(errs) != 0 {
		t.Fatalf("errors %v", errs)
	}
	want := []RunEvent{
		&RunStart{RunID: "r1"},
		&NodeStart{NodeID: "ask", Type: "question"},
		&RunMessage{FlowMessage{Type: "text", Text: "Hi! What is\nyour name?"}},
		&NodeEnd{NodeID: "ask", Type: "question", MS: 1},
		&RunEnd{Status: RunWaiting, SessionID: "s1", Output: map[string]any{}, Usage: Usage{Tokens: 3, CostUSD: 0.5, BillableUnits: 1}},
	}
	if !reflect.DeepEqual(evs, want) {
		got, _ := json.Marshal(evs)
		t.Errorf("events %s", got)
	}
	hits := rec.all()
	if len(hits) != 2 {
		t.Fatalf("%d attempts, want 2", len(hits))
	}
	for _, h := range hits {
		if h.header.Get("Accept") != "text/event-stream" || h.header.Get("Idempotency-Key") != hits[0].header.Get("Idempotency-Key") || h.body != hits[0].body {
			t.Errorf("attempt %+v differs or asks for no stream", h)
		}
	}
	if body := hits[0].body; body != `{"input":{"name":"Ada"},"stream":true}` {
		t.Errorf("body %s", body)
	}
}

func TestContinueStreamBody(t *testing.T) {
	t.Parallel()
	c, rec, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		sse(w, "event: run_start\ndata: {\"run_id\":\"r1\"}\n\n", "event: end\ndata: {\"status\":\"completed\",\"output\":{},\"usage\":{\"tokens\":0,\"cost_usd\":0,\"billable_units\":0}}\n\n")
	})
	evs, errs := collect(t, c.ContinueStream(context.Background(), "f1", "s1", "Ada", WithIdempotencyKey("k1")))
	if len(errs) != 0 || len(evs) != 2 {
		t.Fatalf("events %v errors %v", evs, errs)
	}
	h := rec.all()[0]
	if h.body != `{"input":{"text":"Ada"},"session_id":"s1","stream":true}` || h.header.Get("Idempotency-Key") != "k1" || h.path != "/v1/flows/f1/invoke" {
		t.Errorf("request %+v", h)
	}
}

func TestStreamDropped(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		end  func(t *testing.T, w http.ResponseWriter)
	}{
		{"the answer ends", func(t *testing.T, w http.ResponseWriter) {}},
		{"the connection is cut", func(t *testing.T, w http.ResponseWriter) { hangUp(t, w) }},
		{"in the middle of an event", func(t *testing.T, w http.ResponseWriter) {
			io.WriteString(w, "event: node_start\ndata: {\"node_id\"")
			w.(http.Flusher).Flush()
			hangUp(t, w)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, rec, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
				sse(w, "event: run_start\ndata: {\"run_id\":\"r1\"}\n\n")
				tt.end(t, w)
			})
			evs, errs := collect(t, c.InvokeStream(context.Background(), "f1", nil))
			if len(evs) != 1 || evs[0].(*RunStart).RunID != "r1" {
				t.Errorf("events %v", evs)
			}
			if len(errs) != 1 || !errors.Is(errs[0], ErrStreamDropped) {
				t.Fatalf("errors %v, want ErrStreamDropped", errs)
			}
			if msg := errs[0].Error(); !strings.Contains(msg, "stored failed") || !strings.Contains(msg, "new Idempotency-Key") {
				t.Errorf("message %q does not say what to do", msg)
			}
			if n := len(rec.all()); n != 1 {
				t.Errorf("%d attempts: a started stream was retried", n)
			}
		})
	}
}

// holding starts a server that answers the stream chunks (none: no
// answer at all) and then holds the connection until the client hangs up;
// hungUp fails the test unless the client did within 10 s.
func holding(t *testing.T, chunks ...string) (c *Client, hungUp func()) {
	gone := make(chan struct{})
	c, _, _ = server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if len(chunks) > 0 {
			sse(w, chunks...)
		}
		<-r.Context().Done() // the client hung up
		close(gone)
	})
	return c, func() {
		t.Helper()
		select {
		case <-gone:
		case <-time.After(10 * time.Second):
			t.Fatal("the server still holds the connection 10 s later")
		}
	}
}

func TestStreamBreakClosesTheConnection(t *testing.T) {
	t.Parallel()
	c, hungUp := holding(t, "event: run_start\ndata: {\"run_id\":\"r1\"}\n\n")
	for ev, err := range c.InvokeStream(context.Background(), "f1", nil) {
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ev.(*RunStart); !ok {
			t.Fatalf("first event %T", ev)
		}
		break
	}
	hungUp()
}

func TestStreamReplayedAsJSON(t *testing.T) {
	t.Parallel()
	c, _, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Idempotent-Replayed", "true")
		writeJSON(w, 200, map[string]any{
			"status": "failed", "run_id": "r1", "output": map[string]any{"a": "b"},
			"messages": []any{map[string]any{"type": "text", "text": "one"}, map[string]any{"type": "quick_replies", "text": "two", "quick_replies": []string{"x"}}},
			"usage":    map[string]any{"tokens": 1, "cost_usd": 0, "billable_units": 0},
			"error":    map[string]any{"code": "node_failed", "message": "boom"},
		})
	})
	var info CallInfo
	evs, errs := collect(t, c.InvokeStream(context.Background(), "f1", nil, WithIdempotencyKey("again"), WithCallInfo(&info)))
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if info != (CallInfo{IdempotencyKey: "again", Replayed: true, RequestID: "req-1"}) {
		t.Errorf("call info %+v", info)
	}
	want := []RunEvent{
		&RunStart{RunID: "r1"},
		&RunMessage{FlowMessage{Type: "text", Text: "one"}},
		&RunMessage{FlowMessage{Type: "quick_replies", Text: "two", QuickReplies: []string{"x"}}},
		&RunEnd{Status: RunFailed, Output: map[string]any{"a": "b"}, Usage: Usage{Tokens: 1}, Error: &RunError{Code: "node_failed", Message: "boom"}},
	}
	if !reflect.DeepEqual(evs, want) {
		got, _ := json.Marshal(evs)
		t.Errorf("events %s", got)
	}
}

func TestStreamRefusedBeforeItStarts(t *testing.T) {
	t.Parallel()
	c, rec, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		apiError(w, 404, "flow_not_found", "")
	})
	evs, errs := collect(t, c.InvokeStream(context.Background(), "f1", nil))
	var perr *Error
	if len(evs) != 0 || len(errs) != 1 || !errors.As(errs[0], &perr) || perr.Status != 404 || !errors.Is(errs[0], ErrFlowNotFound) {
		t.Errorf("events %v errors %v", evs, errs)
	}
	if n := len(rec.all()); n != 1 {
		t.Errorf("%d attempts", n)
	}
}

func FuzzReadEvents(f *testing.F) {
	f.Add("event: run_start\ndata: {\"run_id\":\"r\"}\n\n: ping\n\nevent: end\ndata: {}\n\n")
	f.Add("data: {\"type\":\"text\"}\r\n\r\n")
	f.Add("event: message\ndata: {\ndata: }\n\n")
	f.Add("event:end\ndata:{\"status\":\"completed\"}")
	f.Add("event: run_start\n\ndata\ndata:{\"run_id\":\"r\"}\r\n\r\nevent: end\r")
	f.Fuzz(func(t *testing.T, s string) {
		var ended bool
		readEvents(context.Background(), strings.NewReader(s), 1<<10, func(ev RunEvent, err error) bool {
			if ended {
				t.Fatal("an item after the end or an error")
			}
			if _, end := ev.(*RunEnd); end || err != nil {
				ended = true
			}
			return true
		})
	})
}

// A replay (JSON, not a stream) cut short is retried with the same key, as
// any keyed answer cut short is: nothing has been yielded yet.
func TestStreamReplayCutShortIsRetried(t *testing.T) {
	t.Parallel()
	c, rec, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "500")
			w.WriteHeader(200)
			io.WriteString(w, `{"status":"completed","run_id":`)
			w.(http.Flusher).Flush()
			hangUp(t, w)
			return
		}
		writeJSON(w, 200, map[string]any{"status": "completed", "run_id": "r1", "output": map[string]any{}, "messages": []any{},
			"usage": map[string]any{"tokens": 0, "cost_usd": 0, "billable_units": 0}})
	})
	evs, errs := collect(t, c.InvokeStream(context.Background(), "f1", nil, WithIdempotencyKey("again")))
	if len(errs) != 0 {
		t.Fatalf("errors %v", errs)
	}
	if len(evs) != 2 || evs[0].(*RunStart).RunID != "r1" || evs[1].(*RunEnd).Status != RunCompleted {
		t.Errorf("events %v", evs)
	}
	hits := rec.all()
	if len(hits) != 2 || hits[1].header.Get("Idempotency-Key") != "again" || hits[0].body != hits[1].body {
		t.Errorf("attempts %+v", hits)
	}
}
