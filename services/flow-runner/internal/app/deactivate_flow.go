package app

import (
	"context"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
)

// DeactivateFlow sets a flow inactive: it leaves the list, and invokes,
// continues and call_flow targets find it no more. Its runs stay readable.
func (a *App) DeactivateFlow(ctx context.Context, flowID string) (*catalog.Flow, error) {
	return a.flows.Deactivate(ctx, flowID, a.now().UTC())
}
