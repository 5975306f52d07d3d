package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/wait"
	parley "github.com/parleyhq/parley/sdk/go"
)

// eventName is a typed run event's name on the wire, a node's with its id
// (as eventNames writes a raw stream's).
func eventName(ev parley.RunEvent) string {
	switch e := ev.(type) {
	case *parley.NodeStart:
		return e.Event() + " " + e.NodeID
	case *parley.NodeEnd:
		return e.Event() + " " + e.NodeID
	}
	return ev.Event()
}

// readStream reads a stream to its end and returns its events; an error
// fails t.
func readStream(t *testing.T, events func(func(parley.RunEvent, error) bool)) []parley.RunEvent {
	t.Helper()
	var out []parley.RunEvent
	for ev, err := range events {
		if err != nil {
			t.Fatalf("the stream failed after %d events: %v", len(out), err)
		}
		out = append(out, ev)
	}
	return out
}

// waitRunStatus waits until the client reads run runID of flowID as status.
func waitRunStatus(t *testing.T, c *parley.Client, flowID, runID string, status parley.RunStatus) *parley.RunTrace {
	t.Helper()
	var trace *parley.RunTrace
	wait.For(t, 20*time.Second, "run "+runID+" "+string(status), func() error {
		var err error
		trace, err = c.Run(sdkContext(t), flowID, runID)
		if err != nil {
			return err
		}
		if trace.Run.Status != status {
			return fmt.Errorf("run is %s", trace.Run.Status)
		}
		return nil
	})
	return trace
}

// TestClientFlows: the client lists, invokes, continues and reads the runs
// of flows through the gateway; it waits out a real 429 (the workspace's
// four places held by runs at an http node the test holds) and succeeds;
// it reads a streamed run to its end, event for event what the gateway
// streams; a stream cut under it is ErrStreamDropped and its run is
// stored failed, as is the run of a stream it stops reading.
func TestClientFlows(t *testing.T) {
	t.Parallel()
	// The held flow's http node calls the test on 127.0.0.1.
	s := startSuite(t, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true")
	ws, key := s.flowDeveloper(t)
	target := newHeldTarget(t)
	greeting := s.publishFlow(t, ws, greetingFlow)
	held := s.publishFlow(t, ws, heldGreetingFlow(target.url()))
	quick := s.publishFlow(t, ws, quickFlow)
	ctx := sdkContext(t)
	c, x := s.sdkClient(t, key)

	flows, err := c.Flows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, f := range flows {
		if f.Status != "active" || f.PublishedVersion != 1 {
			t.Fatalf("flow %+v", f)
		}
		names[f.ID] = f.Name
	}
	if want := map[string]string{greeting: "Greeting", held: "Held greeting", quick: "Quick"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("Flows = %v, want %v", names, want)
	}

	// Invoke waits at the question; Continue answers it; Run is the trace.
	inv, err := c.Invoke(ctx, greeting, map[string]any{"vip": false})
	if err != nil {
		t.Fatal(err)
	}
	if inv.Status != "waiting" || inv.SessionID == "" || inv.RunID == "" || len(inv.Messages) != 1 || inv.Messages[0].Text != "Your name?" {
		t.Fatalf("Invoke = %+v", inv)
	}
	cont, err := c.Continue(ctx, greeting, inv.SessionID, "Ada")
	if err != nil {
		t.Fatal(err)
	}
	if cont.Status != "completed" || cont.RunID != inv.RunID || cont.Output["name"] != "Ada" || len(cont.Messages) != 1 || cont.Messages[0].Text != "Hello, Ada" {
		t.Fatalf("Continue = %+v", cont)
	}
	trace, err := c.Run(ctx, greeting, inv.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for _, nr := range trace.NodeRuns {
		nodes = append(nodes, nr.NodeID)
	}
	if trace.Run.ID != inv.RunID || trace.Run.Status != "completed" || trace.Run.Output["name"] != "Ada" || fmt.Sprint(nodes) != "[start ask ask vip hello done]" && fmt.Sprint(nodes) != "[start ask vip hello done]" {
		t.Fatalf("Run = %+v, nodes %v", trace.Run, nodes)
	}
	_, err = c.Continue(ctx, greeting, inv.SessionID, "again")
	wantAPIError(t, "a continue of a finished session", err, parley.ErrSessionNotFound, http.StatusNotFound, x)
	_, err = c.Invoke(ctx, "0190a4e2-7c1d-7000-8000-000000000001", map[string]any{})
	wantAPIError(t, "an unknown flow", err, parley.ErrFlowNotFound, http.StatusNotFound, x)

	t.Run("429 concurrency_limited", func(t *testing.T) {
		// Four runs hold the workspace's four places at the held http node.
		heldDone := make(chan error, flowConcurrency)
		for range flowConcurrency {
			go func() {
				res, err := c.Invoke(ctx, held, map[string]any{"name": "Ada"})
				if err == nil && res.Status != "completed" {
					err = fmt.Errorf("held run %+v", res)
				}
				heldDone <- err
			}()
		}
		target.await(t, flowConcurrency, 30*time.Second)

		// Without retries: the 429, typed, with its Retry-After.
		once, ox := s.sdkClient(t, key, parley.WithRetry(parley.RetryPolicy{MaxAttempts: 1}))
		_, err := once.Invoke(ctx, quick, map[string]any{})
		apiErr := wantAPIError(t, "a fifth run", err, parley.ErrConcurrencyLimited, http.StatusTooManyRequests, ox)
		if apiErr.RetryAfter != time.Second {
			t.Fatalf("Retry-After = %s, want 1s", apiErr.RetryAfter)
		}

		// With them: the client gets a 429, waits, and succeeds once the
		// places are free.
		rc, rx := s.sdkClient(t, key)
		limited := rx.next(http.StatusTooManyRequests)
		start := time.Now()
		done := callRefused(t, "a fifth run", limited, func() (*parley.InvokeResult, error) {
			return rc.Invoke(ctx, quick, map[string]any{})
		})
		target.letGo()
		res, err := awaitOutcome(t, "the fifth run", done)
		if err != nil || res.Status != "completed" {
			t.Fatalf("the fifth run after the four: %+v %v", res, err)
		}
		tries := rx.to(http.MethodPost, invokePath(quick))
		if rx.count(http.StatusTooManyRequests) < 1 || tries[0].status != http.StatusTooManyRequests || tries[len(tries)-1].status != http.StatusOK {
			t.Fatalf("tries %+v; want 429s, then 200", tries)
		}
		if w := waited(tries[0], tries[1]); w < time.Second {
			t.Fatalf("the client tried again %s after a 429 with Retry-After: 1", w)
		}
		for range flowConcurrency {
			if err := <-heldDone; err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("429: %d tries, %d answered 429, waited %s after the first, done %s after the call", len(tries), rx.count(http.StatusTooManyRequests),
			waited(tries[0], tries[1]).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	})

	t.Run("a stream read to its end", func(t *testing.T) {
		body := `{"input": {"vip": true}}`
		raw := openEventStream(t, s.gatewayURL, key, invokePath(greeting), body).rest(t, 30*time.Second)
		events := readStream(t, c.InvokeStream(ctx, greeting, map[string]any{"vip": true}))
		var got []string
		for _, ev := range events {
			got = append(got, eventName(ev))
		}
		if want := eventNames(raw); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("typed events %v, want the gateway's %v", got, want)
		}
		start, _ := events[0].(*parley.RunStart)
		end, _ := events[len(events)-1].(*parley.RunEnd)
		if start == nil || start.RunID == "" || end == nil || end.Status != "waiting" || end.SessionID == "" {
			t.Fatalf("stream from %+v to %+v", events[0], events[len(events)-1])
		}
		var said []string
		for _, ev := range events {
			if m, ok := ev.(*parley.RunMessage); ok {
				said = append(said, m.Text)
			}
		}
		if fmt.Sprint(said) != "[Your name?]" {
			t.Fatalf("messages %q", said)
		}

		// The continue, streamed: the VIP greeting, the end.
		events = readStream(t, c.ContinueStream(ctx, greeting, end.SessionID, "Grace"))
		last, _ := events[len(events)-1].(*parley.RunEnd)
		said = nil
		for _, ev := range events {
			if m, ok := ev.(*parley.RunMessage); ok {
				said = append(said, m.Text)
			}
		}
		if first, _ := events[0].(*parley.RunStart); first == nil || first.RunID != start.RunID || last == nil || last.Status != "completed" ||
			last.Output["name"] != "Grace" || fmt.Sprint(said) != "[Welcome back, Grace!]" {
			t.Fatalf("the continue's stream: %+v … %+v, messages %q", events[0], events[len(events)-1], said)
		}
		if trace := waitRunStatus(t, c, greeting, start.RunID, "completed"); trace.Run.Output["name"] != "Grace" {
			t.Fatalf("the streamed run stored as %+v", trace.Run)
		}
	})

	t.Run("a stream cut mid-run", func(t *testing.T) {
		// The run sends its greeting and is held at the http node; the
		// proxy then cuts the stream.
		front := newGatewayFront(t, s.gatewayURL)
		fc, _ := sdkClientAt(front.URL, key)
		var runID string
		var events []string
		var streamErr error
		for ev, err := range fc.InvokeStream(ctx, held, map[string]any{"name": "Bo"}) {
			if err != nil {
				streamErr = err
				break
			}
			events = append(events, eventName(ev))
			switch e := ev.(type) {
			case *parley.RunStart:
				runID = e.RunID
			case *parley.RunMessage:
				if e.Text != "Hi Bo" {
					t.Fatalf("message %+v", e)
				}
				target.await(t, 1, 30*time.Second)
				if n := front.cutStreams(); n != 1 {
					t.Fatalf("the proxy cut %d streams, want 1", n)
				}
			case *parley.RunEnd:
				t.Fatalf("the cut stream ended: %+v", e)
			}
		}
		if !errors.Is(streamErr, parley.ErrStreamDropped) {
			t.Fatalf("after %v the stream's error is %v, want ErrStreamDropped", events, streamErr)
		}
		trace := waitRunStatus(t, c, held, runID, "failed")
		if trace.Run.Error == nil || trace.Run.Error.Code != "node_failed" {
			t.Fatalf("the cut stream's run: %+v", trace.Run)
		}
		t.Logf("cut after %v: %v; run %s stored failed (%s)", events, streamErr, runID, trace.Run.Error.Message)
	})

	t.Run("a stream abandoned", func(t *testing.T) {
		// The caller stops reading as the run enters the http node, where
		// it would be held as long as the test likes: the client hangs up,
		// and the run stops there and is stored failed.
		var runID string
		for ev, err := range c.InvokeStream(ctx, held, map[string]any{"name": "Cy"}) {
			if err != nil {
				t.Fatal(err)
			}
			if start, ok := ev.(*parley.RunStart); ok {
				runID = start.RunID
			}
			if node, ok := ev.(*parley.NodeStart); ok && node.NodeID == "call" {
				break
			}
		}
		trace := waitRunStatus(t, c, held, runID, "failed")
		if trace.Run.Error == nil || trace.Run.CurrentNodeID != "call" {
			t.Fatalf("the abandoned stream's run: %+v", trace.Run)
		}
		wait.Until(t, 10*time.Second, "no request held at the http node", func() bool { return target.holding.Load() == 0 })
		t.Logf("abandoned at node_start call: run %s stored failed (%s)", runID, trace.Run.Error.Message)
	})
}
