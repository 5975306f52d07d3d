package app

import (
	"context"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
)

// ListFlowVersions returns the workspace's flow and its versions, newest
// first; a flow of another workspace is catalog.ErrFlowNotFound.
func (a *App) ListFlowVersions(ctx context.Context, workspaceID, flowID string) (*catalog.Flow, []catalog.VersionInfo, error) {
	f, err := a.flows.Get(ctx, workspaceID, flowID)
	if err != nil {
		return nil, nil, err
	}
	versions, err := a.flows.Versions(ctx, f.ID)
	if err != nil {
		return nil, nil, err
	}
	return f, versions, nil
}

// GetFlowVersion returns the document of a version of the workspace's
// flow exactly as it was published: catalog.ErrFlowNotFound for a flow of
// another workspace, catalog.ErrVersionNotFound for a version it lacks.
func (a *App) GetFlowVersion(ctx context.Context, workspaceID, flowID string, version int) ([]byte, error) {
	f, err := a.flows.Get(ctx, workspaceID, flowID)
	if err != nil {
		return nil, err
	}
	return a.flows.Document(ctx, f.ID, version)
}
