package app

import "context"

// ChatFlow returns the flow that answers the channel's customers now: its
// chat flow while that flow is active with the chat trigger, else "" and
// the assistant answers (docs/chat.md "A channel's chat flow").
func (a *App) ChatFlow(ctx context.Context, workspaceID, channelID string) (string, error) {
	flowID, _, err := a.chatFlows.ChatFlow(ctx, workspaceID, channelID)
	return flowID, err
}
