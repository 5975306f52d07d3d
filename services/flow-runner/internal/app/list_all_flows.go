package app

import (
	"context"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
)

// ListAllFlows returns every flow of the workspace for its operators:
// active or not, whatever its triggers, newest change first.
func (a *App) ListAllFlows(ctx context.Context, workspaceID string) ([]*catalog.Flow, error) {
	return a.flows.List(ctx, workspaceID)
}
