package adapters

import (
	"context"
	"sync"
	"time"

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
	maxAge time.Duration
	now    func() time.Time

	mu sync.Mutex
	// generation counts the changes made through the cache: a read that
	// began before one is not kept.
	generation uint64
	byID       map[string]cachedChannel
	byExternal map[externalKey]cachedChannel
}

type cachedChannel struct {
	ch   channel.Channel
	read time.Time
}

type externalKey struct {
	kind       channel.Kind
	externalID string
}

// forgetChannelsAbove bounds the channels kept before the outdated ones
// are dropped.
const forgetChannelsAbove = 4096

var _ channel.Store = (*ChannelCache)(nil)

// NewChannelCache returns store, its reads through Lookup kept for maxAge.
func NewChannelCache(store channel.Store, maxAge time.Duration) *ChannelCache {
	return &ChannelCache{
		Store: store, maxAge: maxAge, now: time.Now,
		byID: map[string]cachedChannel{}, byExternal: map[externalKey]cachedChannel{},
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
	c.mu.Lock()
	defer c.mu.Unlock()
	c.generation++
	clear(c.byID)
	clear(c.byExternal)
}

// Lookup returns the reads that may be up to maxAge old.
func (c *ChannelCache) Lookup() channel.Lookup { return recentChannels{c} }

type recentChannels struct{ c *ChannelCache }

func (r recentChannels) Get(ctx context.Context, id string) (channel.Channel, error) {
	return cachedRead(r.c, r.c.byID, id, func() (channel.Channel, error) { return r.c.Store.Get(ctx, id) })
}

func (r recentChannels) GetByExternalID(ctx context.Context, kind channel.Kind, externalID string) (channel.Channel, error) {
	return cachedRead(r.c, r.c.byExternal, externalKey{kind, externalID}, func() (channel.Channel, error) {
		return r.c.Store.GetByExternalID(ctx, kind, externalID)
	})
}

// cachedRead answers key from known if it was read less than maxAge ago,
// else reads it and keeps it; an error (not found included) is not kept.
func cachedRead[K comparable](c *ChannelCache, known map[K]cachedChannel, key K, read func() (channel.Channel, error)) (channel.Channel, error) {
	now := c.now()
	c.mu.Lock()
	k, ok := known[key]
	generation := c.generation
	c.mu.Unlock()
	if ok && now.Sub(k.read) < c.maxAge {
		return k.ch, nil
	}
	ch, err := read()
	if err != nil {
		return channel.Channel{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.generation != generation {
		return ch, nil
	}
	if len(known) >= forgetChannelsAbove {
		for key, k := range known {
			if now.Sub(k.read) >= c.maxAge {
				delete(known, key)
			}
		}
	}
	known[key] = cachedChannel{ch: ch, read: now}
	return ch, nil
}
