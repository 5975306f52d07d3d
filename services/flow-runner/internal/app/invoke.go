package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// The invoke contract: what every call of POST /v1/flows/:id/invoke is
// held to across all instances, an invoke or a continue, a JSON answer or
// a stream (docs/flows.md). Invoke applies it around the run; the ports
// below keep its state where every instance sees it.
//
// The order of the checks decides what a refused call costs, and follows
// docs/flows.md "Idempotency": a replay and an idempotency_in_progress answer need a
// concurrency slot, so the slot comes first; neither runs the flow, so
// neither counts towards the daily cap, which comes after the key. The
// daily cap counts runs that start (invokes and continues, streams
// included): a call refused before its run starts (by a limit, a flow or
// session error, or an outage) gives its unit back and frees its key.

// answerStatus is the status of every answer a run gives, failed or not.
const answerStatus = http.StatusOK

// cleanupTimeout bounds giving back what a call took, which runs even
// when the call's ctx has ended (the client may be why).
const cleanupTimeout = 2 * time.Second

// Contract is the invoke contract's state and limits.
type Contract struct {
	// Slots hold Concurrency places per workspace (FLOW_CONCURRENCY).
	Slots       SlotPool
	Concurrency int
	// Daily counts runs per workspace a day, at most DailyLimit
	// (INVOKE_DAILY_CAP).
	Daily      DailyCounter
	DailyLimit int
	// Keys are the calls' Idempotency-Keys.
	Keys IdempotencyKeys
	// MaxAnswerBytes is the largest JSON answer a call's reply carries; a
	// larger one fails its run in-run, so that no run is stored as it went
	// while its caller is told something else (App.outcome). Zero: no
	// bound.
	MaxAnswerBytes int
}

// ErrSlotsFull is SlotPool.Take's answer when every place is held.
var ErrSlotsFull = errors.New("every concurrent-run place is taken")

// SlotPool holds each workspace's places for concurrent runs.
type SlotPool interface {
	// Take takes one of the workspace's limit places, or ErrSlotsFull.
	Take(ctx context.Context, workspaceID string, limit int) (Slot, error)
}

// Slot is a place taken. Its hold is a lease that runs out unless renewed,
// so that the place of an instance that died comes back.
type Slot interface {
	// KeepRenewed renews the lease until stop is called (stop waits for
	// the renewer to end); a renewal that fails is given to onErr.
	KeepRenewed(ctx context.Context, onErr func(error)) (stop func())
	// Release gives the place back.
	Release(ctx context.Context) error
}

// DailyCounter counts each workspace's runs of the day.
type DailyCounter interface {
	// Reserve counts one run, unless limit are counted already (ok is
	// false); giveBack uncounts it.
	Reserve(ctx context.Context, workspaceID string, limit int) (giveBack func(context.Context) error, ok bool, err error)
}

// IdempotencyKeys keep the calls' Idempotency-Keys: which call claimed a
// key, and the answer of one that finished.
type IdempotencyKeys interface {
	// Claim claims key for the workspace's call of fingerprint. A repeat
	// of a finished call gets that call's stored answer (replay) and no
	// claim. Any other outcome is the error to answer as it is: the key in
	// progress (409), used for another request (422), its answer not kept
	// (409 naming the run), or the store unreachable (503). A claim older
	// than the keys' stuck limit belongs to a call that broke, and is
	// taken over.
	Claim(ctx context.Context, workspaceID, key, fingerprint string) (claim KeyClaim, replay *StoredAnswer, err error)
	// MaxAnswerBytes is the largest answer a key keeps: a larger one's
	// repeats are refused, naming its run.
	MaxAnswerBytes() int
}

// KeyClaim is a call's hold on its key while it runs.
type KeyClaim interface {
	// KeyHash stands for the key in the receipt stored with the run.
	KeyHash() string
	// Refused frees the key of a call refused before its run started, or
	// of one whose receipt was superseded by another call's: a repeat
	// then finds that receipt.
	Refused(ctx context.Context)
	// Answered keeps the answer for the key's repeats. The receipt stored
	// with the run answers them if this is lost.
	Answered(ctx context.Context, answer StoredAnswer)
}

// StoredAnswer is a call's answer as its key keeps it.
type StoredAnswer struct {
	Status int
	// Body is the JSON answer.
	Body []byte
	// RunID is the run the call ran.
	RunID string
}

// Plan is what the workspace's plan gives a call, as the gateway said.
type Plan struct {
	// Flows is the flows module, which an invoke needs.
	Flows bool
	// Modules are the modules a run consults.
	Modules run.Modules
}

// ErrFlowsModuleInactive refuses an invoke of a workspace whose plan has
// no flows module.
var ErrFlowsModuleInactive = errors.New("the workspace's plan does not include the flows module")

// CanInvoke is ErrFlowsModuleInactive unless the plan has the flows
// module.
func (p Plan) CanInvoke() error {
	if !p.Flows {
		return ErrFlowsModuleInactive
	}
	return nil
}

// InvokeCall is one call of the invoke route, as its handler read it.
type InvokeCall struct {
	WorkspaceID string
	FlowID      string
	Plan        Plan
	// Input is the call's input (ParseInput); it becomes vars.input of a
	// run the call starts.
	Input map[string]any
	// Session, when set, continues its waiting run instead of starting
	// one.
	Session *SessionInput
	// Stream is a call answered with Server-Sent Events: its run is
	// stored, then its end is handed to the reader (Sink.End), and what
	// that decided is stored (endStream).
	Stream bool
	// Key is the call's Idempotency-Key ("" without one), and Fingerprint
	// stands for its method, path and raw body.
	Key         string
	Fingerprint string
	// Sink hears the run and renders its answer.
	Sink InvokeSink
}

// SessionInput is a continue's: the session whose run goes on, and
// input.text, the only part of the input a continue reads.
type SessionInput struct {
	ID   string
	Text string
}

// InvokeSink is where a call's run goes as it happens: a stream writes
// each event, a JSON call keeps none. Render is the call's JSON answer for
// an outcome: what a JSON call is answered (Outcome.Answer), and what its
// repeats get (a stream's included), so a keyed call keeps it.
type InvokeSink interface {
	run.Observer
	Render(o *Outcome) ([]byte, error)
	// End hands a stream's reader the end of the stored outcome and
	// returns once it has it; an error says it never will (the stream was
	// cut), and the run is then stored failed. Only a stream's is called
	// (InvokeCall.Stream): a JSON call's answer goes once Invoke returns.
	End(o *Outcome) error
}

// InvokeAnswer is what a call gets: a replay of the key's first answer
// (nothing ran), or the outcome of the run it ran.
type InvokeAnswer struct {
	Replay  *StoredAnswer
	Outcome *Outcome
}

// ConcurrencyLimitedError refuses a call while the workspace has Limit
// runs going.
type ConcurrencyLimitedError struct{ Limit int }

func (e *ConcurrencyLimitedError) Error() string {
	return fmt.Sprintf("the workspace has %d runs going, its limit", e.Limit)
}

// DailyCapError refuses a call once the workspace ran Limit runs today.
type DailyCapError struct{ Limit int }

func (e *DailyCapError) Error() string {
	return fmt.Sprintf("the workspace reached its %d runs for today", e.Limit)
}

// ContractUnavailableError refuses a call because a store the contract
// needs (What) did not answer; nothing ran and nothing was kept.
type ContractUnavailableError struct {
	What string
	Err  error
}

func (e *ContractUnavailableError) Error() string { return e.What + " unavailable: " + e.Err.Error() }
func (e *ContractUnavailableError) Unwrap() error { return e.Err }

// RunNotStoredError is a call whose run went but could not be stored:
// nothing answers its key, and its daily unit stays spent, since it ran.
type RunNotStoredError struct{ Err error }

func (e *RunNotStoredError) Error() string { return "run not stored: " + e.Err.Error() }
func (e *RunNotStoredError) Unwrap() error { return e.Err }

// Invoke runs a call of the invoke route under the contract: it starts a
// run of the flow's published version, or continues call.Session's waiting
// run, and stores it; call.Sink hears the run as it goes.
//
// Refusals, before the run starts and taking nothing: ErrFlowsModuleInactive;
// *ConcurrencyLimitedError; *DailyCapError; *ContractUnavailableError; the
// key store's refusals (IdempotencyKeys.Claim); and the flow and session
// errors of an invoke or a continue (catalog.ErrFlowNotFound,
// *flow.NotInvokableError, catalog.ErrSessionNotFound, ErrSessionExpired,
// catalog.ErrSessionBusy, ErrGuardNotWired). A run that went but was not
// stored is a *RunNotStoredError.
func (a *App) Invoke(ctx context.Context, call InvokeCall) (*InvokeAnswer, error) {
	if err := call.Plan.CanInvoke(); err != nil {
		return nil, err
	}
	ws := call.WorkspaceID
	slot, err := a.contract.Slots.Take(ctx, ws, a.contract.Concurrency)
	switch {
	case errors.Is(err, ErrSlotsFull):
		return nil, &ConcurrencyLimitedError{Limit: a.contract.Concurrency}
	case err != nil:
		return nil, a.unavailable("concurrency slots", err)
	}
	stopRenewing := slot.KeepRenewed(ctx, func(err error) { a.obs.SlotNotRenewed(ws, err) })
	freeSlot := sync.OnceFunc(func() { stopRenewing(); a.giveSlot(ctx, slot) })
	defer freeSlot()

	var claim KeyClaim
	if call.Key != "" {
		var replay *StoredAnswer
		if claim, replay, err = a.contract.Keys.Claim(ctx, ws, call.Key, call.Fingerprint); err != nil {
			return nil, err
		}
		if replay != nil {
			return &InvokeAnswer{Replay: replay}, nil
		}
	}
	giveBack, ok, err := a.contract.Daily.Reserve(ctx, ws, a.contract.DailyLimit)
	if err != nil || !ok {
		a.refuse(ctx, ws, claim, nil)
		if err != nil {
			return nil, a.unavailable("daily invoke cap", err)
		}
		return nil, &DailyCapError{Limit: a.contract.DailyLimit}
	}

	sink := &startedSink{InvokeSink: call.Sink}
	var rr *receiptRequest
	if claim != nil {
		rr = &receiptRequest{keyHash: claim.KeyHash(), fingerprint: call.Fingerprint,
			maxBody: a.contract.Keys.MaxAnswerBytes(), afterEnd: call.Stream}
	}
	var out *Outcome
	if call.Session != nil {
		out, err = a.continueSession(ctx, call, sink, rr)
	} else {
		out, err = a.invokeFlow(ctx, call, sink, rr)
	}
	if err != nil {
		if sink.started {
			// The run went, but was not stored: nothing answers the key,
			// and the unit stays spent.
			a.refuse(ctx, ws, claim, nil)
			return nil, &RunNotStoredError{Err: err}
		}
		a.refuse(ctx, ws, claim, giveBack)
		if errors.Is(err, ErrGuardNotWired) {
			a.obs.FlowRefused(ws, err)
		}
		return nil, err
	}
	if call.Stream {
		// The run is over: its place goes back before the client hears
		// its end, as a JSON call's goes back before its answer is
		// written, so that a client starting its next run on the end
		// event finds the place free.
		freeSlot()
		out = a.endStream(ctx, call, out, rr)
	}
	switch {
	case claim == nil:
	case rr.superseded():
		// Redis lost the key while this call ran, and a call of it that
		// ran beside this one stored its receipt first
		// (docs/flows.md "Idempotency"): that receipt answers the key, so
		// the key is let go for a repeat to find it there, not answered
		// with this run.
		claim.Refused(ctx)
	default:
		claim.Answered(ctx, StoredAnswer{Status: answerStatus, Body: out.Answer, RunID: out.Run.ID})
	}
	return &InvokeAnswer{Outcome: out}, nil
}

// endStream hands a stream's reader the end of its stored outcome and
// stores what that decided (docs/flows.md "Streaming"): when the end never
// reached the reader (the stream was cut), a run the reader was not told
// ended becomes failed, node_failed "run canceled", as a run the cut
// stopped earlier is (one that failed keeps its own error); and the call's
// receipt, held back until now. It returns the outcome as stored, its
// Answer the call's answer; when storing fails, that is the outcome given,
// which stays stored.
func (a *App) endStream(ctx context.Context, call InvokeCall, out *Outcome, rr *receiptRequest) *Outcome {
	final, was := out, out.Run.Status
	var cut *run.Run
	if err := call.Sink.End(out); err != nil && was != run.StatusFailed {
		failed := *out.Run
		now := a.now()
		failed.Status, failed.Output, failed.CompletedAt = run.StatusFailed, map[string]any{}, &now
		failed.Error = &run.Error{Code: run.CodeNodeFailed,
			Message: fmt.Sprintf("node %q: run canceled: the stream was cut before its end event reached the client", failed.CurrentNodeID)}
		if call.Session == nil {
			// A session the reader never learnt is no session.
			failed.SessionID = ""
		}
		cut, final = &failed, &Outcome{Run: &failed, Messages: out.Messages, Usage: out.Usage}
		answer, err := call.Sink.Render(final)
		if err != nil {
			a.obs.StreamNotFinished(call.WorkspaceID, out.Run.ID, fmt.Errorf("render answer: %w", err))
			return out
		}
		final.Answer = answer
	}
	var receipt *catalog.Receipt
	if rr != nil {
		rr.afterEnd = false
		receipt = rr.receipt(call.WorkspaceID, final)
	}
	if cut == nil && receipt == nil {
		return final
	}
	if err := a.runs.FinishStream(context.WithoutCancel(ctx), cut, was, receipt); err != nil {
		a.obs.StreamNotFinished(call.WorkspaceID, out.Run.ID, err)
		return out
	}
	return final
}

// refuse gives back what a call took for a run that did not start: its
// daily unit (when giveBack is set) and its key.
func (a *App) refuse(ctx context.Context, workspaceID string, claim KeyClaim, giveBack func(context.Context) error) {
	if giveBack != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if err := giveBack(rctx); err != nil {
			a.obs.DailyUnitNotGivenBack(workspaceID, err)
		}
	}
	if claim != nil {
		claim.Refused(ctx)
	}
}

// giveSlot gives the place back, even when the call's ctx is done; one not
// given back runs out with its lease.
func (a *App) giveSlot(ctx context.Context, slot Slot) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := slot.Release(rctx); err != nil {
		a.obs.SlotNotReleased(err)
	}
}

// unavailable refuses a call whose contract store (what) did not answer.
func (a *App) unavailable(what string, err error) error {
	a.obs.ContractUnavailable(what, err)
	return &ContractUnavailableError{What: what, Err: err}
}

// startedSink remembers whether the call's run started: a failure after
// that is not a refusal, since the run went.
type startedSink struct {
	InvokeSink
	started bool
}

func (s *startedSink) RunStarted(runID string) {
	s.started = true
	s.InvokeSink.RunStarted(runID)
}
