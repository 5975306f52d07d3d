package app

import (
	"context"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// RevokeAPIKey revokes a key at once; from then on it is unknown to the API.
// Revoking a revoked key returns its first revocation.
func (a *App) RevokeAPIKey(ctx context.Context, id string) (account.APIKey, error) {
	k, err := a.keys.Update(ctx, id, func(k *account.APIKey) error {
		k.Revoke(a.now())
		return nil
	})
	if err != nil {
		return account.APIKey{}, err
	}
	return k, a.announce(ctx)
}
