package app

import (
	"context"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// UpdateWorkspace changes a workspace's plan modules, AI limit or rate.
func (a *App) UpdateWorkspace(ctx context.Context, id string, c account.Changes) (account.Workspace, error) {
	w, err := a.workspaces.Update(ctx, id, func(w *account.Workspace) error {
		return w.Apply(c, a.now())
	})
	if err != nil {
		return account.Workspace{}, err
	}
	return w, a.announce(ctx)
}
