package app

import (
	"context"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

// GetChannel returns a channel by its id, whatever its workspace, for the
// platform's operators (parleyctl learns a channel's workspace from it);
// channel.ErrNotFound when there is none.
func (a *App) GetChannel(ctx context.Context, id string) (channel.Channel, error) {
	return a.channels.Get(ctx, id)
}
