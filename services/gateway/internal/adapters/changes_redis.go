package adapters

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// ChangeToken is the accounts change token in one Redis key under the
// gateway's prefix, shared by every instance.
type ChangeToken struct {
	client *redis.Client
	key    string
}

var _ account.ChangeToken = (*ChangeToken)(nil)

// NewChangeToken returns the token kept under keys' prefix.
func NewChangeToken(client *redis.Client, keys redisx.Keys) *ChangeToken {
	return &ChangeToken{client: client, key: keys.Key("accounts", "token")}
}

// Key is the token's Redis key, for a caller that compares it in its own
// Redis call (the gateway's admission, with its rate limits). Only Current
// may start a missing token, so such a caller asks Current when it finds
// none.
func (t *ChangeToken) Key() string { return t.key }

// Current implements account.ChangeToken. A token that is missing (Redis
// flushed or restarted empty) is replaced by a new random one rather than
// read as "": a missing token that came back as the same "" would let
// credentials read before a change in between match again.
func (t *ChangeToken) Current(ctx context.Context) (string, error) {
	v, err := t.client.Get(ctx, t.key).Result()
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("read accounts change token: %w", err)
	}
	fresh := rand.Text()
	set, err := t.client.SetNX(ctx, t.key, fresh, 0).Result()
	if err != nil {
		return "", fmt.Errorf("start accounts change token: %w", err)
	}
	if set {
		return fresh, nil
	}
	// Another instance started it first.
	v, err = t.client.Get(ctx, t.key).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read accounts change token: %w", err)
	}
	return v, nil
}

// Rotate implements account.ChangeToken.
func (t *ChangeToken) Rotate(ctx context.Context) error {
	if err := t.client.Set(ctx, t.key, rand.Text(), 0).Err(); err != nil {
		return fmt.Errorf("rotate accounts change token: %w", err)
	}
	return nil
}
