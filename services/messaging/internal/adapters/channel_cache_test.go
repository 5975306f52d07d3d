package adapters

import (
	"context"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
)

// countingChannels is a channel.Store of one channel that counts its reads.
type countingChannels struct {
	channel.Store
	ch    channel.Channel
	reads int
}

func (s *countingChannels) Get(_ context.Context, id string) (channel.Channel, error) {
	s.reads++
	if id != s.ch.ID {
		return channel.Channel{}, channel.ErrNotFound
	}
	return s.ch, nil
}

func (s *countingChannels) GetByExternalID(_ context.Context, kind channel.Kind, externalID string) (channel.Channel, error) {
	s.reads++
	if kind != s.ch.Kind || externalID != s.ch.ExternalID {
		return channel.Channel{}, channel.ErrNotFound
	}
	return s.ch, nil
}

func (s *countingChannels) Update(_ context.Context, _ string, fn func(*channel.Channel) error) (channel.Channel, error) {
	err := fn(&s.ch)
	return s.ch, err
}

// TestChannelCache: ingress reads a channel at most once per max age, by
// id and by external id; not found is not kept; a change made through the
// cache applies to the next read; plain Get always reads.
func TestChannelCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &countingChannels{ch: channel.Channel{ID: "c1", Kind: channel.KindMessenger, ExternalID: "page-1", AIMode: channel.AIModeAuto}}
	cache := NewChannelCache(store, time.Second)
	now := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	cache.byID.Now = func() time.Time { return now }
	cache.byExternal.Now = cache.byID.Now
	recent := cache.Lookup()
	read := func(want channel.AIMode, wantReads int) {
		t.Helper()
		byID, err := recent.Get(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		byExternal, err := recent.GetByExternalID(ctx, channel.KindMessenger, "page-1")
		if err != nil {
			t.Fatal(err)
		}
		if byID.AIMode != want || byExternal.AIMode != want || store.reads != wantReads {
			t.Fatalf("modes %s, %s after %d reads; want %s after %d", byID.AIMode, byExternal.AIMode, store.reads, want, wantReads)
		}
	}
	read(channel.AIModeAuto, 2)
	now = now.Add(time.Second - time.Millisecond)
	read(channel.AIModeAuto, 2)
	now = now.Add(time.Millisecond)
	read(channel.AIModeAuto, 4)

	store.ch.AIMode = channel.AIModeExternal // changed through another instance
	read(channel.AIModeAuto, 4)
	if _, err := cache.Update(ctx, "c1", func(c *channel.Channel) error { c.AIMode = channel.AIModeSuggest; return nil }); err != nil {
		t.Fatal(err)
	}
	read(channel.AIModeSuggest, 6)

	for range 2 {
		if _, err := recent.Get(ctx, "unknown"); err != channel.ErrNotFound {
			t.Fatalf("unknown channel: %v", err)
		}
	}
	if _, err := cache.Get(ctx, "c1"); err != nil || store.reads != 9 {
		t.Fatalf("plain Get: %v after %d reads, want 9", err, store.reads)
	}
}
