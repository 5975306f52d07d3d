package app

import (
	"context"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

// SetChannelAIMode changes a channel's mode; the next customer message
// follows it.
func (a *App) SetChannelAIMode(ctx context.Context, id, mode string) (channel.Channel, error) {
	if _, ok := channel.ParseAIMode(mode); !ok {
		return channel.Channel{}, &channel.FieldError{Field: "ai_mode", Reason: "must be one of auto, suggest, external"}
	}
	return a.channels.Update(ctx, id, func(c *channel.Channel) error { return c.SetAIMode(mode) })
}
