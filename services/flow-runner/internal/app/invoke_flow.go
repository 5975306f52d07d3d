package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// Limits of an invoke's input (docs/limits-and-errors.md "Headless flows").
const (
	// MaxInputBytes bounds input's JSON encoding, compacted, so that
	// indentation does not count.
	MaxInputBytes = 16 << 10
	// MaxInputDepth bounds input's nesting: input itself is level 1, each
	// object or array inside it one level more.
	MaxInputDepth = 5
)

// InputError is an invoke's input refused; Field names what is wrong.
type InputError struct {
	Field  string
	Reason string
}

func (e *InputError) Error() string { return e.Field + ": " + e.Reason }

// ParseInput reads an invoke's input: a JSON object of at most
// MaxInputBytes and MaxInputDepth levels, whose numbers are float64s, the
// numbers of the run's expressions. A number no float64 holds (1e400) is
// refused here, naming it, before anything runs or is counted: taken as
// it came, it would fail the run it started (docs/flows.md "Invoking a
// flow").
func ParseInput(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, &InputError{Field: "input", Reason: "is required"}
	}
	if raw[0] != '{' {
		return nil, &InputError{Field: "input", Reason: "must be an object"}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, &InputError{Field: "input", Reason: "is not valid JSON"}
	}
	if compact.Len() > MaxInputBytes {
		return nil, &InputError{Field: "input", Reason: fmt.Sprintf("is %d bytes encoded, over the limit of %d", compact.Len(), MaxInputBytes)}
	}
	dec := json.NewDecoder(&compact)
	dec.UseNumber()
	var in map[string]any
	if err := dec.Decode(&in); err != nil {
		return nil, &InputError{Field: "input", Reason: "must be an object"}
	}
	if d := depth(in); d > MaxInputDepth {
		return nil, &InputError{Field: "input", Reason: fmt.Sprintf("is nested %d levels deep, over the limit of %d", d, MaxInputDepth)}
	}
	if err := floatNumbers("input", in); err != nil {
		return nil, err
	}
	return in, nil
}

// floatNumbers replaces each json.Number inside v, the value at field,
// with its float64, in place; the first number out of a float64's range,
// in the order of the keys, is an *InputError naming its field
// ("input.items[2].price").
func floatNumbers(field string, v any) error {
	switch t := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			f, err := floatNumber(field+"."+k, t[k])
			if err != nil {
				return err
			}
			t[k] = f
		}
	case []any:
		for i, e := range t {
			f, err := floatNumber(fmt.Sprintf("%s[%d]", field, i), e)
			if err != nil {
				return err
			}
			t[i] = f
		}
	}
	return nil
}

// floatNumber is v with its numbers float64s (see floatNumbers).
func floatNumber(field string, v any) (any, error) {
	n, ok := v.(json.Number)
	if !ok {
		return v, floatNumbers(field, v)
	}
	f, err := n.Float64() // JSON has no NaN or infinity: only its range fails
	if err != nil {
		return nil, &InputError{Field: field, Reason: fmt.Sprintf("must be a number from %g to %g", -math.MaxFloat64, math.MaxFloat64)}
	}
	return f, nil
}

// depth is how many levels of objects and arrays v nests, v included.
func depth(v any) int {
	deepest := 0
	switch t := v.(type) {
	case map[string]any:
		for _, e := range t {
			deepest = max(deepest, depth(e))
		}
	case []any:
		for _, e := range t {
			deepest = max(deepest, depth(e))
		}
	default:
		return 0
	}
	return deepest + 1
}

// receiptRequest asks for a keyed call's answer to be stored with its run,
// so that a repeat of the call is answered from it and never runs again.
type receiptRequest struct {
	// keyHash stands for the idempotency key; fingerprint for the request.
	keyHash     string
	fingerprint string
	// maxBody bounds the answer a receipt keeps; a larger one's repeats
	// are told its run instead.
	maxBody int
	// afterEnd holds a stream's receipt back from its run's store until
	// its end reached the reader or the stream was cut (endStream): until
	// then the call is not over, and a repeat is told it is in progress.
	afterEnd bool
	// last is the receipt last given to the store, which marks it
	// Superseded when another call's answers the key.
	last *catalog.Receipt
}

// receipt is the receipt of a call that ran, its answer rendered; nil
// without a request, or while it is held back.
func (rr *receiptRequest) receipt(workspaceID string, out *Outcome) *catalog.Receipt {
	if rr == nil {
		return nil
	}
	if rr.afterEnd {
		return nil
	}
	body := out.Answer
	if len(body) > rr.maxBody {
		body = nil
	}
	rr.last = &catalog.Receipt{
		WorkspaceID: workspaceID, KeyHash: rr.keyHash, Fingerprint: rr.fingerprint,
		Status: answerStatus, Body: body, RunID: out.Run.ID,
	}
	return rr.last
}

// superseded says whether the store kept another call's receipt for the
// key in place of this call's.
func (rr *receiptRequest) superseded() bool {
	return rr != nil && rr.last != nil && rr.last.Superseded
}

// Outcome is what one invoke or continue produced: the run after the call
// and the messages of this call, and the call's answer.
type Outcome struct {
	Run      *run.Run
	Messages []run.Message
	// Usage is this call's: the response's usage (Run.Usage is the run's).
	Usage run.Usage
	// Answer is the JSON answer of the outcome (InvokeSink.Render),
	// rendered before the run is stored: what a JSON call is sent.
	Answer []byte
}

// outcome is the outcome of a call's run, res, with its answer rendered
// by sink before the run is stored, so that the answer sent and the run
// stored are one. An answer larger than a reply carries could never be
// sent: the run then fails in-run (run.Result.AnswerTooLarge), and that is
// what is stored and answered. An answer that cannot be rendered leaves
// the run unstored.
func (a *App) outcome(sink InvokeSink, res *run.Result) (*Outcome, error) {
	out := &Outcome{Run: res.Run, Messages: res.Messages, Usage: res.Usage}
	body, err := sink.Render(out)
	if err != nil {
		return nil, fmt.Errorf("render answer: %w", err)
	}
	if limit := a.contract.MaxAnswerBytes; limit > 0 && len(body) > limit {
		res.AnswerTooLarge(len(body), limit, a.now())
		out = &Outcome{Run: res.Run, Messages: res.Messages, Usage: res.Usage}
		if body, err = sink.Render(out); err != nil {
			return nil, fmt.Errorf("render answer: %w", err)
		}
	}
	out.Answer = body
	return out, nil
}

// invokeFlow starts a run of the flow's published version and stores it,
// with the receipt rr asks for. The flow must be the workspace's, active
// and have an api trigger, else catalog.ErrFlowNotFound; a version with a
// node a headless run may not use is a *flow.NotInvokableError (package
// domain/flow). Both are checked on every call against the version
// published now, so a republished flow is checked at once.
func (a *App) invokeFlow(ctx context.Context, call InvokeCall, sink InvokeSink, rr *receiptRequest) (*Outcome, error) {
	v, err := a.invokable(ctx, call.WorkspaceID, call.FlowID)
	if err != nil {
		return nil, err
	}
	if err := a.guardWired(ctx, v.Definition); err != nil {
		return nil, err
	}
	started := time.Now()
	res := a.engine.Invoke(ctx, v.Definition, run.Invocation{
		RunID: a.newID(), FlowID: v.FlowID, Version: v.Version, WorkspaceID: call.WorkspaceID,
		SessionID: a.newID(), Input: call.Input, Modules: call.Plan.Modules, Observer: sink,
	})
	out, err := a.outcome(sink, res)
	if err != nil {
		return nil, err
	}
	a.obs.RunCall(res.Run.Status, time.Since(started))
	if res.Run.Status != run.StatusWaiting {
		// A run that never waited has no session.
		res.Run.SessionID = ""
	}
	// The run happened: it is stored even when the caller has gone.
	if err := a.runs.Create(context.WithoutCancel(ctx), res.Run, res.NodeRuns, rr.receipt(call.WorkspaceID, out)); err != nil {
		return nil, fmt.Errorf("store run: %w", err)
	}
	return out, nil
}

// invokable returns the published version of a flow a developer may call.
func (a *App) invokable(ctx context.Context, workspaceID, flowID string) (*catalog.Version, error) {
	fl, err := a.flows.Get(ctx, workspaceID, flowID)
	if err != nil {
		return nil, err
	}
	if fl.Status != catalog.StatusActive || !hasTrigger(fl.Triggers, TriggerAPI) {
		return nil, catalog.ErrFlowNotFound
	}
	v, err := a.flows.Version(ctx, fl.ID, fl.PublishedVersion)
	if err != nil {
		if errors.Is(err, catalog.ErrFlowNotFound) {
			return nil, fmt.Errorf("published version %d of flow %s is missing", fl.PublishedVersion, fl.ID)
		}
		return nil, err
	}
	if ni := v.Definition.NotInvokable(); ni != nil {
		return nil, ni
	}
	return v, nil
}

func hasTrigger(triggers []string, t string) bool {
	for _, x := range triggers {
		if x == t {
			return true
		}
	}
	return false
}

// guardWired refuses a run of a flow with AI nodes while the safety guard
// is not configured or not reachable: ErrGuardNotWired, before the run
// starts, so nothing is spent and an idempotency key stays free.
func (a *App) guardWired(ctx context.Context, def *flow.Definition) error {
	node := def.AINode()
	if node == nil {
		return nil
	}
	if a.guard == nil {
		return fmt.Errorf("%w: node %q (%s) needs it, and none is configured", ErrGuardNotWired, node.ID(), node.Type())
	}
	if err := a.guard.Ready(ctx); err != nil {
		return fmt.Errorf("%w: node %q (%s) needs it: %w", ErrGuardNotWired, node.ID(), node.Type(), err)
	}
	return nil
}
