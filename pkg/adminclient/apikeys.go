package adminclient

import (
	"context"
	"net/http"

	"github.com/parleyhq/parley/pkg/rpc"
)

// NewAPIKey is a key to create. Key is empty for a new random key; a given
// key (parleyctl demo's fixed local key) makes the call a repeatable one:
// the same key for the same workspace answers the key's id again.
type NewAPIKey struct {
	Name string `json:"name"`
	Key  string `json:"key,omitempty"`
}

// CreatedAPIKey is a new key with its plaintext, which is shown this once.
type CreatedAPIKey struct {
	ID  string `json:"id"`
	Key string `json:"key"`
}

// RevokedAPIKey is a revoked key and when it was first revoked.
type RevokedAPIKey struct {
	ID        string `json:"id"`
	RevokedAt string `json:"revoked_at"`
}

// APIKey is a key as the gateway lists it: never the key itself, only the
// first characters that tell keys apart. LastUsedAt is when it last
// authenticated a request, to within a minute (nil: never); RevokedAt is
// nil while the key is active.
type APIKey struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	Prefix     string  `json:"prefix"`
	CreatedAt  string  `json:"created_at"`
	LastUsedAt *string `json:"last_used_at"`
	RevokedAt  *string `json:"revoked_at"`
}

// CreateAPIKey creates an API key for a workspace.
func (c *Client) CreateAPIKey(ctx context.Context, workspaceID string, k NewAPIKey) (CreatedAPIKey, error) {
	var out CreatedAPIKey
	err := c.admin(ctx, rpc.ServiceGateway, http.MethodPost, workspacePath(workspaceID)+"/api-keys", k, &out)
	return out, err
}

// RevokeAPIKey revokes a key at once.
func (c *Client) RevokeAPIKey(ctx context.Context, id string) (RevokedAPIKey, error) {
	var out RevokedAPIKey
	err := c.admin(ctx, rpc.ServiceGateway, http.MethodDelete, "/admin/api-keys/"+segment(id), nil, &out)
	return out, err
}

// ListAPIKeys returns a workspace's keys, revoked ones included, oldest
// first.
func (c *Client) ListAPIKeys(ctx context.Context, workspaceID string) ([]APIKey, error) {
	var out struct {
		APIKeys []APIKey `json:"api_keys"`
	}
	err := c.admin(ctx, rpc.ServiceGateway, http.MethodGet, workspacePath(workspaceID)+"/api-keys", nil, &out)
	return out.APIKeys, err
}
