package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/parleyhq/parley/pkg/safehttp"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// resolveTimeout bounds the save-time DNS check of a URL's host.
const resolveTimeout = 2 * time.Second

// SaveWebhook saves rawURL as the workspace's webhook (PUT /v1/webhook).
// Every save issues a new secret, makes the webhook active and clears its
// failure count; the returned webhook carries the secret, which is shown
// only in this response. A URL that may not be saved is a
// *safehttp.URLError.
func (a *App) SaveWebhook(ctx context.Context, workspaceID, rawURL string) (*webhook.Webhook, error) {
	u, err := safehttp.ValidateURL(strings.TrimSpace(rawURL), a.cfg.AllowPrivateTargets)
	if err != nil {
		return nil, err
	}
	if !a.cfg.AllowPrivateTargets && a.resolver != nil {
		rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		err := safehttp.CheckResolved(rctx, a.resolver, u)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return nil, err
	}
	saved, err := a.webhooks.Put(ctx, webhook.New(workspaceID, u.String(), secret, a.now()))
	if err != nil {
		return nil, fmt.Errorf("save webhook of %s: %w", workspaceID, err)
	}
	return saved, nil
}
