package adminclient

import (
	"context"
	"net/http"

	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/pkg/rpc"
)

// CreateAPIKey creates an API key for a workspace.
func (c *Client) CreateAPIKey(ctx context.Context, workspaceID string, k gatewayapi.NewAPIKey) (gatewayapi.CreatedAPIKey, error) {
	var out gatewayapi.CreatedAPIKey
	err := c.admin(ctx, rpc.ServiceGateway, http.MethodPost, workspacePath(workspaceID)+"/api-keys", k, &out)
	return out, err
}

// RevokeAPIKey revokes a key at once.
func (c *Client) RevokeAPIKey(ctx context.Context, id string) (gatewayapi.RevokedAPIKey, error) {
	var out gatewayapi.RevokedAPIKey
	err := c.admin(ctx, rpc.ServiceGateway, http.MethodDelete, "/admin/api-keys/"+segment(id), nil, &out)
	return out, err
}

// ListAPIKeys returns a workspace's keys, revoked ones included, oldest
// first.
func (c *Client) ListAPIKeys(ctx context.Context, workspaceID string) ([]gatewayapi.APIKey, error) {
	var out gatewayapi.APIKeyList
	err := c.admin(ctx, rpc.ServiceGateway, http.MethodGet, workspacePath(workspaceID)+"/api-keys", nil, &out)
	return out.APIKeys, err
}
