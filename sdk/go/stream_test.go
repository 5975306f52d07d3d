package parley

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
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
	f.Add("\uFEFFevent: run_start\rdata: {\"run_id\":\"r\"}\r\r\nevent: end\n\rdata: {}\r\n\r")
	f.Add("\xEF\xBB: ping\r\n\r\n\r\rdata:\r")
	f.Fuzz(func(t *testing.T, s string) {
		evs, err := parse(t, strings.NewReader(s), 1<<10) // no item after an error
		for i, ev := range evs {
			if _, end := ev.(*RunEnd); end && (i < len(evs)-1 || err != nil) {
				t.Fatal("an item after the end event")
			}
		}
		// The reads a stream comes in change nothing.
		evs1, err1 := parse(t, iotest.OneByteReader(strings.NewReader(s)), 1<<10)
		if !reflect.DeepEqual(evs, evs1) || fmt.Sprint(err) != fmt.Sprint(err1) {
			t.Fatalf("whole: %v, %v; a byte a read: %v, %v", evs, err, evs1, err1)
		}
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

// parse reads the event stream s from r, limit bytes a line or an event,
// and returns what readEvents yields: the events and, if the stream ends
// with one, its error.
func parse(t *testing.T, r io.Reader, limit int64) ([]RunEvent, error) {
	t.Helper()
	var evs []RunEvent
	var last error
	readEvents(context.Background(), r, limit, func(ev RunEvent, err error) bool {
		if last != nil {
			t.Fatalf("%v after the error %v", ev, last)
		}
		if err != nil {
			last = err
			return true
		}
		evs = append(evs, ev)
		return true
	})
	return evs, last
}

// readsOf returns readers of s that split it in every way a connection
// may: whole, a byte a read, and in two reads at each position.
func readsOf(s string) map[string]func() io.Reader {
	reads := map[string]func() io.Reader{
		"whole":            func() io.Reader { return strings.NewReader(s) },
		"a byte a read":    func() io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"half each read":   func() io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
		"a byte, then EOF": func() io.Reader { return iotest.DataErrReader(iotest.OneByteReader(strings.NewReader(s))) },
	}
	for i := 1; i < len(s); i++ {
		reads[fmt.Sprintf("split at %d", i)] = func() io.Reader {
			return io.MultiReader(strings.NewReader(s[:i]), strings.NewReader(s[i:]))
		}
	}
	return reads
}

// TestEventStreamFormat holds readEvents to each rule of the event-stream
// format (the HTML standard's "Server-sent events", docs/client.md
// "Streaming a run"), the stream read in every split a connection may
// make of it: the same events and error whatever the reads.
func TestEventStreamFormat(t *testing.T) {
	t.Parallel()
	const limit = 256
	start := &RunStart{RunID: "r"}
	end := &RunEnd{Status: RunCompleted}
	text := func(s string) *RunMessage { return &RunMessage{FlowMessage{Type: "text", Text: s}} }
	for _, tt := range []struct {
		name    string
		stream  string
		want    []RunEvent
		wantErr string // "": the stream ends with its end event; else in the error, which is ErrStreamDropped
	}{
		// Line ends: CRLF, LF or a bare CR, mixed at will.
		{"LF", "event: run_start\ndata: {\"run_id\":\"r\"}\n\nevent: end\ndata: {\"status\":\"completed\"}\n\n", []RunEvent{start, end}, ""},
		{"CRLF", "event: run_start\r\ndata: {\"run_id\":\"r\"}\r\n\r\nevent: end\r\ndata: {\"status\":\"completed\"}\r\n\r\n", []RunEvent{start, end}, ""},
		{"bare CR", "event: run_start\rdata: {\"run_id\":\"r\"}\r\revent: end\rdata: {\"status\":\"completed\"}\r\r", []RunEvent{start, end}, ""},
		{"mixed", "event: run_start\rdata: {\"run_id\":\r\ndata: \"r\"}\n\r\nevent: end\n: ping\rdata: {\"status\":\"completed\"}\r\n\r", []RunEvent{start, end}, ""},
		// CRLF is one line end, not a line and an empty one: the event's
		// data lines stay one event.
		{"CRLF within an event", "event: message\r\ndata: {\"type\":\"text\",\r\ndata: \"text\":\"a\"}\r\n\r\nevent: end\r\ndata: {\"status\":\r\ndata: \"completed\"}\r\n\r\n", []RunEvent{text("a"), end}, ""},
		// CR CR LF: a CR, then a CRLF; LF CR: two line ends.
		{"CR then CRLF", "event: run_start\rdata: {\"run_id\":\"r\"}\r\r\nevent: end\ndata: {\"status\":\"completed\"}\n\r", []RunEvent{start, end}, ""},
		{"empty lines of every kind between events", "\r\n\r\n\r\n\r\revent: run_start\ndata: {\"run_id\":\"r\"}\r\r\n\n\r\n\revent: end\ndata: {\"status\":\"completed\"}\n\n", []RunEvent{start, end}, ""},

		// A leading byte order mark is skipped; only one, and only there.
		{"a byte order mark", "\uFEFFevent: run_start\ndata: {\"run_id\":\"r\"}\n\nevent: end\ndata: {\"status\":\"completed\"}\n\n", []RunEvent{start, end}, ""},
		{"a byte order mark before data, CRLF", "\uFEFFdata: {\"type\":\"text\",\"text\":\"a\"}\r\n\r\nevent: end\r\ndata: {\"status\":\"completed\"}\r\n\r\n", []RunEvent{text("a"), end}, ""},
		// The second one is part of the field's name, which is no field:
		// the event is a message.
		{"two byte order marks", "\uFEFF\uFEFFevent: node_start\ndata: {\"type\":\"text\",\"text\":\"a\"}\n\nevent: end\ndata: {\"status\":\"completed\"}\n\n", []RunEvent{text("a"), end}, ""},
		{"a byte order mark later", "data: {\"type\":\"text\",\"text\":\"a\"}\n\n\uFEFFevent: node_start\ndata: {\"type\":\"text\",\"text\":\"b\"}\n\nevent: end\ndata: {\"status\":\"completed\"}\n\n", []RunEvent{text("a"), text("b"), end}, ""},
		{"the start of a byte order mark only", "\xEF\xBBevent: node_start\ndata: {\"type\":\"text\",\"text\":\"a\"}\n\nevent: end\ndata: {\"status\":\"completed\"}\n\n", []RunEvent{text("a"), end}, ""},

		// Fields: the name up to the first colon, one space dropped.
		{"no space after the colon", "event:run_start\ndata:{\"run_id\":\"r\"}\n\nevent:end\ndata:{\"status\":\"completed\"}\n\n", []RunEvent{start, end}, ""},
		{"only one space is dropped", "event:  run_start\ndata: {\"run_id\":\"r\"}\n\nevent:\tend\ndata: {\"status\":\"completed\"}\n\nevent: end\ndata: {\"status\":\"completed\"}\n\n", []RunEvent{end}, ""},
		{"a colon within the value", "event: message\ndata: {\"type\":\"text\",\"text\":\"a: b\"}\n\nevent: end\ndata: {\"status\":\"completed\"}\n\n", []RunEvent{text("a: b"), end}, ""},
		// Without a colon, the line is the name and the value is empty: an
		// empty data line, an event name reset to message.
		{"a field without a colon", "event: message\ndata: {\"type\":\"text\",\ndata\ndata: \"text\":\"a\"}\n\nevent: node_start\nevent\ndata: {\"type\":\"text\",\"text\":\"b\"}\n\nevent: end\ndata: {\"status\":\"completed\"}\n\n", []RunEvent{text("a"), text("b"), end}, ""},
		{"unknown fields", "Data: x\nevent : end\nfoo: bar\ndata: {\"type\":\"text\",\"text\":\"a\"}\n\nevent: end\ndata: {\"status\":\"completed\"}\n\n", []RunEvent{text("a"), end}, ""},

		// Comments, wherever they come.
		{"comments", ":\n: ping\r:data: {}\r\nevent: run_start\n: ping\ndata: {\"run_id\":\n:\ndata: \"r\"}\n\n:event: end\n\nevent: end\ndata: {\"status\":\"completed\"}\n\n", []RunEvent{start, end}, ""},

		// id and retry: ignored, whatever their value.
		{"id and retry", "id: 7\nretry: 10\n\nid: a\x00b\nretry: -1\nretry: 1.5\nretry\nid\nevent: run_start\ndata: {\"run_id\":\"r\"}\n\nid: 8\nevent: end\ndata: {\"status\":\"completed\"}\n\n", []RunEvent{start, end}, ""},

		// An event whose data is empty is not dispatched, and its name
		// goes with it.
		{"no data", "event: end\n\nevent: end\nid: 1\nretry: 5\n\r\nevent: node_start\n\ndata: {\"type\":\"text\",\"text\":\"a\"}\n\nevent: end\ndata: {\"status\":\"completed\"}\n\n", []RunEvent{text("a"), end}, ""},
		// An empty data line is data: the event is dispatched, and its
		// data (\n, the trailing LF removed) is no JSON.
		{"an empty data line is data", "event: run_start\ndata:\n\n", nil, "run_start event's data"},
		{"data lines join with LF, the last one removed", "data: {\"type\":\"text\",\ndata: \"text\":\"a\"}\ndata:\n\nevent: end\ndata: {\"status\":\"completed\"}\n\n", []RunEvent{text("a"), end}, ""},
		{"an unknown event", "event: novel\ndata: {}\n\nevent: end\ndata: {\"status\":\"completed\"}\n\n", []RunEvent{end}, ""},

		// An event is whole at its empty line: the stream's end does not
		// dispatch one, whatever its last line end.
		{"the end event without its empty line, LF", "event: end\ndata: {\"status\":\"completed\"}\n", nil, "ended before its end event"},
		{"the end event without its empty line, CR", "event: end\rdata: {\"status\":\"completed\"}\r", nil, "ended before its end event"},
		{"the end event without its empty line, CRLF", "event: end\r\ndata: {\"status\":\"completed\"}\r\n", nil, "ended before its end event"},
		{"the end event without its line end", "event: end\r\ndata: {\"status\":\"completed\"}", nil, "ended before its end event"},
		{"events after the end event", "event: end\rdata: {\"status\":\"completed\"}\r\rdata: <html>\r\r", []RunEvent{end}, ""},

		// The bounds hold whatever the line ends.
		{"a line of the bound, CR", ": " + strings.Repeat("p", limit-2) + "\revent: end\rdata: {\"status\":\"completed\"}\r\r", []RunEvent{end}, ""},
		{"a line over the bound, CR", ": " + strings.Repeat("p", limit-1) + "\revent: end\rdata: {\"status\":\"completed\"}\r\r", nil, "a line over 256 bytes"},
		{"a line over the bound, CRLF", "data: " + strings.Repeat("p", limit) + "\r\n\r\n", nil, "a line over 256 bytes"},
		{"short CR lines, many", strings.Repeat(": ping\r", 200) + "event: end\rdata: {\"status\":\"completed\"}\r\r", []RunEvent{end}, ""},
		{"an event over the bound in short CR lines", "event: message\rdata: {\r" + strings.Repeat("data:         \r", 40) + "data: }\r\r", nil, "an event over 256 bytes"},
		{"an event over the bound in short CRLF lines", "event: message\r\ndata: {\r\n" + strings.Repeat("data:         \r\n", 40) + "data: }\r\n\r\n", nil, "an event over 256 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for how, r := range readsOf(tt.stream) {
				evs, err := parse(t, r(), limit)
				if !reflect.DeepEqual(evs, tt.want) {
					got, _ := json.Marshal(evs)
					want, _ := json.Marshal(tt.want)
					t.Fatalf("%s: events %s, want %s", how, got, want)
				}
				if tt.wantErr == "" {
					if err != nil {
						t.Fatalf("%s: error %v", how, err)
					}
					continue
				}
				if !errors.Is(err, ErrStreamDropped) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("%s: error %v, want ErrStreamDropped: …%s…", how, err, tt.wantErr)
				}
			}
		})
	}
}

// TestStreamEventAtItsCR: an event whose empty line ends at a bare CR is
// yielded at once, not when a byte after the CR (an LF of a CRLF, perhaps)
// arrives: here the server sends nothing more and holds the connection.
func TestStreamEventAtItsCR(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, hungUp := holding(t, "event: run_start\rdata: {\"run_id\":\"r1\"}\r\r", "event: end\r\ndata: {\"status\":\"completed\"}\r\n\r")
	evs, errs := collect(t, c.InvokeStream(ctx, "f1", nil))
	if len(errs) != 0 || len(evs) != 2 || evs[1].Event() != "end" {
		t.Fatalf("events %v errors %v", evs, errs)
	}
	hungUp()
}
