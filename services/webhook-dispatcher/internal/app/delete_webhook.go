package app

import "context"

// DeleteWebhook removes the workspace's webhook (DELETE /v1/webhook); its
// events stop being delivered or recorded. The delivery log stays until
// its retention runs out.
func (a *App) DeleteWebhook(ctx context.Context, workspaceID string) error {
	return a.webhooks.Delete(ctx, workspaceID)
}
