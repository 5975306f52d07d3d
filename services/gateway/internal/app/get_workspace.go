package app

import (
	"context"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// GetWorkspace returns one workspace.
func (a *App) GetWorkspace(ctx context.Context, id string) (account.Workspace, error) {
	return a.workspaces.Get(ctx, id)
}
