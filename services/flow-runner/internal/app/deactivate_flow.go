package app

import (
	"context"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
)

// DeactivateFlow sets a flow inactive: it leaves the list, and invokes,
// continues and call_flow targets find it no more. Its runs stay readable.
// With workspaceID set, a flow of another workspace is not found: the
// console names the workspace it acts for, parleyctl acts as the platform.
func (a *App) DeactivateFlow(ctx context.Context, workspaceID, flowID string) (*catalog.Flow, error) {
	return a.flows.Deactivate(ctx, workspaceID, flowID, a.now().UTC())
}
