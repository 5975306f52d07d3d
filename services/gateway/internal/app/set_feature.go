package app

import (
	"context"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// SetFeature turns a workspace's feature flag on or off.
func (a *App) SetFeature(ctx context.Context, id, feature string, on bool) (account.Workspace, error) {
	w, err := a.workspaces.Update(ctx, id, func(w *account.Workspace) error {
		return w.SetFeature(feature, on, a.now())
	})
	if err != nil {
		return account.Workspace{}, err
	}
	return w, a.announce(ctx)
}
