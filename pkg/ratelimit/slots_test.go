package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

func TestSlotsBoundHoldersInEverySlot(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	s := ratelimit.NewSlots(env.Redis(t), redisx.Keys{Prefix: env.RedisPrefix}, time.Minute)
	ctx := context.Background()
	channel := ratelimit.Slot{Name: "channel", Limit: 3}
	visitor := func(v string) ratelimit.Slot { return ratelimit.Slot{Name: "visitor:" + v, Limit: 2} }

	a1, err := s.Acquire(ctx, channel, visitor("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, channel, visitor("a")); err != nil {
		t.Fatal(err)
	}
	var full *ratelimit.FullError
	if _, err := s.Acquire(ctx, channel, visitor("a")); !errors.As(err, &full) || full.Slot != "visitor:a" || full.Limit != 2 {
		t.Fatalf("third of a visitor = %v", err)
	}
	// The refusal took no place in the channel.
	if _, err := s.Acquire(ctx, channel, visitor("b")); err != nil {
		t.Fatalf("another visitor: %v", err)
	}
	if _, err := s.Acquire(ctx, channel, visitor("c")); !errors.As(err, &full) || full.Slot != "channel" {
		t.Fatalf("over the channel = %v", err)
	}
	// A release frees the place in every slot.
	if err := a1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, channel, visitor("a")); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if err := a1.Renew(ctx); !errors.Is(err, ratelimit.ErrLeaseLost) {
		t.Fatalf("renew of a released lease = %v", err)
	}
}

// TestSlotsOfADeadHolderFreeThemselves: a holder that stops renewing (its
// instance died) loses its place when the lease runs out; one that renews
// keeps it.
func TestSlotsOfADeadHolderFreeThemselves(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	rdb := env.Redis(t)
	ttl := 400 * time.Millisecond
	s := ratelimit.NewSlots(rdb, redisx.Keys{Prefix: env.RedisPrefix}, ttl)
	ctx := context.Background()
	slot := ratelimit.Slot{Name: "streams", Limit: 2}

	live, err := s.Acquire(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := s.Acquire(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, slot); err == nil {
		t.Fatal("a third holder got a place")
	}
	// The live holder renews every third of the lease; the dead one never.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := live.Renew(ctx); err != nil {
			t.Fatalf("renew: %v", err)
		}
		if _, err := s.Acquire(ctx, slot); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the dead holder's place never freed")
		}
		time.Sleep(ttl / 3)
	}
	if err := dead.Renew(ctx); !errors.Is(err, ratelimit.ErrLeaseLost) {
		t.Fatalf("renew after the lease ran out = %v", err)
	}
	if err := live.Renew(ctx); err != nil {
		t.Fatalf("the live holder lost its place: %v", err)
	}
	// Keys live under the prefix and expire with their leases.
	if ttl := rdb.PTTL(ctx, s.Key("streams")).Val(); ttl <= 0 || ttl > 400*time.Millisecond {
		t.Fatalf("key ttl = %v", ttl)
	}
}

// A lease kept renewed outlives its ttl many times over; stopped, it runs
// out; one Redis lost is reported as ErrLeaseLost and not renewed again.
func TestKeepRenewed(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	rdb := env.Redis(t)
	const ttl = 300 * time.Millisecond
	s := ratelimit.NewSlots(rdb, redisx.Keys{Prefix: env.RedisPrefix}, ttl)
	ctx := context.Background()
	one := ratelimit.Slot{Name: "one", Limit: 1}
	lease, err := s.Acquire(ctx, one)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 10)
	stop := lease.KeepRenewed(ctx, func(err error) { errc <- err })
	var full *ratelimit.FullError
	for deadline := time.Now().Add(4 * ttl); time.Now().Before(deadline); time.Sleep(ttl / 5) {
		if _, err := s.Acquire(ctx, one); !errors.As(err, &full) {
			t.Fatalf("a kept lease's place was taken: %v", err)
		}
	}
	stop()
	wait.For(t, 5*time.Second, "the stopped lease to run out", func() error {
		_, err := s.Acquire(ctx, one)
		return err
	})

	// The place vanishes from Redis (a failover): the renewer says so once
	// and ends.
	lost, err := s.Acquire(ctx, ratelimit.Slot{Name: "lost", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	stopLost := lost.KeepRenewed(ctx, func(err error) { errc <- err })
	defer stopLost()
	if err := rdb.Del(ctx, s.Key("lost")).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ratelimit.ErrLeaseLost) {
			t.Fatalf("renewal error %v; want ErrLeaseLost", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the lost lease was not reported")
	}
	select {
	case err := <-errc:
		t.Fatalf("renewed again after the loss: %v", err)
	case <-time.After(ttl):
	}
}
