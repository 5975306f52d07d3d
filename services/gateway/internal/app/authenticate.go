package app

import (
	"context"
	"errors"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// Authenticate finds the workspace of an API request from its Authorization
// header values and raw query string, and checks that its plan includes the
// Developer API. In order: a key-like query parameter, a missing or
// malformed header, an unknown or revoked key, whatever its shape (all
// 401), a plan without developer_api (403).
func (a *App) Authenticate(ctx context.Context, authorization []string, rawQuery string) (account.Workspace, error) {
	if err := account.CheckQuery(rawQuery); err != nil {
		return account.Workspace{}, err
	}
	key, err := account.ParseBearer(authorization)
	if err != nil {
		return account.Workspace{}, err
	}
	if !account.IsKeyShaped(key) {
		// Nothing of that shape is ever stored: no query to find out.
		return account.Workspace{}, account.ErrUnknownKey
	}
	// Keys cascade with their workspaces: a key without one is as good
	// as unknown (ErrAPIKeyNotFound covers that race with a deletion).
	// The read also records the key's last use, at most once a
	// LastUsedResolution, so the operators' key list shows it.
	k, w, err := a.keys.FindCredential(ctx, account.HashKey(key), a.now())
	if errors.Is(err, account.ErrAPIKeyNotFound) {
		return account.Workspace{}, account.ErrUnknownKey
	}
	if err != nil {
		return account.Workspace{}, err
	}
	if !k.Matches(key) || !k.Active() {
		return account.Workspace{}, account.ErrUnknownKey
	}
	if err := w.RequireModule(account.ModuleDeveloperAPI); err != nil {
		return account.Workspace{}, err
	}
	return w, nil
}
