package adminclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/parleyhq/parley/pkg/rpc"
)

// Channel is a channel as messaging's admin routes answer it: with its
// ingress secret (to configure the platform's webhook), never its token.
type Channel struct {
	ID          string `json:"id"`
	WorkspaceID string `json:"workspace_id"`
	Kind        string `json:"kind"`
	ExternalID  string `json:"external_id"`
	AIMode      string `json:"ai_mode"`
	Status      string `json:"status"`
	Secret      string `json:"secret"`
	CreatedAt   string `json:"created_at"`
}

// Channel kinds and AI modes.
const (
	KindTelegram  = "telegram"
	KindMessenger = "messenger"
	KindInstagram = "instagram"
	KindWebchat   = "webchat"

	AIModeAuto     = "auto"
	AIModeSuggest  = "suggest"
	AIModeExternal = "external"
)

// NewChannel is a channel to create. Secret is generated when empty; Token
// is the platform's access token (a Telegram bot's).
type NewChannel struct {
	WorkspaceID string `json:"workspace_id"`
	Kind        string `json:"kind"`
	ExternalID  string `json:"external_id"`
	Token       string `json:"token"`
	Secret      string `json:"secret"`
}

type channelAnswer struct {
	Channel Channel `json:"channel"`
}

// CreateChannel creates a channel. Messaging does not know workspaces: it
// stores the channel under whatever workspace id it is given, so a caller
// checks the workspace first (GetWorkspace), as parleyctl does.
func (c *Client) CreateChannel(ctx context.Context, ch NewChannel) (Channel, error) {
	var out channelAnswer
	err := c.admin(ctx, rpc.ServiceMessaging, http.MethodPost, "/admin/channels", ch, &out)
	return out.Channel, err
}

// ListChannels returns a workspace's channels.
func (c *Client) ListChannels(ctx context.Context, workspaceID string) ([]Channel, error) {
	var out struct {
		Channels []Channel `json:"channels"`
	}
	err := c.get(ctx, rpc.ServiceMessaging, "/admin/channels", url.Values{"workspace_id": {workspaceID}}, &out)
	return out.Channels, err
}

// SetChannelAIMode sets a channel's ai_mode (auto, suggest or external).
func (c *Client) SetChannelAIMode(ctx context.Context, channelID, mode string) (Channel, error) {
	var out channelAnswer
	err := c.admin(ctx, rpc.ServiceMessaging, http.MethodPatch, "/admin/channels/"+segment(channelID), map[string]string{"ai_mode": mode}, &out)
	return out.Channel, err
}
