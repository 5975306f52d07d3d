package app

import (
	"context"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// ListWorkspaces returns the workspace with slug (none or one), or every
// workspace when slug is "".
func (a *App) ListWorkspaces(ctx context.Context, slug string) ([]account.Workspace, error) {
	return a.workspaces.List(ctx, slug)
}
