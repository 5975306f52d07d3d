package app

import (
	"context"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

// ListChannels returns a workspace's channels, oldest first.
func (a *App) ListChannels(ctx context.Context, workspaceID string) ([]channel.Channel, error) {
	return a.channels.ListByWorkspace(ctx, workspaceID)
}
