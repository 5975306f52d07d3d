package app

import (
	"context"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
)

// GetDelivery returns one delivery of the workspace's log with every
// attempt (the operator's GET /admin/webhooks/:workspace_id/deliveries/:id)
// or delivery.ErrNotFound, also for another workspace's delivery.
func (a *App) GetDelivery(ctx context.Context, workspaceID, id string) (*delivery.Delivery, error) {
	return a.deliveries.Get(ctx, workspaceID, id)
}
