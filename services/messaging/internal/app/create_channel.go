package app

import (
	"context"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

// CreateChannel adds a channel to a workspace, in mode auto, with a
// generated secret unless one is given.
func (a *App) CreateChannel(ctx context.Context, n channel.NewChannel) (channel.Channel, error) {
	c, err := channel.New(n, a.newID(), a.timestamp())
	if err != nil {
		return channel.Channel{}, err
	}
	if err := a.channels.Create(ctx, c); err != nil {
		return channel.Channel{}, err
	}
	return c, nil
}
