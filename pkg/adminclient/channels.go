package adminclient

import (
	"context"
	"net/http"
	"net/url"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/rpc"
)

// CreateChannel creates a channel. Messaging does not know workspaces: it
// stores the channel under whatever workspace id it is given, so a caller
// checks the workspace first (GetWorkspace), as parleyctl does.
func (c *Client) CreateChannel(ctx context.Context, ch messagingapi.NewChannel) (messagingapi.AdminChannel, error) {
	var out messagingapi.AdminChannelAnswer
	err := c.admin(ctx, rpc.ServiceMessaging, http.MethodPost, "/admin/channels", ch, &out)
	return out.Channel, err
}

// ListChannels returns a workspace's channels.
func (c *Client) ListChannels(ctx context.Context, workspaceID string) ([]messagingapi.AdminChannel, error) {
	var out messagingapi.AdminChannelList
	err := c.get(ctx, rpc.ServiceMessaging, "/admin/channels", url.Values{"workspace_id": {workspaceID}}, &out)
	return out.Channels, err
}

// Channel returns a channel by its id, whatever its workspace: how a
// platform operator's tool learns the workspace of a channel it is given
// (404 channel_not_found when there is none).
func (c *Client) Channel(ctx context.Context, channelID string) (messagingapi.AdminChannel, error) {
	var out messagingapi.AdminChannelAnswer
	err := c.get(ctx, rpc.ServiceMessaging, "/admin/channels/"+segment(channelID), nil, &out)
	return out.Channel, err
}

// SetChannelAIMode sets a channel's ai_mode (auto, suggest or external).
func (c *Client) SetChannelAIMode(ctx context.Context, channelID, mode string) (messagingapi.AdminChannel, error) {
	var out messagingapi.AdminChannelAnswer
	err := c.admin(ctx, rpc.ServiceMessaging, http.MethodPatch, "/admin/channels/"+segment(channelID), messagingapi.SetChannelAIMode{AIMode: &mode}, &out)
	return out.Channel, err
}
