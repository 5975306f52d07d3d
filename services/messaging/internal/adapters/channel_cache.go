package adapters

import (
	"context"
	"time"

	"github.com/parleyhq/parley/pkg/recent"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

// ChannelMaxAge is how long an instance's ingress takes a channel as it
// last read it: a change of its mode, status, token or secret made
// through another instance applies to deliveries that instance receives
// at most this much later (through this one, at once). docs/operations.md
// "Channel changes and ingress".
const ChannelMaxAge = time.Second

// ChannelCache is a channel.Store whose Lookup answers reads from what it
// read less than maxAge ago. Its own Create and Update forget what they
// change, so a change made through this instance applies to the next
// delivery.
type ChannelCache struct {
	channel.Store
	byID       *recent.Cache[string, channel.Channel]
	byExternal *recent.Cache[externalKey, channel.Channel]
}

type externalKey struct {
	kind       channel.Kind
	externalID string
}

var _ channel.Store = (*ChannelCache)(nil)

// NewChannelCache returns store, its reads through Lookup kept for maxAge.
func NewChannelCache(store channel.Store, maxAge time.Duration) *ChannelCache {
	return &ChannelCache{
		Store:      store,
		byID:       recent.New[string, channel.Channel](maxAge),
		byExternal: recent.New[externalKey, channel.Channel](maxAge),
	}
}

// Create implements channel.Store.
func (c *ChannelCache) Create(ctx context.Context, ch channel.Channel) error {
	defer c.forget()
	return c.Store.Create(ctx, ch)
}

// Update implements channel.Store.
func (c *ChannelCache) Update(ctx context.Context, id string, fn func(*channel.Channel) error) (channel.Channel, error) {
	defer c.forget()
	return c.Store.Update(ctx, id, fn)
}

// forget drops every channel kept: changes are rare, and one may move an
// external id from one channel to another.
func (c *ChannelCache) forget() {
	c.byID.Forget()
	c.byExternal.Forget()
}

// Lookup returns the reads that may be up to maxAge old.
func (c *ChannelCache) Lookup() channel.Lookup { return recentChannels{c} }

type recentChannels struct{ c *ChannelCache }

func (r recentChannels) Get(ctx context.Context, id string) (channel.Channel, error) {
	return r.c.byID.Get(id, func() (channel.Channel, error) { return r.c.Store.Get(ctx, id) })
}

func (r recentChannels) GetByExternalID(ctx context.Context, kind channel.Kind, externalID string) (channel.Channel, error) {
	return r.c.byExternal.Get(externalKey{kind, externalID}, func() (channel.Channel, error) {
		return r.c.Store.GetByExternalID(ctx, kind, externalID)
	})
}
