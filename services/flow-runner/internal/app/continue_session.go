package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// Continuation is a developer's answer to a waiting run's question.
type Continuation struct {
	WorkspaceID string
	FlowID      string
	SessionID   string
	// Text is input.text, the only part of the input a continue reads.
	Text    string
	Modules run.Modules
	// Observer and Receipt are as for an Invocation.
	Observer run.Observer
	Receipt  *ReceiptRequest
}

// ContinueSession answers the question a session's run waits at and
// stores the run as it then is, in the transaction that holds the run for
// the continue. Refusals, none of which change the run:
// catalog.ErrFlowNotFound and *flow.NotInvokableError as for an invoke (the
// route is the invoke's, checked the same way); catalog.ErrSessionNotFound
// for an unknown session, one of another workspace or flow, or a finished
// run; ErrSessionExpired after FLOW_SESSION_TTL from started_at;
// catalog.ErrSessionBusy while another continue holds it; ErrGuardNotWired
// for a flow with AI nodes while the safety guard is not.
func (a *App) ContinueSession(ctx context.Context, c Continuation) (*Outcome, error) {
	if _, err := a.invokable(ctx, c.WorkspaceID, c.FlowID); err != nil {
		return nil, err
	}
	var out *Outcome
	err := a.runs.Continue(ctx, c.SessionID, func(r *run.Run) (catalog.Changes, error) {
		if r.WorkspaceID != c.WorkspaceID || r.FlowID != c.FlowID || r.Status != run.StatusWaiting {
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
		res, err := a.engine.Continue(ctx, v.Definition, r, run.Continuation{Text: c.Text, Modules: c.Modules, Observer: observer(c.Observer)})
		if errors.Is(err, run.ErrNotWaiting) {
			return catalog.Changes{}, catalog.ErrSessionNotFound
		}
		if err != nil {
			return catalog.Changes{}, err
		}
		a.metrics.RunCall(res.Run.Status, time.Since(started))
		out = &Outcome{Run: res.Run, Messages: res.Messages, Usage: res.Usage}
		receipt, err := c.Receipt.receipt(c.WorkspaceID, out)
		if err != nil {
			return catalog.Changes{}, err
		}
		return catalog.Changes{NodeRuns: res.NodeRuns, Receipt: receipt}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
