package app

import (
	"context"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// GetWebhook returns the workspace's webhook (GET /v1/webhook) or
// webhook.ErrNotFound. The caller must not show its secret.
func (a *App) GetWebhook(ctx context.Context, workspaceID string) (*webhook.Webhook, error) {
	return a.webhooks.Get(ctx, workspaceID)
}
