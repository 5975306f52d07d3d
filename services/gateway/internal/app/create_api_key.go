package app

import (
	"context"
	"errors"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// CreatedKey is a new key with its plaintext, which is shown this once.
type CreatedKey struct {
	ID  string
	Key string
	// Existed is true when a given key was already this workspace's: the
	// call was a repeat and nothing was created.
	Existed bool
}

// CreateAPIKey creates an API key for a workspace. With key == "" a new
// random key is generated. With a given key (parleyctl demo's fixed local
// key) the call is idempotent: the same key for the same workspace returns
// the key's existing id; a key that is another workspace's, or was revoked,
// is refused.
func (a *App) CreateAPIKey(ctx context.Context, workspaceID, name, key string) (CreatedKey, error) {
	if _, err := a.workspaces.Get(ctx, workspaceID); err != nil {
		return CreatedKey{}, err
	}
	given := key != ""
	if !given {
		var err error
		if key, err = account.GenerateKey(a.random); err != nil {
			return CreatedKey{}, err
		}
	}
	k, err := account.NewAPIKey(a.newID(), workspaceID, name, key, a.now())
	if err != nil {
		return CreatedKey{}, err
	}
	if given {
		if existing, err := a.existingKey(ctx, workspaceID, key); err == nil {
			return existing, nil
		} else if !errors.Is(err, account.ErrAPIKeyNotFound) {
			return CreatedKey{}, err
		}
	}
	err = a.keys.Create(ctx, k)
	if errors.Is(err, account.ErrKeyExists) && given {
		// Two demo runs raced; the other stored it first.
		return a.existingKey(ctx, workspaceID, key)
	}
	if err != nil {
		return CreatedKey{}, err
	}
	return CreatedKey{ID: k.ID, Key: key}, nil
}

func (a *App) existingKey(ctx context.Context, workspaceID, key string) (CreatedKey, error) {
	k, err := a.keys.FindByHash(ctx, account.HashKey(key))
	switch {
	case err != nil:
		return CreatedKey{}, err
	case k.WorkspaceID != workspaceID:
		return CreatedKey{}, account.ErrKeyTaken
	case !k.Active():
		return CreatedKey{}, account.ErrKeyRevoked
	}
	return CreatedKey{ID: k.ID, Key: key, Existed: true}, nil
}
