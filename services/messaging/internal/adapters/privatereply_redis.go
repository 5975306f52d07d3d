package adapters

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/dailycap"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/services/messaging/internal/domain/comment"
)

// PrivateReplyCap is the page's daily private-reply cap on the shared
// pkg/dailycap counter, so every producer of private replies counts into
// the same day.
type PrivateReplyCap struct {
	counter *dailycap.Counter
}

var _ comment.DailyCap = (*PrivateReplyCap)(nil)

// NewPrivateReplyCap counts on counter (dailycap.PrivateReply).
func NewPrivateReplyCap(counter *dailycap.Counter) *PrivateReplyCap {
	return &PrivateReplyCap{counter: counter}
}

// Reserve takes one of the page's private replies of the day.
func (p *PrivateReplyCap) Reserve(ctx context.Context, pageID string, limit int) (comment.Release, bool, error) {
	r, ok, err := p.counter.Reserve(ctx, pageID, limit)
	if err != nil || !ok {
		return nil, ok, err
	}
	return func(ctx context.Context) error { return p.counter.Release(ctx, r) }, true, nil
}

// CommenterClaims holds, per page and commenter, a Redis key set with NX
// for the private-reply window: the first private reply takes it, a second
// within the window (even one sent at the same moment) finds it taken.
type CommenterClaims struct {
	rdb  redis.Cmdable
	keys redisx.Keys
}

var _ comment.CommenterClaims = (*CommenterClaims)(nil)

// NewCommenterClaims keeps claims under keys' prefix.
func NewCommenterClaims(rdb redis.Cmdable, keys redisx.Keys) *CommenterClaims {
	return &CommenterClaims{rdb: rdb, keys: keys}
}

// releaseClaim deletes KEYS[1] only if it still holds this claim's token,
// so a late release never frees a claim someone else took after expiry.
var releaseClaim = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// Key is the claim's Redis key.
func (c *CommenterClaims) Key(pageID, commenterID string) string {
	return c.keys.Key("privatereply-commenter", pageID, commenterID)
}

// Claim takes the commenter's private reply for window.
func (c *CommenterClaims) Claim(ctx context.Context, pageID, commenterID string, window time.Duration) (comment.Release, bool, error) {
	key := c.Key(pageID, commenterID)
	token := uuid.NewString()
	ok, err := c.rdb.SetNX(ctx, key, token, window).Result()
	if err != nil {
		return nil, false, fmt.Errorf("claim commenter %s: %w", commenterID, err)
	}
	if !ok {
		return nil, false, nil
	}
	return func(ctx context.Context) error {
		if err := releaseClaim.Run(ctx, c.rdb, []string{key}, token).Err(); err != nil {
			return fmt.Errorf("release commenter %s: %w", commenterID, err)
		}
		return nil
	}, true, nil
}
