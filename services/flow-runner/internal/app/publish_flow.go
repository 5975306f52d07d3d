package app

import (
	"context"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
)

// PublishFlow validates a flow document and stores it as a new immutable
// version: of a new flow when flowID is empty, else of that flow of the
// workspace (catalog.ErrFlowNotFound when it is unknown or another
// workspace's). A refused document is a *flow.ValidationError naming the
// node and the field.
//
// Publishing makes the flow active again, also after a deactivation: a
// publish is the operator saying this version is the one to run, and a
// flow stays off only until the next one.
func (a *App) PublishFlow(ctx context.Context, workspaceID, flowID string, document []byte) (*catalog.Flow, error) {
	def, err := flow.Parse(document, flow.ParseOptions{StagesOpen: a.stages})
	if err != nil {
		return nil, err
	}
	if err := def.CheckNew(); err != nil {
		return nil, err
	}
	return a.flows.Publish(ctx, catalog.Publication{
		FlowID: flowID, NewID: a.newID(), WorkspaceID: workspaceID,
		Document: document, Definition: def, Now: a.now().UTC(),
	})
}
