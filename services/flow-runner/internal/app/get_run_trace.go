package app

import (
	"context"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
)

// GetRunTrace returns a run of the workspace with its trace for its
// operators, whatever its kind: an API run or a chat run (which the
// Developer API never shows). A run of another workspace is
// catalog.ErrRunNotFound.
func (a *App) GetRunTrace(ctx context.Context, workspaceID, runID string) (*catalog.Trace, error) {
	return a.runs.Trace(ctx, workspaceID, runID)
}
