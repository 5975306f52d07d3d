package app

import (
	"context"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// UseAIUnits counts AI units against a workspace's plan: the flow-runner
// takes one before each AI node and gives it back when the node fails. The
// gateway owns the plan, so the count is kept here, atomic across every
// instance of either service. It does not rotate the accounts change
// token: no cached credential is used for the count (GET /v1/me reads the
// plan afresh), every AI node would otherwise empty every instance's cache,
// and a retry of a use whose announcement failed would count it twice.
func (a *App) UseAIUnits(ctx context.Context, id string, units int64) (account.Plan, error) {
	return a.workspaces.UseAIUnits(ctx, id, units)
}
