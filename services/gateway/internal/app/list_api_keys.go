package app

import (
	"context"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// ListAPIKeys returns a workspace's keys, revoked ones included, oldest
// first: their names, prefixes and times, never the keys. An unknown
// workspace is ErrWorkspaceNotFound rather than an empty list, so a
// mistyped id is not read as a workspace without keys.
func (a *App) ListAPIKeys(ctx context.Context, workspaceID string) ([]account.APIKey, error) {
	if _, err := a.workspaces.Get(ctx, workspaceID); err != nil {
		return nil, err
	}
	return a.keys.ListByWorkspace(ctx, workspaceID)
}
