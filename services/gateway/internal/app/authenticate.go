package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// Authenticate finds the workspace of an API request from its Authorization
// header values and raw query string, and checks that its plan includes the
// Developer API. In order: a key-like query parameter, a missing or
// malformed header, an unknown or revoked key, whatever its shape (all
// 401), a plan without developer_api (403). An active key's credential is
// read from the store and then reused for up to credentialTTL while the
// accounts change token stays the same.
func (a *App) Authenticate(ctx context.Context, authorization []string, rawQuery string) (account.Workspace, error) {
	key, err := keyOf(authorization, rawQuery)
	if err != nil {
		return account.Workspace{}, err
	}
	hash := account.HashKey(key)
	// The token is read before the credential: a change committed after
	// this read rotates it, so what the fetch below saw is never used
	// after that change has been answered.
	token, err := a.changes.Current(ctx)
	if err != nil {
		return account.Workspace{}, fmt.Errorf("%w: %w", account.ErrChangesUnavailable, err)
	}
	now := a.now()
	c, ok := a.credentials.get(hash, token, now)
	if !ok {
		// Keys cascade with their workspaces: a key without one is as
		// good as unknown (ErrAPIKeyNotFound covers that race with a
		// deletion). The read also records the key's last use, at most
		// once a LastUsedResolution, so the operators' key list shows it.
		k, w, err := a.keys.FindCredential(ctx, hash, now)
		if errors.Is(err, account.ErrAPIKeyNotFound) {
			return account.Workspace{}, account.ErrUnknownKey
		}
		if err != nil {
			return account.Workspace{}, err
		}
		c = credential{key: k, workspace: w, token: token, fetchedAt: now}
		if k.Active() {
			// Unknown and revoked keys are read every time, as before.
			a.credentials.put(hash, c)
		}
	}
	return c.admit(key)
}

// Cached is Authenticate answered from this instance's credentials alone,
// without reading the change token: the workspace a request's key would be
// admitted to, and the change token that must still be current for that to
// hold. The caller reads the token itself (the gateway does so in the same
// Redis call as its rate limits) and calls Authenticate instead when it
// differs, is missing, or ok is false: no young credential for the key, or
// a request Authenticate would refuse.
func (a *App) Cached(authorization []string, rawQuery string) (w account.Workspace, token string, ok bool) {
	key, err := keyOf(authorization, rawQuery)
	if err != nil {
		return account.Workspace{}, "", false
	}
	c, ok := a.credentials.young(account.HashKey(key), a.now())
	if !ok || c.token == "" {
		// "" matches no token (see credentials.get).
		return account.Workspace{}, "", false
	}
	if w, err = c.admit(key); err != nil {
		return account.Workspace{}, "", false
	}
	return w, c.token, true
}

// keyOf is the API key of a request, or why it has none: a key-like query
// parameter, a missing or malformed header, a token of no key's shape.
func keyOf(authorization []string, rawQuery string) (string, error) {
	if err := account.CheckQuery(rawQuery); err != nil {
		return "", err
	}
	key, err := account.ParseBearer(authorization)
	if err != nil {
		return "", err
	}
	if !account.IsKeyShaped(key) {
		// Nothing of that shape is ever stored: no query to find out.
		return "", account.ErrUnknownKey
	}
	return key, nil
}
