// Package redisx opens Redis and names keys under the process's prefix, so
// that test runs and checkouts sharing one Redis never collide.
package redisx

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DialTimeout bounds each new connection to Redis unless REDIS_URL sets
// dial_timeout (go-redis waits 5 s by default): a Redis that is down fails a
// request within it (503 service_unavailable, see errs.DependencyDown).
const DialTimeout = 2 * time.Second

// Open connects to url and checks the connection. Once open, the client
// reconnects by itself whenever Redis comes back.
func Open(ctx context.Context, url string) (*redis.Client, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("parse REDIS_URL: %w", err)
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = DialTimeout
	}
	// go-redis's defaults (3 retries of a command, 5 dials each) spend a
	// second or more before a command fails while Redis is down. One retry
	// of each still replaces a connection Redis closed while it sat in the
	// pool.
	if opts.MaxRetries == 0 {
		opts.MaxRetries = 1
	}
	if opts.DialerRetries == 0 {
		opts.DialerRetries = 2
	}
	client := redis.NewClient(opts)
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := client.Ping(pingCtx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("reach redis: %w", err)
	}
	return client, nil
}

// Keys builds prefixed key names.
type Keys struct {
	Prefix string
}

// Key joins parts with ":" after the prefix: Keys{"parley:"}.Key("rl", id).
func (k Keys) Key(parts ...string) string {
	return k.Prefix + strings.Join(parts, ":")
}

// LuaNowMS starts a script with "now", Redis's clock in milliseconds, so
// that leases and claims taken by every instance are timed by one clock,
// whatever the hosts' clocks say.
const LuaNowMS = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`
