package app

import "context"

// ClearChatFlow removes the channel's chat flow: the assistant answers
// its customers. Clearing a channel without one is no error.
func (a *App) ClearChatFlow(ctx context.Context, workspaceID, channelID string) error {
	return a.chatFlows.ClearChatFlow(ctx, workspaceID, channelID)
}
