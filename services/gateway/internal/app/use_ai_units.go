package app

import (
	"context"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// UseAIUnits counts AI units against workspaces' plans, all or nothing per
// workspace: the flow-runner takes one before each AI node, its concurrent
// nodes' units of every workspace in one call, and gives one back when the
// node fails. The gateway owns the plan, so the count is kept here, atomic
// across every instance of either service. It does not rotate the accounts
// change token: no cached credential is used for the count (GET /v1/me
// reads the plan afresh), every AI node would otherwise empty every
// instance's cache, and a retry of a use whose announcement failed would
// count it twice. Uses that do not pass account.CheckAIUnitsUses are
// refused whole (*account.ValidationError), and none is made.
func (a *App) UseAIUnits(ctx context.Context, uses []account.AIUnitsUse) ([]account.AIUnitsUsed, error) {
	if err := account.CheckAIUnitsUses(uses); err != nil {
		return nil, err
	}
	return a.workspaces.UseAIUnits(ctx, uses)
}
