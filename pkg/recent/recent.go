// Package recent keeps values read from their owner for a short while, so
// that a hot path asks the owner at most once per key and MaxAge (a
// workspace from the gateway, a channel from its table) and takes the
// rest as it was that recently. An error is never kept: the next call
// asks again.
package recent

import (
	"sync"
	"time"
)

// forgetAbove bounds the keys kept before the outdated ones are dropped.
const forgetAbove = 4096

// Cache keeps each key's value for maxAge after it was read.
type Cache[K comparable, V any] struct {
	maxAge time.Duration
	// Now is the clock reads are timed by; time.Now unless a test sets it
	// before the first Get.
	Now func() time.Time

	mu sync.Mutex
	// generation counts Forgets: a read that began before one is not kept.
	generation uint64
	known      map[K]entry[V]
}

type entry[V any] struct {
	value V
	read  time.Time
}

// New returns a cache keeping what it reads for maxAge.
func New[K comparable, V any](maxAge time.Duration) *Cache[K, V] {
	return &Cache[K, V]{maxAge: maxAge, Now: time.Now, known: map[K]entry[V]{}}
}

// Get returns key's value as read less than maxAge ago, or reads it with
// read and keeps it when read succeeds.
func (c *Cache[K, V]) Get(key K, read func() (V, error)) (V, error) {
	now := c.Now()
	c.mu.Lock()
	e, ok := c.known[key]
	generation := c.generation
	c.mu.Unlock()
	if ok && now.Sub(e.read) < c.maxAge {
		return e.value, nil
	}
	v, err := read()
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.generation != generation {
		// Forgotten while it was read: it may predate the change.
		return v, nil
	}
	if len(c.known) >= forgetAbove {
		for k, e := range c.known {
			if now.Sub(e.read) >= c.maxAge {
				delete(c.known, k)
			}
		}
	}
	c.known[key] = entry[V]{value: v, read: now}
	return v, nil
}

// Forget drops every value kept, and any read under way when it is
// called: the next Get of each key asks its owner.
func (c *Cache[K, V]) Forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.generation++
	clear(c.known)
}
