package app

import (
	"context"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// Me is what GET /v1/me shows a workspace about itself.
type Me struct {
	Workspace     account.Workspace
	Channels      []account.Channel
	RatePerMinute int
}

// DescribeMe gathers the workspace's own view: its plan, its channels (from
// messaging) and its effective per-minute limit. The workspace is read
// again rather than taken from its credential, which may have been cached
// before AI units were used (UseAIUnits does not rotate the change token).
func (a *App) DescribeMe(ctx context.Context, w account.Workspace) (Me, error) {
	w, err := a.workspaces.Get(ctx, w.ID)
	if err != nil {
		return Me{}, err
	}
	chans, err := a.channels.Channels(ctx, w.ID)
	if err != nil {
		return Me{}, err
	}
	return Me{Workspace: w, Channels: chans, RatePerMinute: w.RateLimit(a.defaultRate)}, nil
}
