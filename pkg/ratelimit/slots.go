package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/pkg/redisx"
)

// Slots bounds how many holders a key has at once, across every instance
// of a service (open widget streams per channel, per visitor and per client
// address; concurrent runs later). Each holder takes a lease: a member of
// the key's sorted set whose score is when the lease runs out, on Redis's
// clock. The holder renews it while it holds; a holder that dies stops
// renewing, and its place frees itself when the lease runs out, so a crashed
// instance cannot keep places taken for ever.
type Slots struct {
	rdb  redis.Scripter
	keys redisx.Keys
	ttl  time.Duration
}

// NewSlots returns slots whose keys are keys.Key("slots", name) and whose
// leases last ttl unless renewed. Renew well within ttl (a third of it).
func NewSlots(rdb redis.Scripter, keys redisx.Keys, ttl time.Duration) *Slots {
	return &Slots{rdb: rdb, keys: keys, ttl: ttl}
}

// Slot is one bound a holder is held to.
type Slot struct {
	Name  string
	Limit int
}

// FullError is an Acquire refused because a slot has no free place.
type FullError struct {
	// Slot is the name of the full slot.
	Slot  string
	Limit int
}

func (e *FullError) Error() string {
	return fmt.Sprintf("%s: all %d places taken", e.Slot, e.Limit)
}

// ErrLeaseLost is a Renew of a lease that ran out (its holder could not
// renew it in time, Redis being unreachable): its place may be someone
// else's by now, so the holder must let go.
var ErrLeaseLost = errors.New("lease ran out")

// acquireScript takes a place in every key of KEYS (limits in ARGV[3..]) for
// member ARGV[1], lasting ARGV[2] ms, or in none when one is full. Leases
// that ran out are dropped first. It returns 0 on success, else the index
// of the full key.
var acquireScript = redis.NewScript(redisx.LuaNowMS + `
local member, ttl = ARGV[1], tonumber(ARGV[2])
for i = 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  if redis.call('ZCARD', KEYS[i]) >= tonumber(ARGV[i + 2]) then
    return i
  end
end
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], now + ttl, member)
  redis.call('PEXPIRE', KEYS[i], ttl)
end
return 0
`)

// renewScript extends member's lease in every key of KEYS by ARGV[2] ms, if
// it still holds them all; it returns 0, or 1 when the lease ran out.
var renewScript = redis.NewScript(redisx.LuaNowMS + `
local member, ttl = ARGV[1], tonumber(ARGV[2])
for i = 1, #KEYS do
  local score = redis.call('ZSCORE', KEYS[i], member)
  if not score or tonumber(score) <= now then
    for j = 1, #KEYS do redis.call('ZREM', KEYS[j], member) end
    return 1
  end
end
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], now + ttl, member)
  if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
end
return 0
`)

// Lease is one holder's place in its slots.
type Lease struct {
	slots  *Slots
	member string
	keys   []string
}

// Acquire takes a place in every slot, or in none: *FullError names the
// first full one.
func (s *Slots) Acquire(ctx context.Context, slots ...Slot) (*Lease, error) {
	if len(slots) == 0 {
		return nil, errors.New("acquire: no slot")
	}
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("lease id: %w", err)
	}
	l := &Lease{slots: s, member: hex.EncodeToString(b), keys: make([]string, len(slots))}
	args := []any{l.member, s.ttl.Milliseconds()}
	for i, sl := range slots {
		if sl.Limit < 1 {
			return nil, fmt.Errorf("acquire %s: limit %d is below 1", sl.Name, sl.Limit)
		}
		l.keys[i] = s.Key(sl.Name)
		args = append(args, sl.Limit)
	}
	full, err := acquireScript.Run(ctx, s.rdb, l.keys, args...).Int()
	if err != nil {
		return nil, fmt.Errorf("acquire %s: %w", slots[0].Name, err)
	}
	if full > 0 && full <= len(slots) {
		return nil, &FullError{Slot: slots[full-1].Name, Limit: slots[full-1].Limit}
	}
	return l, nil
}

// Key is the Redis key of slot name.
func (s *Slots) Key(name string) string { return s.keys.Key("slots", name) }

// Renew extends the lease by the slots' ttl from now; ErrLeaseLost when it
// had already run out.
func (l *Lease) Renew(ctx context.Context) error {
	lost, err := renewScript.Run(ctx, l.slots.rdb, l.keys, l.member, l.slots.ttl.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("renew lease: %w", err)
	}
	if lost != 0 {
		return ErrLeaseLost
	}
	return nil
}

// KeepRenewed renews the lease every third of its ttl until the returned
// stop is called (which waits for the renewer to end). A renewal that
// fails is given to onErr; after ErrLeaseLost the renewer ends, since the
// place may be someone else's by now.
func (l *Lease) KeepRenewed(ctx context.Context, onErr func(error)) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(l.slots.ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				err := l.Renew(context.WithoutCancel(ctx))
				if err != nil {
					onErr(err)
				}
				if errors.Is(err, ErrLeaseLost) {
					return
				}
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// releaseScript removes member from every key of KEYS.
var releaseScript = redis.NewScript(`
for i = 1, #KEYS do redis.call('ZREM', KEYS[i], ARGV[1]) end
return 0
`)

// Release gives the places back. A release that fails leaves them to run
// out with the lease.
func (l *Lease) Release(ctx context.Context) error {
	if err := releaseScript.Run(ctx, l.slots.rdb, l.keys, l.member).Err(); err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	return nil
}
