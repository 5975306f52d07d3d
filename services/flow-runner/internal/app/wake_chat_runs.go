package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// wakeBatch is how many due chat runs one round of WakeChatRuns takes.
const wakeBatch = 100

// Backoff of a wake that failed for now (wakeRetryIn): like a chat
// turn's, its next try comes a second later, then twice as long after
// each further failure, at most a minute apart.
const (
	wakeRetryMin = time.Second
	wakeRetryMax = time.Minute
)

// CodeWorkspaceNotFound is the error of a chat run whose wake can never
// succeed because its workspace was deleted (wakeEnd): the code the
// gateway answers for it.
const CodeWorkspaceNotFound = "workspace_not_found"

// WakeChatRuns goes on with the chat runs whose delay is over, every
// interval until ctx ends (docs/chat.md "The chat-only nodes", "Operating
// it"). Every instance runs it: a run another instance is waking is
// skipped (it holds the conversation). A wake that failed for now is
// tried again after a backoff, behind the wakes due meanwhile; one that
// can never succeed ends its run (WakeChatRun).
func (a *App) WakeChatRuns(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := a.wakeDue(ctx); err != nil {
			a.obs.ChatFailed("wake chat runs", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// wakeDue wakes one batch of due runs.
func (a *App) wakeDue(ctx context.Context) error {
	due, err := a.chats.DueWakes(ctx, a.now(), wakeBatch)
	if err != nil {
		return fmt.Errorf("due chat runs: %w", err)
	}
	for _, w := range due {
		if err := a.WakeChatRun(ctx, w); err != nil && !errors.Is(err, catalog.ErrConversationBusy) {
			a.obs.ChatFailed("wake chat run "+w.RunID, err)
		}
	}
	return nil
}

// WakeChatRun goes on with one chat run whose delay is over, holding its
// conversation as a turn does. A run no longer waiting there, not due, or
// whose failed wake is not due for its retry yet, is left alone.
//
// A wake that fails is stored so, and its failure answered: one that can
// never succeed (its workspace is gone) ends the run failed, as a chat
// run that fails does (the conversation handed over); one that may pass
// (a service unreachable) leaves the run waiting, and is tried again
// after a backoff that grows with each failure. Its sends are keyed after
// the run and its wake time, so that a retry sends nothing twice.
func (a *App) WakeChatRun(ctx context.Context, w catalog.Wakeup) error {
	var failed error
	err := a.chats.Hold(ctx, w.WorkspaceID, w.ConversationID, "", func(c *catalog.ChatConversation) (*catalog.ChatRun, error) {
		r := c.Waiting
		if r == nil || r.ID != w.RunID {
			return nil, nil
		}
		at, ok := r.Wake()
		now := a.now()
		if !ok || at.After(now) || c.WakeRetryAt.After(now) {
			return nil, nil
		}
		woken, err := a.wake(ctx, c, r, at)
		if err == nil || ctx.Err() != nil {
			return woken, err
		}
		failed = fmt.Errorf("wake chat run %s: %w", r.ID, err)
		if end, ok := wakeEnd(err); ok {
			ended := a.now()
			r.Status, r.Error, r.CompletedAt, r.WakeAt = run.StatusFailed, end, &ended, nil
			woken, err := a.settle(ctx, c, &run.Result{Run: r}, false, wakeKey(r.ID, at))
			if err != nil {
				// The handover failed for now: the wake is tried
				// again, and ends the run then.
				failed = fmt.Errorf("%w; end it: %w", failed, err)
				a.retryWake(c)
				return nil, nil
			}
			return woken, nil
		}
		a.retryWake(c)
		return nil, nil
	})
	if err != nil {
		return err
	}
	return failed
}

// wake goes on with r, the conversation's run waiting at a delay due at
// at.
func (a *App) wake(ctx context.Context, c *catalog.ChatConversation, r *run.Run, at time.Time) (*catalog.ChatRun, error) {
	ws, err := a.workspaces.Workspace(ctx, c.WorkspaceID)
	if err != nil {
		return nil, fmt.Errorf("read workspace: %w", err)
	}
	if r.Chat != nil {
		r.Chat.WorkspaceName = ws.Name
	}
	return a.continueChat(ctx, c, r, ws.Plan, run.Continuation{Wake: true}, wakeKey(r.ID, at))
}

// retryWake puts the next try of c's waiting run's wake, which failed
// for now, after its backoff.
func (a *App) retryWake(c *catalog.ChatConversation) {
	c.WakeTries++
	c.WakeRetryAt = a.now().Add(wakeRetryIn(c.WakeTries))
}

// wakeRetryIn is how long after its tries-th failure a wake is tried
// again.
func wakeRetryIn(tries int) time.Duration {
	return min(wakeRetryMin<<min(max(tries-1, 0), 6), wakeRetryMax)
}

// wakeEnd is the error a run ends with whose wake failed with err that
// can never succeed; false when err may pass. Every other failure of a
// wake is an outage (a service, the database) or the instance stopping:
// a flow's versions are never deleted, and the engine is given a run
// waiting at a delay of its own version.
func wakeEnd(err error) (*run.Error, bool) {
	if errors.Is(err, ErrWorkspaceNotFound) {
		return &run.Error{Code: CodeWorkspaceNotFound, Message: "the run's workspace no longer exists"}, true
	}
	return nil, false
}
