package app

import (
	"context"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
)

// GetRun returns an API run of the workspace's flow with its trace
// (catalog.ErrRunNotFound otherwise). The flow's status is not consulted:
// the runs of a deactivated flow stay readable.
func (a *App) GetRun(ctx context.Context, workspaceID, flowID, runID string) (*catalog.Trace, error) {
	return a.runs.Get(ctx, workspaceID, flowID, runID)
}
