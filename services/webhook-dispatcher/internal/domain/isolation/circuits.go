package isolation

import (
	"sync"
	"time"
)

// forgetAfter is how long a circuit nobody asks about is kept. A webhook
// that has had no attempt on this instance for this long starts afresh
// (closed) with its next one; forgetting bounds the memory of webhooks
// that were deleted, saved again, or went quiet. Only webhooks with an
// unanswered attempt get a circuit at all.
const forgetAfter = 15 * time.Minute

// Circuits holds one Breaker per webhook setup, for every attempt of one
// instance. A key names a setup, not just a webhook: saving a webhook again
// issues a new secret (and maybe a new URL), and the new setup starts with
// a closed circuit while the old one's attempts still in flight settle on
// the old circuit. Safe for concurrent use.
type Circuits struct {
	policy Policy
	clock  func() time.Time

	mu        sync.Mutex
	m         map[string]*circuit
	open      int // circuits whose state is not Closed
	lastSweep time.Time
}

type circuit struct {
	Breaker
	used time.Time
}

// NewCircuits returns closed circuits with policy, read against clock
// (time.Now in production; its readings should move forward).
func NewCircuits(policy Policy, clock func() time.Time) *Circuits {
	return &Circuits{policy: policy, clock: clock, m: map[string]*circuit{}}
}

// Check is Breaker.Check for key's circuit.
func (c *Circuits) Check(key string) *OpenError {
	if !c.policy.Enabled() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[key]
	if !ok {
		return nil
	}
	return b.Check(c.policy, c.clock())
}

// Allow is Breaker.Allow for key's circuit.
func (c *Circuits) Allow(key string) (Permit, *OpenError) {
	if !c.policy.Enabled() {
		return Permit{}, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock()
	c.sweep(now)
	b, ok := c.m[key]
	if !ok {
		// Nothing is kept for a closed circuit with nothing counted.
		return Permit{}, nil
	}
	b.used = now
	before := b.State()
	p, err := b.Allow(c.policy, now)
	c.count(before, b.State())
	return p, err
}

// Record is Breaker.Record for key's circuit.
func (c *Circuits) Record(key string, p Permit, answered bool, noAnswerErr string) (opened bool) {
	if !c.policy.Enabled() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock()
	b, ok := c.m[key]
	if !ok {
		if answered {
			return false
		}
		b = &circuit{}
		c.m[key] = b
	}
	b.used = now
	before := b.State()
	opened = b.Record(c.policy, p, answered, noAnswerErr, now)
	c.count(before, b.State())
	// A circuit closed again is kept (until swept), not dropped: permits
	// given while it was closed must still find it with their epoch.
	return opened
}

// State is key's circuit's state.
func (c *Circuits) State(key string) State {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.m[key]; ok {
		return b.State()
	}
	return Closed
}

// NotClosed is how many circuits are open or half-open.
func (c *Circuits) NotClosed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}

func (c *Circuits) count(before, after State) {
	switch {
	case before == Closed && after != Closed:
		c.open++
	case before != Closed && after == Closed:
		c.open--
	}
}

// sweep forgets, at most once per forgetAfter, the circuits not used for
// that long. A half-open circuit's probe finishes within the attempt
// timeout, far sooner, so no probe outcome is lost to it.
func (c *Circuits) sweep(now time.Time) {
	if now.Sub(c.lastSweep) < forgetAfter {
		return
	}
	c.lastSweep = now
	for key, b := range c.m {
		if now.Sub(b.used) >= forgetAfter {
			c.count(b.State(), Closed)
			delete(c.m, key)
		}
	}
}
