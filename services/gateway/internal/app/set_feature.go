package app

import (
	"context"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// SetFeature turns a workspace's feature flag on or off.
func (a *App) SetFeature(ctx context.Context, id, feature string, on bool) (account.Workspace, error) {
	return a.workspaces.Update(ctx, id, func(w *account.Workspace) error {
		return w.SetFeature(feature, on, a.now())
	})
}
