package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// continueSession answers the question a session's run waits at and
// stores the run as it then is, with the receipt rr asks for, in the
// transaction that holds the run for the continue. Refusals, none of which
// change the run: catalog.ErrFlowNotFound and *flow.NotInvokableError as
// for an invoke (the route is the invoke's, checked the same way);
// catalog.ErrSessionNotFound for an unknown session, one of another
// workspace or flow, or a finished run; ErrSessionExpired after
// FLOW_SESSION_TTL from started_at; catalog.ErrSessionBusy while another
// continue holds it; ErrGuardNotWired for a flow with AI nodes while the
// safety guard is not.
func (a *App) continueSession(ctx context.Context, call InvokeCall, sink InvokeSink, rr *receiptRequest) (*Outcome, error) {
	if _, err := a.invokable(ctx, call.WorkspaceID, call.FlowID); err != nil {
		return nil, err
	}
	var out *Outcome
	err := a.runs.Continue(ctx, call.Session.ID, func(r *run.Run) (catalog.Changes, error) {
		if r.WorkspaceID != call.WorkspaceID || r.FlowID != call.FlowID || r.Status != run.StatusWaiting {
			return catalog.Changes{}, catalog.ErrSessionNotFound
		}
		if a.now().Sub(r.StartedAt) > a.sessionTTL {
			return catalog.Changes{}, ErrSessionExpired
		}
		// The run goes on in its own version, whatever is published now.
		v, err := a.flows.Version(ctx, r.FlowID, r.Version)
		if err != nil {
			return catalog.Changes{}, fmt.Errorf("load version %d of flow %s: %w", r.Version, r.FlowID, err)
		}
		if err := a.guardWired(ctx, v.Definition); err != nil {
			return catalog.Changes{}, err
		}
		started := time.Now()
		res, err := a.engine.Continue(ctx, v.Definition, r, run.Continuation{Text: call.Session.Text, Modules: call.Plan.Modules, Observer: sink})
		if errors.Is(err, run.ErrNotWaiting) {
			return catalog.Changes{}, catalog.ErrSessionNotFound
		}
		if err != nil {
			return catalog.Changes{}, err
		}
		if out, err = a.outcome(sink, res); err != nil {
			return catalog.Changes{}, err
		}
		a.obs.RunCall(res.Run.Status, time.Since(started))
		return catalog.Changes{NodeRuns: res.NodeRuns, Receipt: rr.receipt(call.WorkspaceID, out)}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
