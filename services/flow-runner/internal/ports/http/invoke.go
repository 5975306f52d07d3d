package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/dailycap"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/pkg/ratelimit"
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

// DailyCapCounter names the daily count of a workspace's runs in Redis.
const DailyCapCounter = "invoke"

// Contract is what every call of the invoke route is held to, across all
// instances: its Idempotency-Key, the workspace's concurrent runs, and its
// runs a day.
//
// The order of the checks decides what a refused request costs, and
// follows the specification: a replay and an idempotency_in_progress
// answer need a concurrency slot, so the slot comes first; neither runs
// the flow, so neither counts towards the daily cap, which comes after the
// key. The daily cap counts runs that start (invokes and continues,
// streams included): a request refused before its run starts (by a limit,
// a flow or session error, or an outage) gives its unit back and frees its
// key.
type Contract struct {
	Keys *idempotency.Store
	// Slots hold FLOW_CONCURRENCY places per workspace; a lease lasts
	// SlotLease and a run renews it every third of that.
	Slots       *ratelimit.Slots
	Concurrency int
	SlotLease   time.Duration
	// DailyCap counts runs per workspace a day, at most DailyLimit
	// (INVOKE_DAILY_CAP).
	DailyCap   *dailycap.Counter
	DailyLimit int
	// PingInterval is SSE_PING_INTERVAL.
	PingInterval time.Duration
}

// invokeRequest is the invoke body. input is kept raw so that its size and
// depth are measured as sent.
type invokeRequest struct {
	Input     json.RawMessage `json:"input"`
	SessionID *string         `json:"session_id"`
	Stream    bool            `json:"stream"`
}

func (h *handlers) invoke(c echo.Context) error {
	ctx := c.Request().Context()
	ws, err := workspace(c)
	if err != nil {
		return err
	}
	if !rpc.HasModule(ctx, ModuleFlows) {
		return errs.New(http.StatusForbidden, errs.CodeModuleInactive, "the workspace's plan does not include the flows module")
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
	var in invokeRequest
	if err := httpx.DecodeJSON(bytes.NewReader(raw), &in); err != nil {
		return err
	}
	input, err := app.ParseInput(in.Input)
	if err != nil {
		return toHTTPError(err)
	}
	var text string
	if in.SessionID != nil {
		if text, err = continueText(input); err != nil {
			return err
		}
	}

	lease, err := h.takeSlot(ctx, ws)
	if err != nil {
		return err
	}
	defer h.giveSlot(ctx, lease)
	stopRenewing := lease.KeepRenewed(ctx, func(err error) {
		// The run goes on; at worst the workspace has one run more than
		// its limit for the rest of it.
		h.log.Warn("concurrency slot not renewed", zap.String("workspace_id", ws), zap.Error(err))
	})
	defer stopRenewing()

	var claim *idempotency.Claim
	fingerprint := idempotency.RequestFingerprint(c.Request(), raw)
	if key != "" {
		// A replay is the stored JSON body, also for a stream request.
		var answered bool
		claim, answered, err = h.contract.Keys.Serve(ctx, c.Response(), ws, key, fingerprint)
		if err != nil || answered {
			return err
		}
	}
	// refuse gives back what was taken for a run that did not start.
	refuse := func(reservation *dailycap.Reservation) {
		if reservation != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			if err := h.contract.DailyCap.Release(rctx, *reservation); err != nil {
				h.log.Warn("daily invoke unit not given back", zap.String("workspace_id", ws), zap.Error(err))
			}
		}
		claim.Refused(ctx)
	}

	reservation, ok, err := h.contract.DailyCap.Reserve(ctx, ws, h.contract.DailyLimit)
	if err != nil {
		refuse(nil)
		return h.unavailable("daily invoke cap", err)
	}
	if !ok {
		refuse(nil)
		return errs.Newf(http.StatusTooManyRequests, CodeDailyInvokeCap,
			"the workspace reached its %d runs for today; the count resets at midnight (DAILY_RESET_TZ)", h.contract.DailyLimit)
	}

	// The run stops when the stream's client goes (the rpc layer ends ctx)
	// or a write to it fails.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	obs := &invokeObserver{}
	if in.Stream || acceptsEventStream(c.Request().Header.Values("Accept")) {
		obs.stream = &runStream{res: c.Response(), ping: h.contract.PingInterval, stopRun: stopRun}
		defer obs.stream.close()
	}
	var receipt *app.ReceiptRequest
	if claim != nil {
		receipt = &app.ReceiptRequest{KeyHash: idempotency.KeyHash(key), Fingerprint: fingerprint, Render: renderReceipt}
	}
	modules := run.Modules{FlowScript: rpc.HasModule(ctx, ModuleFlowScript), FlowAI: rpc.HasModule(ctx, ModuleFlowAI)}
	var out *app.Outcome
	if in.SessionID != nil {
		out, err = h.app.ContinueSession(runCtx, app.Continuation{
			WorkspaceID: ws, FlowID: c.Param("id"), SessionID: *in.SessionID, Text: text, Modules: modules,
			Observer: obs, Receipt: receipt,
		})
	} else {
		out, err = h.app.InvokeFlow(runCtx, app.Invocation{
			WorkspaceID: ws, FlowID: c.Param("id"), Input: input, Modules: modules, Observer: obs, Receipt: receipt,
		})
	}
	if err != nil {
		if !obs.started {
			refuse(&reservation)
			if errors.Is(err, app.ErrGuardNotWired) {
				h.log.Warn("flow refused", zap.String("workspace_id", ws), zap.Error(err))
			}
			return toHTTPError(err)
		}
		// The run went, but was not stored: nothing answers the key, and
		// the unit stays spent.
		refuse(nil)
		if obs.stream != nil {
			h.log.Error("streamed run not stored", zap.String("workspace_id", ws), zap.Error(err))
			obs.stream.event("end", endEvent{Status: string(run.StatusFailed), Output: map[string]any{},
				Error: &run.Error{Code: errs.CodeInternal, Message: "the run could not be stored"}})
			return nil
		}
		return err
	}
	resp := toInvokeResponse(out)
	if claim != nil {
		// The receipt stored with the run answers the key if this is lost.
		if body, err := json.Marshal(resp); err != nil {
			h.log.Warn("idempotent answer not encoded", zap.String("workspace_id", ws), zap.Error(err))
		} else {
			claim.Answered(ctx, idempotency.Response{Status: http.StatusOK, Body: body, Ref: out.Run.ID})
		}
	}
	if obs.stream != nil {
		obs.stream.event("end", toEndEvent(resp))
		return nil
	}
	return c.JSON(http.StatusOK, resp)
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

// renderReceipt is the stored answer of a call: the JSON body it got, or
// none when that is over what a replay returns.
func renderReceipt(o *app.Outcome) (int, []byte, error) {
	body, err := json.Marshal(toInvokeResponse(o))
	if err != nil {
		return 0, nil, err
	}
	if len(body) > idempotency.MaxStoredBody {
		body = nil
	}
	return http.StatusOK, body, nil
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

// takeSlot takes one of the workspace's concurrent-run places.
func (h *handlers) takeSlot(ctx context.Context, ws string) (*ratelimit.Lease, error) {
	lease, err := h.contract.Slots.Acquire(ctx, ratelimit.Slot{Name: "flows:runs:" + ws, Limit: h.contract.Concurrency})
	var full *ratelimit.FullError
	switch {
	case errors.As(err, &full):
		return nil, errs.Newf(http.StatusTooManyRequests, CodeConcurrencyLimited,
			"the workspace has %d runs going, its limit; retry when one ends", h.contract.Concurrency).WithHeader("Retry-After", "1")
	case err != nil:
		return nil, h.unavailable("concurrency slots", err)
	}
	return lease, nil
}

// giveSlot gives the place back, even when the request's ctx is done; one
// not given back runs out with its lease.
func (h *handlers) giveSlot(ctx context.Context, lease *ratelimit.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := lease.Release(rctx); err != nil {
		h.log.Warn("concurrency slot not released", zap.Error(err))
	}
}

// unavailable is 503 for a store the contract needs being unreachable;
// nothing ran and nothing was kept.
func (h *handlers) unavailable(what string, err error) error {
	h.log.Warn("invoke refused: "+what+" unavailable", zap.Error(err))
	return errs.ServiceUnavailable("%s are unavailable; try again shortly", what)
}

// invokeObserver hears the run: whether it started (so that a failure
// after that keeps its daily unit), and, for a stream, every event.
type invokeObserver struct {
	started bool
	stream  *runStream // nil: not a stream
}

func (o *invokeObserver) RunStarted(runID string) {
	o.started = true
	o.stream.start(runID)
}

func (o *invokeObserver) NodeStarted(nodeID string, nodeType flow.NodeType) {
	o.stream.event("node_start", nodeStartEvent{NodeID: nodeID, Type: string(nodeType)})
}

func (o *invokeObserver) Message(m run.Message) { o.stream.event("message", m) }

func (o *invokeObserver) NodeEnded(nr run.NodeRun) {
	o.stream.event("node_end", nodeEndEvent{NodeID: nr.NodeID, Type: nr.NodeType, MS: nr.DurationMS, Tokens: nr.Tokens, Error: nr.Error})
}

// runStream is a run's SSE response: opened when the run starts, so that
// an error before that is a plain JSON response; ": ping" every ping
// while it is open. When the client is gone it stops the run. Its methods
// do nothing on a nil stream (a JSON call).
type runStream struct {
	res      http.ResponseWriter
	ping     time.Duration
	stopRun  context.CancelFunc
	sse      *httpx.SSE
	stopPing chan struct{}
	pinging  chan struct{}
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
	s.event("run_start", runStartEvent{RunID: runID})
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

// close stops the pings; the response ends when the handler returns.
func (s *runStream) close() {
	if s.stopPing != nil {
		close(s.stopPing)
		<-s.pinging
	}
}
