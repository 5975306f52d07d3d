package app

import (
	"context"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// ResaveWebhook saves the workspace's webhook again with its URL unchanged
// (the dashboard's "save again", parleyctl webhook resave): a new secret,
// paused becomes active, failures are forgotten. Signatures made with the
// old secret no longer verify. The returned webhook carries the secret.
func (a *App) ResaveWebhook(ctx context.Context, workspaceID string) (*webhook.Webhook, error) {
	secret, err := webhook.NewSecret()
	if err != nil {
		return nil, err
	}
	now := a.now()
	return a.webhooks.Update(ctx, workspaceID, func(w *webhook.Webhook) error {
		w.Resave(secret, now)
		return nil
	})
}
