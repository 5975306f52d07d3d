package app

import (
	"context"
	"fmt"
	"slices"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
)

// NotChatFlowError refuses a flow as a channel's chat flow: it is
// inactive, or its published version has no chat trigger.
type NotChatFlowError struct {
	FlowID string
	Reason string
}

func (e *NotChatFlowError) Error() string {
	return fmt.Sprintf("flow %s cannot be a chat flow: %s", e.FlowID, e.Reason)
}

// SetChatFlow makes flowID the flow that answers the channel's customers
// in place of the assistant (docs/chat.md "A channel's chat flow"). The
// flow must be the workspace's (catalog.ErrFlowNotFound otherwise),
// active, and have the chat trigger in its published version
// (*NotChatFlowError otherwise). A channel whose chat flow another
// workspace set is catalog.ErrChannelOfAnotherWorkspace. The channel
// itself is messaging's: its caller checked it is the workspace's.
func (a *App) SetChatFlow(ctx context.Context, workspaceID, channelID, flowID string) error {
	f, err := a.flows.Get(ctx, workspaceID, flowID)
	if err != nil {
		return err
	}
	if f.Status != catalog.StatusActive {
		return &NotChatFlowError{FlowID: f.ID, Reason: "it is inactive; publish it again to activate it"}
	}
	if !slices.Contains(f.Triggers, catalog.TriggerChat) {
		return &NotChatFlowError{FlowID: f.ID, Reason: `its published version has no "chat" trigger`}
	}
	return a.chatFlows.SetChatFlow(ctx, workspaceID, channelID, f.ID, a.now().UTC())
}
