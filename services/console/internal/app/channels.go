package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/parleyhq/parley/pkg/adminclient"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/services/console/internal/domain/operator"
)

// Channels are messaging's admin calls on channels; *adminclient.Client
// implements it.
type Channels interface {
	ListChannels(ctx context.Context, workspaceID string) ([]messagingapi.AdminChannel, error)
	CreateChannel(ctx context.Context, ch messagingapi.NewChannel) (messagingapi.AdminChannel, error)
	SetChannelAIMode(ctx context.Context, channelID, mode string) (messagingapi.AdminChannel, error)
}

// ErrChannelNotFound is a channel that is not the workspace's: messaging
// changes a channel by its id alone, so the console checks whose it is
// first and answers another workspace's channel as one that does not
// exist.
var ErrChannelNotFound = errors.New("no such channel in this workspace")

// Channels lists workspace id's channels. Messaging keeps channels under
// any workspace id it is given, so the workspace is read from the gateway
// first: a workspace that does not exist is ErrWorkspaceNotFound, never an
// empty list.
func (a *App) Channels(ctx context.Context, op operator.Operator, id string) ([]messagingapi.AdminChannel, error) {
	if _, err := a.Workspace(ctx, op, id); err != nil {
		return nil, err
	}
	chans, err := a.channels.ListChannels(ctx, id)
	if err != nil {
		return nil, workspaceError(id, "list channels", err)
	}
	return chans, nil
}

// CreateChannel creates a channel in workspace id, after checking the
// workspace exists (messaging would store an orphan channel otherwise).
// Messaging validates the rest and words its refusals per field. formID
// is the create form's: posted again, it creates nothing (once), and the
// repeat names the channel made.
func (a *App) CreateChannel(ctx context.Context, op operator.Operator, id, formID string, ch messagingapi.NewChannel) (messagingapi.AdminChannel, error) {
	if _, err := a.Workspace(ctx, op, id); err != nil {
		return messagingapi.AdminChannel{}, err
	}
	ch.WorkspaceID = id
	return once(ctx, a, id, formID, FormCreateChannel, ch, func() (messagingapi.AdminChannel, error) {
		created, err := written(a.channels.CreateChannel(ctx, ch))
		if err != nil {
			return messagingapi.AdminChannel{}, fmt.Errorf("create channel in workspace %s: %w", id, err)
		}
		return created, nil
	}, func(created messagingapi.AdminChannel) string { return created.ID })
}

// SetChannelAIMode sets the ai_mode of channel channelID of workspace id,
// after checking the channel is that workspace's. The mode applies from
// the channel's next customer message.
func (a *App) SetChannelAIMode(ctx context.Context, op operator.Operator, id, channelID, mode string) (messagingapi.AdminChannel, error) {
	if err := visible(op, id); err != nil {
		return messagingapi.AdminChannel{}, err
	}
	chans, err := a.channels.ListChannels(ctx, id)
	if err != nil {
		return messagingapi.AdminChannel{}, workspaceError(id, "list channels", err)
	}
	for _, c := range chans {
		if c.ID != channelID {
			continue
		}
		set, err := a.channels.SetChannelAIMode(ctx, channelID, mode)
		if e, ok := adminclient.AsError(err); ok && e.Status == 404 {
			return messagingapi.AdminChannel{}, ErrChannelNotFound
		}
		if err != nil {
			return messagingapi.AdminChannel{}, fmt.Errorf("set ai_mode of channel %s: %w", channelID, err)
		}
		return set, nil
	}
	return messagingapi.AdminChannel{}, ErrChannelNotFound
}
