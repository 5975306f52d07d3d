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

// WakeChatRuns goes on with the chat runs whose delay is over, every
// interval until ctx ends (docs/chat.md "The chat-only nodes"). Every instance runs it:
// a run another instance is waking is skipped (it holds the
// conversation), and one that failed to wake is tried again next round.
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
// conversation as a turn does. A run no longer waiting there, or not due,
// is left alone.
func (a *App) WakeChatRun(ctx context.Context, w catalog.Wakeup) error {
	return a.chats.Hold(ctx, w.WorkspaceID, w.ConversationID, "", func(c *catalog.ChatConversation) (*catalog.ChatRun, error) {
		r := c.Waiting
		if r == nil || r.ID != w.RunID {
			return nil, nil
		}
		at, ok := r.Wake()
		if !ok || at.After(a.now()) {
			return nil, nil
		}
		ws, err := a.workspaces.Workspace(ctx, w.WorkspaceID)
		if err != nil {
			return nil, fmt.Errorf("read workspace: %w", err)
		}
		if r.Chat != nil {
			r.Chat.WorkspaceName = ws.Name
		}
		return a.continueChat(ctx, c, r, ws.Plan, run.Continuation{Wake: true}, wakeKey(r.ID, at))
	})
}
