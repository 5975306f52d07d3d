package app

import (
	"context"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// CreateWorkspace creates a workspace on the API plan.
func (a *App) CreateWorkspace(ctx context.Context, in account.NewWorkspace) (account.Workspace, error) {
	w, err := account.Create(a.newID(), in, a.now())
	if err != nil {
		return account.Workspace{}, err
	}
	if err := a.workspaces.Create(ctx, w); err != nil {
		return account.Workspace{}, err
	}
	return w, nil
}
