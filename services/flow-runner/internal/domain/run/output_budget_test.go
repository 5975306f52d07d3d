package run

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/bytesize"
)

// The output part of the run budget (docs/flows.md "The run budget"): what
// a run holds of what its flow built is bounded as the run goes.

// sayLoop is a flow that sends n messages of `size` x's, in a loop, and
// ends with output.
func sayLoop(n, size int, output string) string {
	return nodes("each",
		fmt.Sprintf(`{"id": "each", "type": "loop", "over": "1..%d", "as": "i", "body": "say", "max_iterations": 1000, "next": "done"}`, n),
		fmt.Sprintf(`{"id": "say", "type": "send_message", "message": {"type": "text", "text": "{{repeat('x', %d)}}"}}`, size),
		`{"id": "done", "type": "end", "output": `+output+`}`)
}

// messageSize is what a text message of size x's takes as JSON.
func messageSize(size int) int {
	b, _ := json.Marshal(Message{Type: "text", Text: strings.Repeat("x", size)})
	return len(b)
}

func TestOutputBudget(t *testing.T) {
	t.Parallel()
	const outputOf100 = `{"s": "{{repeat('y', 100)}}"}`
	// The output {"s": "yyy…"} of 100 y's takes 108 bytes.
	exact := 3*messageSize(20000) + 108
	tests := []struct {
		name   string
		doc    string
		budget int
		// sent is how many messages went; failedAt the node stopped ("" for
		// a completed run).
		sent     int
		failedAt string
	}{
		{"a loop of messages stops at the one that would pass", sayLoop(150, 200000, `{}`), 512 << 10, 2, "say"},
		{"one message over the whole budget", sayLoop(1, 70000, `{}`), 64 << 10, 0, "say"},
		{"messages and output exactly at the budget", sayLoop(3, 20000, outputOf100), exact, 3, ""},
		{"the output one byte past it", sayLoop(3, 20000, outputOf100), exact - 1, 3, "done"},
		{"a message one byte past it", sayLoop(3, 20000, `{}`), 3*messageSize(20000) - 1, 2, "say"},
		{"a message of many fields stops while it is built", nodes("cards",
			`{"id": "cards", "type": "send_message", "message": {"type": "carousel", "cards": [`+
				strings.TrimSuffix(strings.Repeat(`{"title": "{{repeat('t', 100000)}}", "subtitle": "{{repeat('s', 100000)}}"},`, 10), ",")+`]}}`),
			1 << 20, 0, "cards"},
		{"quick replies count", nodes("ask",
			`{"id": "ask", "type": "question", "text": "pick", "quick_replies": [`+
				strings.TrimSuffix(strings.Repeat(`"{{repeat('q', 100000)}}",`, 13), ",")+`]}`),
			1 << 20, 0, "ask"},
		{"a called flow's messages count", nodes("call",
			`{"id": "call", "type": "call_flow", "flow_id": "talker", "next": "done"}`,
			`{"id": "done", "type": "end"}`),
			512 << 10, 2, "call/say"},
		{"a called flow's output is its caller's value, not the run's output", nodes("call",
			`{"id": "call", "type": "call_flow", "flow_id": "big", "save_as": "got", "next": "done"}`,
			`{"id": "done", "type": "end", "output": {"n": "{{len(vars.got.s)}}"}}`),
			64 << 10, 0, ""},
	}
	called := flowMap{
		"talker": parse(t, sayLoop(5, 200000, `{}`)),
		"big":    parse(t, nodes("done", `{"id": "done", "type": "end", "output": {"s": "{{repeat('b', 500000)}}"}}`)),
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &Engine{Flows: called, Budget: Budget{Output: tt.budget}}
			rec := &recorder{}
			res := e.Invoke(context.Background(), parse(t, tt.doc), Invocation{RunID: "run1", WorkspaceID: "ws1", Observer: rec})
			r := res.Run
			if len(r.Messages) != tt.sent || len(res.Messages) != tt.sent {
				t.Fatalf("%d messages kept, %d answered; want %d", len(r.Messages), len(res.Messages), tt.sent)
			}
			if got := strings.Count(strings.Join(rec.events, "\n"), "message "); got != tt.sent {
				t.Fatalf("%d messages heard; want %d", got, tt.sent)
			}
			if tt.failedAt == "" {
				if r.Status != StatusCompleted {
					t.Fatalf("status %s %+v; want completed", r.Status, r.Error)
				}
				return
			}
			want := fmt.Sprintf("the run's messages and output would pass its budget of %s (RUN_OUTPUT_LIMIT); node %q was stopped",
				bytesize.Size(tt.budget), tt.failedAt)
			if r.Status != StatusFailed || r.Error.Code != CodeBudgetExceeded || r.Error.Message != want {
				t.Fatalf("status %s %+v; want failed %s %q", r.Status, r.Error, CodeBudgetExceeded, want)
			}
			if len(r.Output) != 0 || r.CompletedAt == nil {
				t.Fatalf("output %v, completed_at %v; want {} and a time", r.Output, r.CompletedAt)
			}
			last := res.NodeRuns[len(res.NodeRuns)-1]
			if last.NodeID != tt.failedAt || !strings.HasPrefix(last.Error, CodeBudgetExceeded+": the run's messages and output") || last.Output != nil {
				t.Fatalf("last node run %+v", last)
			}
			// The stream shows the stopped node's end with its error, and
			// no message after it.
			heard := strings.Join(rec.events, "\n")
			at := strings.Index(heard, "end "+tt.failedAt+" error")
			if at < 0 || strings.Contains(heard[at:], "message ") {
				t.Fatalf("events %.300q", heard)
			}
		})
	}
}

// A continue's messages count with the earlier calls': the budget is the
// run's.
func TestOutputBudgetCountsEveryCall(t *testing.T) {
	t.Parallel()
	def := parse(t, nodes("ask",
		`{"id": "ask", "type": "question", "text": "{{repeat('q', 300000)}}", "save_as": "a", "next": "say"}`,
		`{"id": "say", "type": "send_message", "message": {"type": "text", "text": "{{repeat('x', 300000)}}"}, "next": "done"}`,
		`{"id": "done", "type": "end"}`))
	e := &Engine{Budget: Budget{Output: 512 << 10}}
	first := invoke(t, e, def, nil)
	if first.Run.Status != StatusWaiting || len(first.Messages) != 1 {
		t.Fatalf("first call: %s, %d messages", first.Run.Status, len(first.Messages))
	}
	res, err := e.Continue(context.Background(), def, first.Run, Continuation{Text: "yes"})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Run; r.Status != StatusFailed || r.Error.Code != CodeBudgetExceeded || !strings.Contains(r.Error.Message, `node "say"`) ||
		len(r.Messages) != 1 || len(res.Messages) != 0 {
		t.Fatalf("continue: %s %+v, %d messages kept, %d answered", r.Status, r.Error, len(r.Messages), len(res.Messages))
	}
}

// An llm node's sent message counts; a node that may not send it fails
// and gives its AI unit back.
func TestOutputBudgetStopsAnLLMMessage(t *testing.T) {
	t.Parallel()
	q := &fakeQuota{limit: 5}
	e := &Engine{LLM: answer(strings.Repeat("a", 70000)), Quota: q, Guard: guardFunc(func(string) (bool, error) { return false, nil }),
		Budget: Budget{Output: 64 << 10}}
	res := aiInvoke(t, e, nodes("ask", `{"id": "ask", "type": "llm", "prompt": "hi", "send": true}`), nil)
	if r := res.Run; r.Status != StatusFailed || r.Error.Code != CodeBudgetExceeded || len(r.Messages) != 0 {
		t.Fatalf("run %s %+v, %d messages", r.Status, r.Error, len(r.Messages))
	}
	if q.used != 0 || q.refunds != 1 || res.Usage.BillableUnits != 0 || res.Usage.Tokens != 10 {
		t.Fatalf("units used %d, refunds %d; usage %+v", q.used, q.refunds, res.Usage)
	}
}

func TestTraceBudget(t *testing.T) {
	t.Parallel()
	// Each iteration's variable node records {"v": 200000 x's} as its
	// output, 200008 bytes: two fit in 512 KiB, the others are markers.
	const valueSize = 200008
	def := parse(t, nodes("ask",
		`{"id": "ask", "type": "question", "text": "go?", "next": "each"}`,
		`{"id": "each", "type": "loop", "over": "1..10", "as": "i", "body": "set", "next": "done"}`,
		`{"id": "set", "type": "variable", "set": {"v": "repeat('x', 200000)"}}`,
		`{"id": "done", "type": "end"}`))
	tests := []struct {
		name string
		// earlier is what the trace took in the run's earlier calls, as
		// the store says.
		earlier int
		whole   int
	}{
		{"a fresh run", 0, 2},
		{"a run whose earlier calls took some", 200 << 10, 1},
		{"a run whose earlier calls took it all", 512 << 10, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &Engine{Budget: Budget{Output: 512 << 10}}
			first := invoke(t, e, def, nil)
			first.Run.TraceBytes = tt.earlier
			res, err := e.Continue(context.Background(), def, first.Run, Continuation{Text: "go"})
			if err != nil || res.Run.Status != StatusCompleted {
				t.Fatalf("continue: %v %+v", err, res.Run)
			}
			whole, marked := 0, 0
			for _, nr := range res.NodeRuns {
				if nr.NodeID != "set" {
					continue
				}
				out, _ := nr.Output.(map[string]any)
				switch {
				case out["truncated"] == true:
					if out["bytes"] != float64(valueSize) || len(out) != 2 {
						t.Fatalf("marker %v", out)
					}
					marked++
				case len(out["v"].(string)) == 200000:
					whole++
				default:
					t.Fatalf("output %.40v", out)
				}
			}
			if whole != tt.whole || marked != 10-tt.whole {
				t.Fatalf("%d outputs whole, %d marked; want %d whole", whole, marked, tt.whole)
			}
			if max := max(tt.earlier, 512<<10) + 1<<10; res.Run.TraceBytes > max {
				t.Fatalf("the trace took %d bytes; want at most %d", res.Run.TraceBytes, max)
			}
		})
	}
}

// Error texts quote what the flow built; they are cut, on the run and in
// the trace.
func TestErrorTextsAreCut(t *testing.T) {
	t.Parallel()
	unreachable := httpFunc(func(_ context.Context, req HTTPRequest) (HTTPResponse, error) {
		return HTTPResponse{}, fmt.Errorf("Get %q: connection refused", req.URL)
	})
	e := &Engine{HTTP: unreachable}
	url := `https://shop.example/{{repeat('p', 500000)}}`
	res := invoke(t, e, parse(t, nodes("each",
		`{"id": "each", "type": "loop", "over": "1..3", "as": "i", "body": "try", "next": "last"}`,
		`{"id": "try", "type": "http", "method": "GET", "url": "`+url+`", "on_error": "skip"}`,
		`{"id": "skip", "type": "variable", "set": {"n": "1"}}`,
		`{"id": "last", "type": "http", "method": "GET", "url": "`+url+`"}`)), nil)
	r := res.Run
	if r.Status != StatusFailed || r.Error.Code != CodeNodeFailed || len(r.Error.Message) > MaxErrorBytes+len("…") ||
		!strings.HasPrefix(r.Error.Message, `node "last" (http): request failed: Get "https://shop.example/ppp`) || !strings.HasSuffix(r.Error.Message, "…") {
		t.Fatalf("run error %d bytes: %.200s", len(r.Error.Message), r.Error.Message)
	}
	errs := 0
	for _, nr := range res.NodeRuns {
		if nr.Error != "" {
			errs++
			if len(nr.Error) > MaxErrorBytes+len("…") {
				t.Fatalf("node %s error of %d bytes", nr.NodeID, len(nr.Error))
			}
		}
	}
	if errs != 4 {
		t.Fatalf("%d node runs with an error; want 4", errs)
	}
}

// An http node's URL and headers are bounded together, as they are built.
func TestHTTPRequestHeadBound(t *testing.T) {
	t.Parallel()
	called := false
	e := &Engine{HTTP: httpFunc(func(context.Context, HTTPRequest) (HTTPResponse, error) {
		called = true
		return HTTPResponse{Status: 200}, nil
	})}
	res := invoke(t, e, parse(t, nodes("call",
		`{"id": "call", "type": "http", "method": "GET", "url": "https://shop.example/{{repeat('u', 600000)}}",
		  "headers": {"X-A": "{{repeat('a', 300000)}}", "X-B": "{{repeat('b', 300000)}}"}}`)), nil)
	if r := res.Run; r.Status != StatusFailed || r.Error.Code != CodeNodeFailed || !strings.Contains(r.Error.Message, "the url and headers would pass 1 MiB") || called {
		t.Fatalf("run %s %+v; called %v", r.Status, r.Error, called)
	}
}

// What a run builds is bounded as it goes, not after: the 150 × 1 MB loop
// of the report, a carousel of 130 fields of 1 MB and an output of 100
// allocate a few times the budget, where building them whole would take
// hundreds of MB. Not parallel: it reads the process's allocation count.
func TestOutputBudgetBoundsWhatARunBuilds(t *testing.T) {
	field := `"{{repeat('x', 1000000)}}"`
	card := `{"title": ` + field + `, "subtitle": ` + field + `, "image_url": ` + field + `, "buttons": [` +
		strings.TrimSuffix(strings.Repeat(`{"type": "postback", "title": `+field+`, "payload": `+field+`},`, 3), ",") + `]}`
	var output []string
	for i := range 100 {
		output = append(output, fmt.Sprintf(`"k%d": %s`, i, field))
	}
	for name, doc := range map[string]string{
		"loop of messages": sayLoop(150, 1000000, `{}`),
		"carousel": nodes("cards", `{"id": "cards", "type": "send_message", "message": {"type": "carousel", "cards": [`+
			strings.TrimSuffix(strings.Repeat(card+",", 10), ",")+`]}}`),
		"output": nodes("done", `{"id": "done", "type": "end", "output": {`+strings.Join(output, ", ")+`}}`),
	} {
		def := parse(t, doc)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		res := invoke(t, &Engine{}, def, nil)
		runtime.ReadMemStats(&after)
		if r := res.Run; r.Status != StatusFailed {
			t.Fatalf("%s: %s", name, r.Status)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 48<<20 {
			t.Errorf("%s: the run allocated %d MB", name, got>>20)
		}
	}
}
