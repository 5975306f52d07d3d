package run

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
)

func parse(t *testing.T, doc string) *flow.Definition {
	t.Helper()
	d, err := flow.Parse([]byte(doc), flow.ParseOptions{})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return d
}

// nodes wraps node objects after a start leading to the first.
func nodes(first string, ns ...string) string {
	all := append([]string{`{"id": "start", "type": "start", "next": "` + first + `"}`}, ns...)
	return `{"name": "t", "triggers": ["api"], "nodes": [` + strings.Join(all, ",") + `]}`
}

type httpFunc func(ctx context.Context, req HTTPRequest) (HTTPResponse, error)

func (f httpFunc) Call(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
	return f(ctx, req)
}

type scriptFunc func(ctx context.Context, code string, vars map[string]any, limit time.Duration) (any, error)

func (f scriptFunc) Run(ctx context.Context, code string, vars map[string]any, limit time.Duration) (any, error) {
	return f(ctx, code, vars, limit)
}

type flowMap map[string]*flow.Definition

func (m flowMap) Load(_ context.Context, ws, id string) (*flow.Definition, error) {
	if ws != "ws1" || m[id] == nil {
		return nil, fmt.Errorf("load %s: %w", id, ErrFlowNotFound)
	}
	return m[id], nil
}

// clock is a fake clock that only moves when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type recorder struct{ events []string }

func (r *recorder) RunStarted(id string) { r.events = append(r.events, "run "+id) }

func (r *recorder) NodeStarted(id string, typ flow.NodeType) {
	r.events = append(r.events, "start "+id)
}
func (r *recorder) Message(m Message) { r.events = append(r.events, "message "+m.Text) }
func (r *recorder) NodeEnded(nr NodeRun) {
	s := "end " + nr.NodeID
	if nr.Error != "" {
		s += " error"
	}
	r.events = append(r.events, s)
}

func invoke(t *testing.T, e *Engine, def *flow.Definition, input map[string]any) *Result {
	t.Helper()
	return e.Invoke(context.Background(), def, Invocation{RunID: "run1", FlowID: "f", Version: 1, WorkspaceID: "ws1", SessionID: "sess1", Input: input})
}

const orderStatus = `{
  "name": "Order status", "triggers": ["api"],
  "nodes": [
    {"id": "start", "type": "start", "next": "ask"},
    {"id": "ask", "type": "question", "text": "Your order number?", "save_as": "order_no", "next": "lookup"},
    {"id": "lookup", "type": "http", "method": "GET", "url": "https://shop.example/orders/{{vars.order_no}}",
     "save_as": "order", "next": "reply", "on_error": "sorry"},
    {"id": "reply", "type": "send_message", "message": {"type": "text", "text": "Status: {{vars.order.body.status}}"}, "next": "done"},
    {"id": "sorry", "type": "send_message", "message": {"type": "text", "text": "Not found"}, "next": "done"},
    {"id": "done", "type": "end", "output": {"status": "{{vars.order.body.status}}"}}
  ]
}`

func shop(status int, body string, err error) httpFunc {
	return func(_ context.Context, req HTTPRequest) (HTTPResponse, error) {
		if err != nil {
			return HTTPResponse{}, err
		}
		return HTTPResponse{Status: status, Headers: map[string]string{"Content-Type": "application/json"}, Body: []byte(body)}, nil
	}
}

func TestSessionWaitContinueComplete(t *testing.T) {
	t.Parallel()
	def := parse(t, orderStatus)
	var got HTTPRequest
	e := &Engine{HTTP: httpFunc(func(_ context.Context, req HTTPRequest) (HTTPResponse, error) {
		got = req
		return HTTPResponse{Status: 200, Headers: map[string]string{"Content-Type": "application/json"}, Body: []byte(`{"status":"shipped"}`)}, nil
	})}
	res := invoke(t, e, def, map[string]any{"customer": "c1"})
	r := res.Run
	if r.Status != StatusWaiting || r.SessionID != "sess1" || r.CurrentNodeID != "ask" || r.CompletedAt != nil {
		t.Fatalf("after invoke: %+v", r)
	}
	if len(res.Messages) != 1 || res.Messages[0].Text != "Your order number?" {
		t.Fatalf("messages %+v", res.Messages)
	}
	res2, err := e.Continue(context.Background(), def, r, Continuation{Text: "42"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusCompleted || r.CompletedAt == nil || r.Error != nil {
		t.Fatalf("after continue: %+v %+v", r, r.Error)
	}
	if got.URL != "https://shop.example/orders/42" || got.Method != "GET" || got.Body != nil {
		t.Fatalf("request %+v", got)
	}
	if r.Vars["order_no"] != "42" || !reflect.DeepEqual(r.Vars["input"], map[string]any{"customer": "c1"}) {
		t.Fatalf("vars %+v", r.Vars)
	}
	if !reflect.DeepEqual(r.Output, map[string]any{"status": "shipped"}) {
		t.Fatalf("output %+v", r.Output)
	}
	if len(res2.Messages) != 1 || res2.Messages[0].Text != "Status: shipped" || len(r.Messages) != 2 {
		t.Fatalf("messages %+v / %+v", res2.Messages, r.Messages)
	}
	if _, err := e.Continue(context.Background(), def, r, Continuation{Text: "again"}); !errors.Is(err, ErrNotWaiting) {
		t.Fatalf("continue a completed run: %v", err)
	}
	// A continue with a number keeps it a string.
	res = invoke(t, e, def, nil)
	if _, err := e.Continue(context.Background(), def, res.Run, Continuation{Text: "7"}); err != nil || res.Run.Vars["order_no"] != "7" {
		t.Fatalf("saved %#v, %v", res.Run.Vars["order_no"], err)
	}
}

func TestHTTP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		caller     httpFunc
		wantStatus Status
		wantOut    map[string]any
		wantMsg    string
		wantSaved  any
	}{
		{"2xx JSON", shop(200, `{"status":"shipped"}`, nil), StatusCompleted, map[string]any{"status": "shipped"}, "Status: shipped",
			map[string]any{"status": float64(200), "headers": map[string]any{"content-type": "application/json"}, "body": map[string]any{"status": "shipped"}}},
		{"404 takes on_error", shop(404, `{"error":"nope"}`, nil), StatusCompleted, map[string]any{"status": nil}, "Not found",
			map[string]any{"status": float64(404), "headers": map[string]any{"content-type": "application/json"}, "body": map[string]any{"error": "nope"}}},
		{"transport error takes on_error", shop(0, "", errors.New("dial tcp: refused")), StatusCompleted, map[string]any{"status": nil}, "Not found",
			map[string]any{"status": float64(0), "headers": map[string]any{}, "body": nil, "error": "dial tcp: refused"}},
		{"text body stays a string", func(context.Context, HTTPRequest) (HTTPResponse, error) {
			return HTTPResponse{Status: 200, Headers: map[string]string{"Content-Type": "text/plain"}, Body: []byte(`{"status":"x"}`)}, nil
		}, StatusFailed, map[string]any{}, "Your order number?", // a string has no .status
			map[string]any{"status": float64(200), "headers": map[string]any{"content-type": "text/plain"}, "body": `{"status":"x"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			def := parse(t, orderStatus)
			e := &Engine{HTTP: tt.caller}
			res := invoke(t, e, def, nil)
			if _, err := e.Continue(context.Background(), def, res.Run, Continuation{Text: "1"}); err != nil {
				t.Fatal(err)
			}
			r := res.Run
			if r.Status != tt.wantStatus || !reflect.DeepEqual(r.Output, tt.wantOut) {
				t.Fatalf("status %s output %#v error %+v", r.Status, r.Output, r.Error)
			}
			if last := r.Messages[len(r.Messages)-1]; last.Text != tt.wantMsg {
				t.Fatalf("message %q", last.Text)
			}
			if tt.wantSaved != nil && !reflect.DeepEqual(r.Vars["order"], tt.wantSaved) {
				t.Fatalf("saved %#v", r.Vars["order"])
			}
		})
	}
}

func TestHTTPFailsWithoutOnError(t *testing.T) {
	t.Parallel()
	def := parse(t, nodes("call", `{"id": "call", "type": "http", "method": "POST", "url": "https://e.x/{{vars.input.id}}",
		"headers": {"X-Id": "{{vars.input.id}}", "Authorization": "Bearer s3cret"}, "body": {"n": "{{vars.input.n}}", "s": "id {{vars.input.id}}"}, "timeout_ms": 2000, "next": "done"}`,
		`{"id": "done", "type": "end"}`))
	var got HTTPRequest
	e := &Engine{HTTP: httpFunc(func(_ context.Context, req HTTPRequest) (HTTPResponse, error) {
		got = req
		return HTTPResponse{Status: 500, Body: []byte("oops")}, nil
	})}
	res := invoke(t, e, def, map[string]any{"id": "a1", "n": float64(3)})
	r := res.Run
	if r.Status != StatusFailed || r.Error.Code != CodeNodeFailed || !strings.Contains(r.Error.Message, `"call"`) || !strings.Contains(r.Error.Message, "500") {
		t.Fatalf("run %+v %+v", r, r.Error)
	}
	if got.URL != "https://e.x/a1" || got.Headers["X-Id"] != "a1" || got.Headers["Authorization"] != "Bearer s3cret" || got.Headers["Content-Type"] != "application/json" ||
		string(got.Body) != `{"n":3,"s":"id a1"}` || got.Timeout != 2*time.Second {
		t.Fatalf("request %+v body %s", got, got.Body)
	}
	last := res.NodeRuns[len(res.NodeRuns)-1]
	if last.NodeID != "call" || last.Error == "" {
		t.Fatalf("node run %+v", last)
	}
	if h := last.Input.(map[string]any)["headers"].(map[string]any); h["X-Id"] != "a1" || h["Authorization"] != "[redacted]" {
		t.Fatalf("traced headers %v", h)
	}
}

// TestHTTPRequestAsSent pins what an http node or a webhook_call action
// sends (docs/flows.md "http"): GET (POST for webhook_call) and 10 s by
// default; a string body as is, with no Content-Type added; any other body
// as JSON, with Content-Type: application/json unless the node sets one.
func TestHTTPRequestAsSent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		node        string
		wantMethod  string
		wantBody    string
		wantType    string
		wantTimeout time.Duration
	}{
		{"http defaults", `{"id": "h", "type": "http", "url": "https://e.x/{{vars.input.id}}"}`, "GET", "", "", 10 * time.Second},
		{"webhook_call defaults", `{"id": "h", "type": "action", "action": "webhook_call", "url": "https://e.x/{{vars.input.id}}"}`, "POST", "", "", 10 * time.Second},
		{"string body as is", `{"id": "h", "type": "http", "method": "PUT", "url": "https://e.x/{{vars.input.id}}", "body": "id={{vars.input.id}}", "timeout_ms": 1}`,
			"PUT", "id=a1", "", time.Millisecond},
		{"template of a string as is", `{"id": "h", "type": "action", "action": "webhook_call", "url": "https://e.x/{{vars.input.id}}", "body": "{{vars.input.id}}"}`,
			"POST", "a1", "", 10 * time.Second},
		{"object body as JSON", `{"id": "h", "type": "http", "method": "PATCH", "url": "https://e.x/{{vars.input.id}}", "body": {"n": "{{vars.input.n}}"}}`,
			"PATCH", `{"n":3}`, "application/json", 10 * time.Second},
		{"template of an object as JSON", `{"id": "h", "type": "http", "method": "POST", "url": "https://e.x/{{vars.input.id}}", "body": "{{vars.input}}"}`,
			"POST", `{"id":"a1","n":3}`, "application/json", 10 * time.Second},
		{"the node's own content type", `{"id": "h", "type": "http", "method": "DELETE", "url": "https://e.x/{{vars.input.id}}",
			"headers": {"content-TYPE": "application/merge-patch+json"}, "body": [1], "timeout_ms": 10000}`,
			"DELETE", `[1]`, "application/merge-patch+json", 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []HTTPRequest
			e := &Engine{HTTP: httpFunc(func(_ context.Context, req HTTPRequest) (HTTPResponse, error) {
				got = append(got, req)
				return HTTPResponse{Status: 204}, nil
			})}
			res := invoke(t, e, parse(t, nodes("h", tt.node)), map[string]any{"id": "a1", "n": float64(3)})
			if res.Run.Status != StatusCompleted || len(got) != 1 {
				t.Fatalf("status %s error %+v, %d requests", res.Run.Status, res.Run.Error, len(got))
			}
			req := got[0]
			contentType := ""
			for k, v := range req.Headers {
				if strings.EqualFold(k, "Content-Type") {
					contentType = v
				}
			}
			if req.Method != tt.wantMethod || req.URL != "https://e.x/a1" || string(req.Body) != tt.wantBody ||
				contentType != tt.wantType || len(req.Headers) > 1 || req.Timeout != tt.wantTimeout {
				t.Fatalf("sent %s %s headers %v body %q timeout %s; want %s body %q type %q timeout %s",
					req.Method, req.URL, req.Headers, req.Body, req.Timeout, tt.wantMethod, tt.wantBody, tt.wantType, tt.wantTimeout)
			}
		})
	}
}

func TestNodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		doc     string
		input   map[string]any
		wantOut map[string]any
		wantMsg []Message
	}{
		{"template keeps the type", nodes("e", `{"id": "e", "type": "end", "output": {"n": "{{vars.input.n}}", "s": "n={{vars.input.n}}", "l": "{{vars.input.l}}", "lit": [1, true, null]}}`),
			map[string]any{"n": float64(3), "l": []any{"a"}},
			map[string]any{"n": float64(3), "s": "n=3", "l": []any{"a"}, "lit": []any{float64(1), true, nil}}, nil},
		{"send_message every type", nodes("a",
			`{"id": "a", "type": "send_message", "message": {"type": "text", "text": "Hi {{vars.input.name}}"}, "next": "b"}`,
			`{"id": "b", "type": "send_message", "message": {"type": "quick_replies", "text": "Pick", "quick_replies": ["{{vars.input.name}}", "no"]}, "next": "c"}`,
			`{"id": "c", "type": "send_message", "message": {"type": "buttons", "text": "Go", "buttons": [{"type": "web_url", "title": "Site", "url": "https://e.x/{{vars.input.name}}"}, {"type": "postback", "title": "P", "payload": "P_{{vars.input.name}}"}]}, "next": "d"}`,
			`{"id": "d", "type": "send_message", "message": {"type": "carousel", "cards": [{"title": "T {{vars.input.name}}", "subtitle": "S", "image_url": "https://e.x/i.png", "buttons": [{"type": "postback", "title": "Buy", "payload": "B"}]}]}}`),
			map[string]any{"name": "Ann"}, map[string]any{}, []Message{
				{Type: "text", Text: "Hi Ann"},
				{Type: "quick_replies", Text: "Pick", QuickReplies: []string{"Ann", "no"}},
				{Type: "buttons", Text: "Go", Buttons: []Button{{Type: "web_url", Title: "Site", URL: "https://e.x/Ann"}, {Type: "postback", Title: "P", Payload: "P_Ann"}}},
				{Type: "carousel", Cards: []Card{{Title: "T Ann", Subtitle: "S", ImageURL: "https://e.x/i.png", Buttons: []Button{{Type: "postback", Title: "Buy", Payload: "B"}}}}},
			}},
		{"condition then", nodes("c", `{"id": "c", "type": "condition", "if": "vars.input.n > 2", "then": "yes", "else": "no"}`,
			`{"id": "yes", "type": "end", "output": {"b": "yes"}}`, `{"id": "no", "type": "end", "output": {"b": "no"}}`),
			map[string]any{"n": float64(3)}, map[string]any{"b": "yes"}, nil},
		{"condition else", nodes("c", `{"id": "c", "type": "condition", "if": "vars.input.n > 2", "then": "yes", "else": "no"}`,
			`{"id": "yes", "type": "end", "output": {"b": "yes"}}`, `{"id": "no", "type": "end", "output": {"b": "no"}}`),
			map[string]any{"n": float64(1)}, map[string]any{"b": "no"}, nil},
		{"condition non-bool is false", nodes("c", `{"id": "c", "type": "condition", "if": "vars.input.n", "then": "yes", "else": "no"}`,
			`{"id": "yes", "type": "end", "output": {"b": "yes"}}`, `{"id": "no", "type": "end", "output": {"b": "no"}}`),
			map[string]any{"n": float64(1)}, map[string]any{"b": "no"}, nil},
		{"condition without branch completes", nodes("c", `{"id": "c", "type": "condition", "if": "false", "then": "yes"}`, `{"id": "yes", "type": "end", "output": {"b": "yes"}}`),
			nil, map[string]any{}, nil},
		{"cases first match", nodes("c", `{"id": "c", "type": "condition", "cases": [{"if": "vars.input.n == 1", "next": "one"}, {"if": "vars.input.n >= 1", "next": "many"}], "else": "none"}`,
			`{"id": "one", "type": "end", "output": {"b": "one"}}`, `{"id": "many", "type": "end", "output": {"b": "many"}}`, `{"id": "none", "type": "end", "output": {"b": "none"}}`),
			map[string]any{"n": float64(5)}, map[string]any{"b": "many"}, nil},
		{"cases else", nodes("c", `{"id": "c", "type": "condition", "cases": [{"if": "vars.input.n == 1", "next": "one"}], "else": "none"}`,
			`{"id": "one", "type": "end", "output": {"b": "one"}}`, `{"id": "none", "type": "end", "output": {"b": "none"}}`),
			map[string]any{"n": float64(5)}, map[string]any{"b": "none"}, nil},
		{"variable set in order", nodes("v", `{"id": "v", "type": "variable", "set": {"a": "2", "b": "vars.a * 10", "g": "Hi {{vars.b}}", "o": {"k": [1]}}, "next": "e"}`,
			`{"id": "e", "type": "end", "output": {"a": "{{vars.a}}", "b": "{{vars.b}}", "g": "{{vars.g}}", "o": "{{vars.o}}"}}`),
			nil, map[string]any{"a": float64(2), "b": float64(20), "g": "Hi 20", "o": map[string]any{"k": []any{float64(1)}}}, nil},
		{"variable ops", nodes("s",
			`{"id": "s", "type": "variable", "name": "n", "op": "set", "value": "5", "next": "i"}`,
			`{"id": "i", "type": "variable", "name": "n", "op": "increment", "next": "d"}`,
			`{"id": "d", "type": "variable", "name": "n", "op": "decrement", "value": "3", "next": "a1"}`,
			`{"id": "a1", "type": "variable", "name": "l", "op": "append", "value": "'x'", "next": "a2"}`,
			`{"id": "a2", "type": "variable", "name": "l", "op": "append", "value": "{\"k\": 1}", "next": "a3"}`,
			`{"id": "a3", "type": "variable", "name": "l", "op": "append", "value": "'x'", "next": "r"}`,
			`{"id": "r", "type": "variable", "name": "l", "op": "remove", "value": "'x'", "next": "c0"}`,
			`{"id": "c0", "type": "variable", "name": "gone", "op": "set", "value": "1", "next": "c"}`,
			`{"id": "c", "type": "variable", "name": "gone", "op": "clear", "next": "e"}`,
			`{"id": "e", "type": "end", "output": {"n": "{{vars.n}}", "l": "{{vars.l}}", "gone": "{{vars.gone}}"}}`),
			nil, map[string]any{"n": float64(3), "l": []any{map[string]any{"k": float64(1)}}, "gone": nil}, nil},
		{"action set_variable", nodes("a", `{"id": "a", "type": "action", "action": "set_variable", "name": "f", "value": "vars.input.n + 1", "next": "e"}`,
			`{"id": "e", "type": "end", "output": {"f": "{{vars.f}}"}}`), map[string]any{"n": float64(1)}, map[string]any{"f": float64(2)}, nil},
		{"loop over a list", nodes("l",
			`{"id": "l", "type": "loop", "over": "vars.input.items", "as": "item", "body": "add", "next": "e"}`,
			`{"id": "add", "type": "variable", "name": "sum", "op": "increment", "value": "vars.item", "next": "say"}`,
			`{"id": "say", "type": "send_message", "message": {"text": "item {{vars.item}}"}}`,
			`{"id": "e", "type": "end", "output": {"sum": "{{vars.sum}}", "item": "{{vars.item}}"}}`),
			map[string]any{"items": []any{float64(1), float64(2), float64(3)}}, map[string]any{"sum": float64(6), "item": nil},
			[]Message{{Type: "text", Text: "item 1"}, {Type: "text", Text: "item 2"}, {Type: "text", Text: "item 3"}}},
		{"loop gives back what its variable shadowed", nodes("v",
			`{"id": "v", "type": "variable", "set": {"item": "'mine'"}, "next": "l"}`,
			`{"id": "l", "type": "loop", "over": "[1, 2]", "as": "item", "body": "say", "next": "e"}`,
			`{"id": "say", "type": "send_message", "message": {"text": "item {{vars.item}}"}}`,
			`{"id": "e", "type": "end", "output": {"item": "{{vars.item}}"}}`),
			nil, map[string]any{"item": "mine"}, []Message{{Type: "text", Text: "item 1"}, {Type: "text", Text: "item 2"}}},
		{"loop max_iterations", nodes("l",
			`{"id": "l", "type": "loop", "over": "1..10", "as": "i", "body": "add", "max_iterations": 4, "next": "e"}`,
			`{"id": "add", "type": "variable", "name": "sum", "op": "increment", "value": "vars.i"}`,
			`{"id": "e", "type": "end", "output": {"sum": "{{vars.sum}}"}}`), nil, map[string]any{"sum": float64(10)}, nil},
		{"loop over nothing", nodes("l",
			`{"id": "l", "type": "loop", "over": "vars.input.none", "as": "i", "body": "add", "next": "e"}`,
			`{"id": "add", "type": "variable", "name": "sum", "op": "increment"}`,
			`{"id": "e", "type": "end", "output": {"sum": "{{vars.sum ?? 0}}"}}`), nil, map[string]any{"sum": float64(0)}, nil},
		{"end inside a loop body completes", nodes("l",
			`{"id": "l", "type": "loop", "over": "[1, 2]", "as": "i", "body": "e", "next": "after"}`,
			`{"id": "e", "type": "end", "output": {"i": "{{vars.i}}"}}`,
			`{"id": "after", "type": "end", "output": {"i": "after"}}`), nil, map[string]any{"i": float64(1)}, nil},
		{"no next completes", nodes("a", `{"id": "a", "type": "send_message", "message": {"text": "bye"}}`), nil, map[string]any{}, []Message{{Type: "text", Text: "bye"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := invoke(t, &Engine{}, parse(t, tt.doc), tt.input)
			r := res.Run
			if r.Status != StatusCompleted {
				t.Fatalf("status %s error %+v", r.Status, r.Error)
			}
			if !reflect.DeepEqual(r.Output, tt.wantOut) {
				t.Fatalf("output %#v, want %#v", r.Output, tt.wantOut)
			}
			if tt.wantMsg != nil && !reflect.DeepEqual(res.Messages, tt.wantMsg) {
				t.Fatalf("messages %#v", res.Messages)
			}
			if r.NodesExecuted != len(res.NodeRuns) {
				t.Fatalf("nodes executed %d, node runs %d", r.NodesExecuted, len(res.NodeRuns))
			}
		})
	}
}

func TestNodeFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		doc    string
		wantIn string
	}{
		{"expression error", nodes("v", `{"id": "v", "type": "variable", "set": {"a": "1 / vars.input.zero"}}`), `"v"`},
		{"condition error", nodes("c", `{"id": "c", "type": "condition", "if": "vars.input.l[5] == 1", "then": "c2"}`, `{"id": "c2", "type": "end"}`), "index out of range"},
		{"loop over a string", nodes("l", `{"id": "l", "type": "loop", "over": "'abc'", "as": "i", "body": "b"}`, `{"id": "b", "type": "end"}`), "not a list"},
		{"increment a string", nodes("s", `{"id": "s", "type": "variable", "name": "n", "op": "set", "value": "'x'", "next": "i"}`, `{"id": "i", "type": "variable", "name": "n", "op": "increment"}`), "not a number"},
		{"append to a number", nodes("s", `{"id": "s", "type": "variable", "name": "n", "op": "set", "value": "1", "next": "i"}`, `{"id": "i", "type": "variable", "name": "n", "op": "append", "value": "2"}`), "not a list"},
		{"question in a loop body", nodes("l", `{"id": "l", "type": "loop", "over": "[1]", "as": "i", "body": "q"}`, `{"id": "q", "type": "question", "text": "?"}`), "inside a loop body"},
		{"knowledge without a base", nodes("x", `{"id": "x", "type": "knowledge", "query": "hi"}`), "no knowledge base"},
		{"huge string", nodes("v", `{"id": "v", "type": "variable", "set": {"a": "repeat('x', 600000) + repeat('y', 600000)"}}`), "larger than"},
		{"vars bound", nodes("v", `{"id": "v", "type": "variable", "set": {"a": "repeat('x', 900000)", "b": "vars.a", "c": "vars.a", "d": "vars.a", "e": "vars.a"}}`), "vars would pass"},
		{"http without a caller", nodes("h", `{"id": "h", "type": "http", "url": "https://e.x"}`), "no HTTP caller"},
		{"a chat-only node", nodes("a", `{"id": "a", "type": "ai_response"}`), `node "a" (ai_response): a chat-only node cannot run in a headless run`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := invoke(t, &Engine{}, parse(t, tt.doc), map[string]any{"zero": float64(0), "l": []any{}}).Run
			if r.Status != StatusFailed || r.Error == nil || r.Error.Code != CodeNodeFailed || !strings.Contains(r.Error.Message, tt.wantIn) {
				t.Fatalf("status %s error %+v, want node_failed with %q", r.Status, r.Error, tt.wantIn)
			}
			if r.CompletedAt == nil || r.SessionID != "" {
				t.Fatalf("a failed run: %+v", r)
			}
		})
	}
}

func TestNodeBudget(t *testing.T) {
	t.Parallel()
	def := parse(t, nodes("l", `{"id": "l", "type": "loop", "over": "1..201", "as": "i", "body": "b", "max_iterations": 1000, "next": "e"}`,
		`{"id": "b", "type": "variable", "name": "n", "op": "increment"}`, `{"id": "e", "type": "end"}`))
	rec := &recorder{}
	start := time.Now()
	res := (&Engine{}).Invoke(context.Background(), def, Invocation{WorkspaceID: "ws1", Observer: rec})
	r := res.Run
	if r.Status != StatusFailed || r.Error.Code != CodeBudgetExceeded || !strings.Contains(r.Error.Message, `"b"`) {
		t.Fatalf("status %s error %+v", r.Status, r.Error)
	}
	if r.NodesExecuted != 200 || len(res.NodeRuns) != 201 {
		t.Fatalf("nodes executed %d, node runs %d", r.NodesExecuted, len(res.NodeRuns))
	}
	last := res.NodeRuns[len(res.NodeRuns)-1]
	if last.NodeID != "b" || last.DurationMS != 0 || !strings.Contains(last.Error, CodeBudgetExceeded) {
		t.Fatalf("stopped node %+v", last)
	}
	// The stopped node has a synthetic start right before its end, after
	// which the loop itself ends.
	ev := rec.events
	if ev[len(ev)-3] != "start b" || ev[len(ev)-2] != "end b error" || ev[len(ev)-1] != "end l error" {
		t.Fatalf("last events %v", ev[len(ev)-3:])
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("the node budget took too long")
	}
	// The node budget counts across calls: a continue starts from the count.
	small := &Engine{Budget: Budget{Nodes: 3}}
	def = parse(t, nodes("q", `{"id": "q", "type": "question", "text": "?", "next": "a"}`,
		`{"id": "a", "type": "send_message", "message": {"text": "a"}, "next": "b"}`, `{"id": "b", "type": "end"}`))
	res = small.Invoke(context.Background(), def, Invocation{SessionID: "s"})
	if _, err := small.Continue(context.Background(), def, res.Run, Continuation{Text: "x"}); err != nil {
		t.Fatal(err)
	}
	if res.Run.Status != StatusFailed || res.Run.Error.Code != CodeBudgetExceeded {
		t.Fatalf("budget over a continue: %s %+v", res.Run.Status, res.Run.Error)
	}
}

func TestTimeBudget(t *testing.T) {
	t.Parallel()
	t.Run("fake clock", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		e := &Engine{Now: c.Now, HTTP: httpFunc(func(context.Context, HTTPRequest) (HTTPResponse, error) {
			c.Advance(61 * time.Second)
			return HTTPResponse{Status: 200}, nil
		})}
		def := parse(t, nodes("h", `{"id": "h", "type": "http", "url": "https://e.x", "next": "e"}`, `{"id": "e", "type": "end"}`))
		res := invoke(t, e, def, nil)
		if r := res.Run; r.Status != StatusFailed || r.Error.Code != CodeBudgetExceeded || !strings.Contains(r.Error.Message, `"e" was not run`) {
			t.Fatalf("status %s error %+v", r.Status, r.Error)
		}
		if last := res.NodeRuns[len(res.NodeRuns)-1]; last.NodeID != "e" || last.DurationMS != 0 || last.Error == "" {
			t.Fatalf("stopped node %+v", last)
		}
	})
	t.Run("http interrupted", func(t *testing.T) {
		t.Parallel()
		e := &Engine{Budget: Budget{Time: 100 * time.Millisecond}, HTTP: httpFunc(func(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
			<-ctx.Done()
			return HTTPResponse{}, ctx.Err()
		})}
		def := parse(t, nodes("h", `{"id": "h", "type": "http", "url": "https://e.x", "on_error": "e", "next": "e"}`, `{"id": "e", "type": "end"}`))
		start := time.Now()
		res := invoke(t, e, def, nil)
		if r := res.Run; r.Status != StatusFailed || r.Error.Code != CodeBudgetExceeded {
			t.Fatalf("status %s error %+v", r.Status, r.Error)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("took %s", d)
		}
	})
	t.Run("http node timeout is the node's own", func(t *testing.T) {
		t.Parallel()
		e := &Engine{HTTP: httpFunc(func(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
			<-ctx.Done()
			return HTTPResponse{}, ctx.Err()
		})}
		def := parse(t, nodes("h", `{"id": "h", "type": "http", "url": "https://e.x", "timeout_ms": 20, "on_error": "sorry", "next": "e"}`,
			`{"id": "sorry", "type": "end", "output": {"r": "timeout"}}`, `{"id": "e", "type": "end"}`))
		if r := invoke(t, e, def, nil).Run; r.Status != StatusCompleted || r.Output["r"] != "timeout" {
			t.Fatalf("status %s output %v error %+v", r.Status, r.Output, r.Error)
		}
	})
	t.Run("endless script", func(t *testing.T) {
		t.Parallel()
		e := &Engine{Budget: Budget{Time: 100 * time.Millisecond}, Scripts: scriptFunc(func(ctx context.Context, _ string, _ map[string]any, limit time.Duration) (any, error) {
			if limit > 100*time.Millisecond {
				return nil, fmt.Errorf("limit %s passes the budget", limit)
			}
			<-ctx.Done()
			return nil, ctx.Err()
		})}
		def := parse(t, nodes("s", `{"id": "s", "type": "script", "code": "while (true) {}", "next": "e"}`, `{"id": "e", "type": "end"}`))
		res := e.Invoke(context.Background(), def, Invocation{Modules: Modules{FlowScript: true}})
		if r := res.Run; r.Status != StatusFailed || r.Error.Code != CodeBudgetExceeded {
			t.Fatalf("status %s error %+v", r.Status, r.Error)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		def := parse(t, nodes("e", `{"id": "e", "type": "end"}`))
		if r := (&Engine{}).Invoke(ctx, def, Invocation{}).Run; r.Status != StatusFailed || r.Error.Code != CodeNodeFailed {
			t.Fatalf("status %s error %+v", r.Status, r.Error)
		}
	})
}

func TestScript(t *testing.T) {
	t.Parallel()
	def := parse(t, nodes("s", `{"id": "s", "type": "script", "code": "return vars.input.n * 2", "save_as": "d", "next": "e"}`,
		`{"id": "e", "type": "end", "output": {"d": "{{vars.d}}"}}`))
	var sawVars map[string]any
	e := &Engine{Scripts: scriptFunc(func(_ context.Context, code string, vars map[string]any, _ time.Duration) (any, error) {
		sawVars = vars
		return map[string]any{"x": 6}, nil
	})}
	res := e.Invoke(context.Background(), def, Invocation{Input: map[string]any{"n": float64(3)}, Modules: Modules{FlowScript: true}})
	if r := res.Run; r.Status != StatusCompleted || !reflect.DeepEqual(r.Output, map[string]any{"d": map[string]any{"x": float64(6)}}) {
		t.Fatalf("status %s output %#v error %+v", r.Status, r.Output, r.Error)
	}
	if !reflect.DeepEqual(sawVars["input"], map[string]any{"n": float64(3)}) {
		t.Fatalf("vars %v", sawVars)
	}
	res = e.Invoke(context.Background(), def, Invocation{Input: map[string]any{"n": float64(3)}})
	r := res.Run
	if r.Status != StatusFailed || r.Error.Code != CodeModuleInactive {
		t.Fatalf("without the module: %s %+v", r.Status, r.Error)
	}
	if last := res.NodeRuns[len(res.NodeRuns)-1]; last.Error != NodeErrScriptModuleInactive {
		t.Fatalf("node error %q", last.Error)
	}
	e.Scripts = scriptFunc(func(context.Context, string, map[string]any, time.Duration) (any, error) {
		return nil, errors.New("ReferenceError: x is not defined")
	})
	r = e.Invoke(context.Background(), def, Invocation{Modules: Modules{FlowScript: true}}).Run
	if r.Status != StatusFailed || r.Error.Code != CodeNodeFailed || !strings.Contains(r.Error.Message, "ReferenceError") {
		t.Fatalf("script error: %s %+v", r.Status, r.Error)
	}
}

// chain returns flows f1..fn where fi calls f(i+1) and the last ends with
// its depth.
func chain(t *testing.T, n int) flowMap {
	m := flowMap{}
	for i := 1; i <= n; i++ {
		var doc string
		if i < n {
			doc = nodes("c", fmt.Sprintf(`{"id": "c", "type": "call_flow", "flow_id": "f%d", "input": {"d": "{{vars.input.d + 1}}"}, "save_as": "sub", "next": "e"}`, i+1),
				`{"id": "e", "type": "end", "output": {"deepest": "{{vars.sub.deepest}}"}}`)
		} else {
			doc = nodes("m", `{"id": "m", "type": "send_message", "message": {"text": "at depth {{vars.input.d}}"}, "next": "e"}`,
				`{"id": "e", "type": "end", "output": {"deepest": "{{vars.input.d}}"}}`)
		}
		m[fmt.Sprintf("f%d", i)] = parse(t, doc)
	}
	return m
}

func TestCallFlow(t *testing.T) {
	t.Parallel()
	top := parse(t, nodes("c", `{"id": "c", "type": "call_flow", "flow_id": "f1", "input": {"d": 1}, "save_as": "sub", "next": "e"}`,
		`{"id": "e", "type": "end", "output": {"deepest": "{{vars.sub.deepest}}"}}`))
	t.Run("depth 3", func(t *testing.T) {
		t.Parallel()
		res := invoke(t, &Engine{Flows: chain(t, 3)}, top, nil)
		r := res.Run
		if r.Status != StatusCompleted || r.Output["deepest"] != float64(3) {
			t.Fatalf("status %s output %v error %+v", r.Status, r.Output, r.Error)
		}
		if len(res.Messages) != 1 || res.Messages[0].Text != "at depth 3" {
			t.Fatalf("messages %+v", res.Messages)
		}
		var ids []string
		for _, nr := range res.NodeRuns {
			ids = append(ids, nr.NodeID)
		}
		if !strings.Contains(strings.Join(ids, " "), "c/c/c/m") || r.CurrentNodeID != "e" {
			t.Fatalf("trace ids %v current %s", ids, r.CurrentNodeID)
		}
	})
	t.Run("depth 4", func(t *testing.T) {
		t.Parallel()
		r := invoke(t, &Engine{Flows: chain(t, 4)}, top, nil).Run
		if r.Status != StatusFailed || r.Error.Code != CodeNodeFailed || !strings.Contains(r.Error.Message, "deeper than 3") {
			t.Fatalf("status %s error %+v", r.Status, r.Error)
		}
	})
	failing := []struct {
		name   string
		target string
		wantIn string
	}{
		{"unknown flow", "", "not an active flow"},
		{"target with a question", nodes("q", `{"id": "q", "type": "question", "text": "?"}`), "waits"},
		{"target with a disallowed node", nodes("h", `{"id": "h", "type": "handover"}`), "not invokable"},
		{"target fails", nodes("h", `{"id": "h", "type": "http", "url": "https://e.x"}`), `"c/h"`},
	}
	for _, tt := range failing {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := flowMap{}
			if tt.target != "" {
				m["f1"] = parse(t, tt.target)
			}
			r := invoke(t, &Engine{Flows: m}, top, nil).Run
			if r.Status != StatusFailed || r.Error.Code != CodeNodeFailed || !strings.Contains(r.Error.Message, tt.wantIn) {
				t.Fatalf("status %s error %+v, want %q", r.Status, r.Error, tt.wantIn)
			}
		})
	}
}

// TestRepublished: a flow republished with a disallowed node is refused by
// the check the service makes on every invoke, and a call_flow to it fails.
func TestRepublished(t *testing.T) {
	t.Parallel()
	v1 := parse(t, nodes("e", `{"id": "e", "type": "end"}`))
	v2 := parse(t, nodes("h", `{"id": "h", "type": "handover", "next": "e"}`, `{"id": "e", "type": "end"}`))
	if v1.NotInvokable() != nil {
		t.Fatal("v1 refused")
	}
	ni := v2.NotInvokable()
	if ni == nil || ni.NodeID != "h" {
		t.Fatalf("v2: %v", ni)
	}
	m := flowMap{"f1": v1}
	top := parse(t, nodes("c", `{"id": "c", "type": "call_flow", "flow_id": "f1"}`))
	e := &Engine{Flows: m}
	if r := invoke(t, e, top, nil).Run; r.Status != StatusCompleted {
		t.Fatalf("v1: %s %+v", r.Status, r.Error)
	}
	m["f1"] = v2
	if r := invoke(t, e, top, nil).Run; r.Status != StatusFailed || !strings.Contains(r.Error.Message, `"h"`) {
		t.Fatalf("v2: %s %+v", r.Status, r.Error)
	}
}

func TestObserverOrder(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	def := parse(t, nodes("a", `{"id": "a", "type": "send_message", "message": {"text": "one"}, "next": "l"}`,
		`{"id": "l", "type": "loop", "over": "[1]", "as": "i", "body": "b", "next": "e"}`,
		`{"id": "b", "type": "send_message", "message": {"text": "two"}}`, `{"id": "e", "type": "end"}`))
	res := (&Engine{}).Invoke(context.Background(), def, Invocation{RunID: "r1", Observer: rec})
	want := []string{"run r1", "start start", "end start", "start a", "message one", "end a", "start l", "start b", "message two", "end b", "end l", "start e", "end e"}
	if !reflect.DeepEqual(rec.events, want) {
		t.Fatalf("events %v", rec.events)
	}
	var ids []string
	for _, nr := range res.NodeRuns {
		ids = append(ids, nr.NodeID)
	}
	if strings.Join(ids, " ") != "start a l b e" {
		t.Fatalf("node runs in start order: %v", ids)
	}
}

func TestContinueRefusesAStrangeRun(t *testing.T) {
	t.Parallel()
	def := parse(t, nodes("e", `{"id": "e", "type": "end"}`))
	r := &Run{Status: StatusWaiting, CurrentNodeID: "e"}
	if _, err := (&Engine{}).Continue(context.Background(), def, r, Continuation{Text: "x"}); err == nil || r.Status != StatusWaiting {
		t.Fatalf("continue at a non-question: %v, %s", err, r.Status)
	}
}

func TestInputNumbersAreJSON(t *testing.T) {
	t.Parallel()
	def := parse(t, nodes("e", `{"id": "e", "type": "end", "output": {"n": "{{vars.input.n + 1}}", "same": "{{vars.input.n == 2}}"}}`))
	r := invoke(t, &Engine{}, def, map[string]any{"n": 2}).Run
	if r.Status != StatusCompleted || !reflect.DeepEqual(r.Output, map[string]any{"n": float64(3), "same": true}) || r.Vars["input"].(map[string]any)["n"] != float64(2) {
		t.Fatalf("status %s output %#v vars %#v", r.Status, r.Output, r.Vars)
	}
}
