package app

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/parleyhq/parley/pkg/adminclient"
	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/services/console/internal/domain/operator"
)

// APIKeys are the gateway's admin calls on API keys; *adminclient.Client
// implements it.
type APIKeys interface {
	ListAPIKeys(ctx context.Context, workspaceID string) ([]gatewayapi.APIKey, error)
	CreateAPIKey(ctx context.Context, workspaceID string, k gatewayapi.NewAPIKey) (gatewayapi.CreatedAPIKey, error)
	RevokeAPIKey(ctx context.Context, id string) (gatewayapi.RevokedAPIKey, error)
}

var (
	// ErrAPIKeyNotFound is a key that is not the workspace's: the gateway
	// revokes a key by its id alone, so the console checks whose it is
	// first and answers another workspace's key as one that does not exist.
	ErrAPIKeyNotFound = errors.New("no such API key in this workspace")
	// ErrKeyNameRequired is a key without a name: the list tells keys
	// apart by name, so the console asks for one.
	ErrKeyNameRequired = errors.New("name is required")
)

// APIKeys lists workspace id's keys, revoked ones included, oldest first.
func (a *App) APIKeys(ctx context.Context, op operator.Operator, id string) ([]gatewayapi.APIKey, error) {
	if err := visible(op, id); err != nil {
		return nil, err
	}
	keys, err := a.apiKeys.ListAPIKeys(ctx, id)
	if err != nil {
		return nil, workspaceError(id, "list API keys", err)
	}
	return keys, nil
}

// CreateAPIKey creates a key named name in workspace id and returns it
// with its plaintext, which exists only in this answer. formID is the
// create form's: posted again, it creates nothing (once), and the repeat
// names the key made (its id) but cannot give its plaintext again.
func (a *App) CreateAPIKey(ctx context.Context, op operator.Operator, id, formID, name string) (gatewayapi.CreatedAPIKey, error) {
	if err := visible(op, id); err != nil {
		return gatewayapi.CreatedAPIKey{}, err
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return gatewayapi.CreatedAPIKey{}, ErrKeyNameRequired
	}
	return once(ctx, a, id, formID, FormCreateAPIKey, name, func() (gatewayapi.CreatedAPIKey, error) {
		k, err := written(a.apiKeys.CreateAPIKey(ctx, id, gatewayapi.NewAPIKey{Name: name}))
		if err != nil {
			return gatewayapi.CreatedAPIKey{}, workspaceError(id, "create API key", err)
		}
		return k, nil
	}, func(k gatewayapi.CreatedAPIKey) string { return k.ID })
}

// RevokeAPIKey revokes key keyID of workspace id at once, after checking
// the key is that workspace's.
func (a *App) RevokeAPIKey(ctx context.Context, op operator.Operator, id, keyID string) (gatewayapi.APIKey, error) {
	keys, err := a.APIKeys(ctx, op, id)
	if err != nil {
		return gatewayapi.APIKey{}, err
	}
	for _, k := range keys {
		if k.ID != keyID {
			continue
		}
		revoked, err := a.apiKeys.RevokeAPIKey(ctx, keyID)
		if e, ok := adminclient.AsError(err); ok && e.Status == 404 {
			// Deleted with the workspace since the list was read.
			return gatewayapi.APIKey{}, ErrAPIKeyNotFound
		}
		if err != nil {
			return gatewayapi.APIKey{}, fmt.Errorf("revoke API key %s: %w", keyID, err)
		}
		k.RevokedAt = &revoked.RevokedAt
		return k, nil
	}
	return gatewayapi.APIKey{}, ErrAPIKeyNotFound
}

// workspaceError is a service's answer about workspace id: its
// workspace_not_found is ErrWorkspaceNotFound, so a missing workspace is
// one answer everywhere.
func workspaceError(id, doing string, err error) error {
	if e, ok := adminclient.AsError(err); ok && e.Code == "workspace_not_found" {
		return ErrWorkspaceNotFound
	}
	return fmt.Errorf("%s of workspace %s: %w", doing, id, err)
}
