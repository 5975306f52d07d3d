package app

import (
	"context"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// UseAIUnits counts AI units against a workspace's plan: the flow-runner
// takes one before each AI node and gives it back when the node fails. The
// gateway owns the plan, so the count is kept here, atomic across every
// instance of either service.
func (a *App) UseAIUnits(ctx context.Context, id string, units int64) (account.Plan, error) {
	return a.workspaces.UseAIUnits(ctx, id, units)
}
