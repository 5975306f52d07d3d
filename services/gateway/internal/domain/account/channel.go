package account

import "context"

// Channel is a workspace's messaging channel as the Developer API shows it;
// messaging owns channels, the gateway only lists them in /v1/me.
type Channel struct {
	ID         string
	Kind       string
	ExternalID string
	AIMode     string
	Status     string
}

// ChannelDirectory lists a workspace's channels.
type ChannelDirectory interface {
	Channels(ctx context.Context, workspaceID string) ([]Channel, error)
}
