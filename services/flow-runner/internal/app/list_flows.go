package app

import (
	"context"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
)

// ListFlows returns the workspace's active flows with an api trigger.
func (a *App) ListFlows(ctx context.Context, workspaceID string) ([]*catalog.Flow, error) {
	return a.flows.ListActive(ctx, workspaceID, TriggerAPI)
}
