package receiver

import (
	"sync"
	"sync/atomic"
	"time"
)

// Gate holds a server's answers while a test keeps requests in flight:
// from Hold to Release, each request that Enters waits (30 s at the
// most, never to hang a test). The zero Gate holds nothing.
type Gate struct {
	waiting atomic.Int32

	mu    sync.Mutex
	gate  chan struct{} // non-nil while answers are held
	holds int
}

// Hold keeps every request that enters from now on waiting for Release,
// and returns the hold's number (counted from 1).
func (g *Gate) Hold() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate == nil {
		g.gate = make(chan struct{})
		g.holds++
	}
	return g.holds
}

// Release lets the held requests go and stops holding.
func (g *Gate) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
}

// Waiting is how many requests are held right now.
func (g *Gate) Waiting() int { return int(g.waiting.Load()) }

// Enter is a request's arrival: it returns the hold under way (0 when
// none) and wait, which returns once that hold is released (at once
// when there is none). The request is answered after wait.
func (g *Gate) Enter() (hold int, wait func()) {
	g.mu.Lock()
	gate, hold := g.gate, g.holds
	g.mu.Unlock()
	if gate == nil {
		return 0, func() {}
	}
	return hold, func() {
		g.waiting.Add(1)
		defer g.waiting.Add(-1)
		select {
		case <-gate:
		case <-time.After(30 * time.Second):
		}
	}
}
