package adapters

import (
	"context"
	"fmt"
	"net/http"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// MessagingChannels lists channels by asking messaging's "api" endpoint, the
// same GET /v1/channels a developer's request is forwarded to.
type MessagingChannels struct {
	client *rpc.Client
}

var _ account.ChannelDirectory = (*MessagingChannels)(nil)

// NewMessagingChannels returns a directory that calls messaging through client.
func NewMessagingChannels(client *rpc.Client) *MessagingChannels {
	return &MessagingChannels{client: client}
}

// Channels implements account.ChannelDirectory. Messaging's errors come back
// as they are (*errs.Error, 503 service_unavailable when it is not running).
func (m *MessagingChannels) Channels(ctx context.Context, workspaceID string) ([]account.Channel, error) {
	var out messagingapi.ChannelList
	if err := m.client.CallJSON(ctx, rpc.ServiceMessaging, rpc.EndpointAPI, workspaceID, http.MethodGet, "/v1/channels", nil, &out); err != nil {
		return nil, fmt.Errorf("list channels: %w", err)
	}
	chans := make([]account.Channel, len(out.Channels))
	for i, c := range out.Channels {
		chans[i] = account.Channel{ID: c.ID, Kind: c.Kind, ExternalID: c.ExternalID, AIMode: c.AIMode, Status: c.Status}
	}
	return chans, nil
}
