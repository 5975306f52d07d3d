package http

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/services/flow-runner/internal/app"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// Error codes of the invoke contract's limits.
const (
	CodeConcurrencyLimited = "concurrency_limited"
	CodeDailyInvokeCap     = "daily_invoke_cap"
)

// invoke reads the call and answers it; the invoke contract (app.Invoke)
// decides what it gets.
func (h *handlers) invoke(c echo.Context) error {
	ctx := c.Request().Context()
	ws, err := rpc.AuthenticatedWorkspace(c.Request().Context())
	if err != nil {
		return err
	}
	// The plan comes first: a workspace without the flows module is told
	// so, whatever it sent.
	plan := app.Plan{Flows: rpc.HasModule(ctx, ModuleFlows), Modules: run.Modules{
		FlowScript: rpc.HasModule(ctx, ModuleFlowScript), FlowAI: rpc.HasModule(ctx, ModuleFlowAI),
	}}
	if err := plan.CanInvoke(); err != nil {
		return toHTTPError(err)
	}
	key, err := idempotency.KeyFromRequest(c.Request())
	if err != nil {
		return err
	}
	// The raw bytes, as sent: the key's fingerprint is over them.
	raw, err := httpx.ReadBody(c.Request().Body, httpx.MaxBodyBytes)
	if err != nil {
		return err
	}
	// input is kept raw, so that its size and depth are measured as sent,
	// and with any NUL character in it: a run stores its JSON as json,
	// which holds one (docs/limits-and-errors.md "Error codes").
	var in flowrunnerapi.InvokeRequest
	if err := httpx.UnmarshalJSON(raw, &in); err != nil {
		return err
	}
	input, err := app.ParseInput(in.Input)
	if err != nil {
		return toHTTPError(err)
	}
	call := app.InvokeCall{
		WorkspaceID: ws, FlowID: c.Param("id"), Plan: plan, Input: input,
		Key: key, Fingerprint: idempotency.RequestFingerprint(c.Request(), raw),
	}
	if in.SessionID != nil {
		text, err := continueText(input)
		if err != nil {
			return err
		}
		call.Session = &app.SessionInput{ID: *in.SessionID, Text: text}
	}

	// The run stops when the stream's client goes (the rpc layer ends ctx:
	// it hung up, or stopped reading and the gateway cut it) or a write to
	// it fails.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	sink := &invokeSink{}
	if in.Stream || acceptsEventStream(c.Request().Header.Values("Accept")) {
		sink.stream = &runStream{res: c.Response(), ping: h.ping, stopRun: stopRun}
		defer sink.stream.close()
		call.Stream = true
	}
	call.Sink = sink
	answer, err := h.app.Invoke(runCtx, call)
	var notStored *app.RunNotStoredError
	switch {
	case errors.As(err, &notStored) && sink.stream != nil:
		// The stream is open: its end says what a JSON call's 500 says.
		h.log.Error("streamed run not stored", zap.String("workspace_id", ws), zap.Error(notStored.Err))
		sink.stream.event(flowrunnerapi.EventEnd, flowrunnerapi.EndEvent{Status: string(run.StatusFailed), Output: map[string]any{},
			Error: &flowrunnerapi.RunError{Code: errs.CodeInternal, Message: "the run could not be stored"}})
		return nil
	case err != nil:
		return toHTTPError(err)
	case answer.Replay != nil:
		// A replay is the stored JSON body, also for a stream request.
		return idempotency.WriteReplay(c.Response(), &idempotency.Response{Status: answer.Replay.Status, Body: answer.Replay.Body})
	}
	if sink.stream != nil {
		// Its end went with the run (invokeSink.End).
		return nil
	}
	// The answer the run was stored with (Render), as it was rendered.
	return c.JSONBlob(http.StatusOK, answer.Outcome.Answer)
}

// continueText is input.text of a continue, the only part it reads.
func continueText(input map[string]any) (string, error) {
	text, ok := input["text"].(string)
	if !ok {
		reason := "must be a string"
		if _, given := input["text"]; !given {
			reason = "is required to continue a session"
		}
		return "", errs.Newf(http.StatusBadRequest, CodeInputInvalid, "input.text: %s", reason)
	}
	return text, nil
}

// acceptsEventStream says whether an Accept header asks for SSE.
func acceptsEventStream(accept []string) bool {
	for _, v := range accept {
		for _, part := range strings.Split(v, ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}

// invokeSink is a call's app.InvokeSink: for a stream, every event of
// the run is written as it comes; a JSON call writes nothing until the
// end.
type invokeSink struct {
	stream *runStream // nil: not a stream
}

func (s *invokeSink) RunStarted(runID string) { s.stream.start(runID) }

func (s *invokeSink) NodeStarted(nodeID string, nodeType flow.NodeType) {
	s.stream.event(flowrunnerapi.EventNodeStart, flowrunnerapi.NodeStartEvent{NodeID: nodeID, Type: string(nodeType)})
}

func (s *invokeSink) Message(m run.Message) {
	s.stream.event(flowrunnerapi.EventMessage, toAPIMessage(m))
}

func (s *invokeSink) NodeEnded(nr run.NodeRun) {
	s.stream.event(flowrunnerapi.EventNodeEnd, flowrunnerapi.NodeEndEvent{NodeID: nr.NodeID, Type: nr.NodeType, MS: nr.DurationMS, Tokens: nr.Tokens, Error: nr.Error})
}

// Render is the call's JSON answer, which its repeats get too.
func (s *invokeSink) Render(o *app.Outcome) ([]byte, error) {
	return json.Marshal(toAPIInvokeResponse(o))
}

// End sends a stream's end event and waits until the gateway has written
// it to the client.
func (s *invokeSink) End(o *app.Outcome) error {
	return s.stream.end(toAPIEndEvent(toAPIInvokeResponse(o)))
}

// runStream is a run's SSE response: opened when the run starts, so that
// an error before that is a plain JSON response; ": ping" every ping
// while it is open, until the end. When the client is gone it stops the
// run. Its methods do nothing on a nil stream (a JSON call).
type runStream struct {
	res      http.ResponseWriter
	ping     time.Duration
	stopRun  context.CancelFunc
	sse      *httpx.SSE
	stopPing chan struct{}
	pinging  chan struct{}
	stopOnce sync.Once
}

// start opens the stream with run_start.
func (s *runStream) start(runID string) {
	if s == nil {
		return
	}
	s.sse = httpx.StartSSE(s.res)
	s.stopPing, s.pinging = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.pinging)
		t := time.NewTicker(s.ping)
		defer t.Stop()
		for {
			select {
			case <-s.stopPing:
				return
			case <-t.C:
				if s.sse.Comment("ping") != nil {
					return
				}
			}
		}
	}()
	s.event(flowrunnerapi.EventRunStart, flowrunnerapi.RunStartEvent{RunID: runID})
}

// event sends one event; when the client is gone, the run stops.
func (s *runStream) event(name string, v any) {
	if s == nil {
		return
	}
	data, err := json.Marshal(v)
	if err != nil || s.sse.Event(name, data) != nil {
		s.stopRun()
	}
}

// end sends the end event, the last thing on the stream, and returns once
// the caller has it (rpc.AwaitDelivery): the gateway acknowledges it once
// it has written it to the client. An error says the client will never
// have it.
func (s *runStream) end(v any) error {
	if s == nil || s.sse == nil {
		return errors.New("no stream to end")
	}
	s.close()
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := s.sse.Event(flowrunnerapi.EventEnd, data); err != nil {
		return err
	}
	return rpc.AwaitDelivery(s.res)
}

// close stops the pings; the response ends when the handler returns.
func (s *runStream) close() {
	s.stopOnce.Do(func() {
		if s.stopPing != nil {
			close(s.stopPing)
			<-s.pinging
		}
	})
}
