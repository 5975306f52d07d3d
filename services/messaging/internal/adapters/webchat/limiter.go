package webchat

import (
	"sync"
	"time"
)

// Limiter allows a number of events per key within a fixed window, counted
// in this process's memory: a simple guard against a visitor flooding a
// conversation. With several instances a visitor may get up to that many
// per instance, which is fine for its purpose.
type Limiter struct {
	limit  int
	window time.Duration
	now    func() time.Time

	mu        sync.Mutex
	windows   map[string]*fixedWindow
	lastSweep time.Time
}

type fixedWindow struct {
	start time.Time
	count int
}

// NewLimiter allows limit events per key per window.
func NewLimiter(limit int, window time.Duration) *Limiter {
	return &Limiter{limit: limit, window: window, now: time.Now, windows: map[string]*fixedWindow{}}
}

// Allow counts one event for key; when the key is over its limit it
// returns false and how long until its window ends.
func (l *Limiter) Allow(key string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	w, ok := l.windows[key]
	if !ok || now.Sub(w.start) >= l.window {
		w = &fixedWindow{start: now}
		l.windows[key] = w
	}
	if w.count >= l.limit {
		return false, w.start.Add(l.window).Sub(now)
	}
	w.count++
	return true, 0
}

// sweep forgets ended windows, at most once per window, so the map holds
// only the keys active lately.
func (l *Limiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < l.window {
		return
	}
	l.lastSweep = now
	for k, w := range l.windows {
		if now.Sub(w.start) >= l.window {
			delete(l.windows, k)
		}
	}
}
