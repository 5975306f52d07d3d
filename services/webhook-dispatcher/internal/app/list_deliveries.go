package app

import (
	"context"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
)

// ListDeliveries returns a page of the workspace's delivery log, newest
// first (GET /v1/webhook/deliveries). The port has checked q's bounds.
func (a *App) ListDeliveries(ctx context.Context, workspaceID string, q delivery.ListQuery) ([]*delivery.Delivery, error) {
	if q.Limit == 0 {
		q.Limit = delivery.DefaultPageSize
	}
	return a.deliveries.List(ctx, workspaceID, q)
}
