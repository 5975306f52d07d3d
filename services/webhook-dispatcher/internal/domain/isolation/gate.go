package isolation

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Gate bounds the attempts in flight of each webhook on one instance
// (DISPATCHER_WEBHOOK_CONCURRENCY). Its Lanes add a bound for the whole
// instance; every lane shares the per-webhook bound, so a webhook's live
// deliveries and its replays together hold at most its share. Safe for
// concurrent use.
type Gate struct {
	perWebhook int

	mu     sync.Mutex
	shares map[string]*share
	// waiting counts attempts waiting for a place of their webhook.
	waiting atomic.Int64
}

// share is one webhook's places; users counts those holding or waiting
// for one, so the entry goes when nobody needs it.
type share struct {
	places chan struct{}
	users  int
}

// NewGate returns a gate letting at most perWebhook attempts of one
// webhook be in flight at once; 0 or less: no per-webhook bound.
func NewGate(perWebhook int) *Gate {
	return &Gate{perWebhook: perWebhook, shares: map[string]*share{}}
}

// Lane is a bound on the attempts in flight of one kind of work on the
// instance (live deliveries: DISPATCHER_CONCURRENCY; replays:
// DISPATCHER_REPLAY_CONCURRENCY), on top of the gate's per-webhook bound.
type Lane struct {
	gate  *Gate
	slots chan struct{} // nil: no bound
	// waiting counts attempts holding their webhook's place and waiting
	// for a slot of the lane; inFlight those holding both.
	waiting  atomic.Int64
	inFlight atomic.Int64
}

// Lane returns a lane of the gate with at most slots attempts in flight;
// 0 or less: no bound of its own.
func (g *Gate) Lane(slots int) *Lane {
	l := &Lane{gate: g}
	if slots > 0 {
		l.slots = make(chan struct{}, slots)
	}
	return l
}

// KeepAlive is told while an attempt waits for a place: every Every, Func
// is called (the consumer extends the message's ack deadline, so a long
// wait does not hand the message to another instance). Zero: no calls.
type KeepAlive struct {
	Func  func()
	Every time.Duration
}

// Acquire waits for a place for one attempt to webhook: first one of the
// webhook's own places, then a slot of the lane. Waiting for the
// webhook's place holds no slot of the lane, so a webhook that has used
// up its share keeps nobody else waiting. Acquire returns the release of
// both, to be called once the attempt is over, or ctx's error when ctx
// ends first (nothing is then held).
func (l *Lane) Acquire(ctx context.Context, webhook string, keep KeepAlive) (release func(), err error) {
	g := l.gate
	s := g.join(webhook)
	w := waiter{ctx: ctx, keep: keep}
	defer w.stop()
	if err := w.take(s.places, &g.waiting); err != nil {
		g.leave(webhook)
		return nil, err
	}
	if err := w.take(l.slots, &l.waiting); err != nil {
		give(s.places)
		g.leave(webhook)
		return nil, err
	}
	l.inFlight.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			l.inFlight.Add(-1)
			give(l.slots)
			give(s.places)
			g.leave(webhook)
		})
	}, nil
}

// InFlight is how many attempts hold a place of the lane.
func (l *Lane) InFlight() int { return int(l.inFlight.Load()) }

// Waiting is how many attempts hold their webhook's place and wait for a
// slot of the lane.
func (l *Lane) Waiting() int { return int(l.waiting.Load()) }

// Waiting is how many attempts wait for a place of their webhook, in
// every lane.
func (g *Gate) Waiting() int { return int(g.waiting.Load()) }

func (g *Gate) join(webhook string) *share {
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.shares[webhook]
	if !ok {
		s = &share{}
		if g.perWebhook > 0 {
			s.places = make(chan struct{}, g.perWebhook)
		}
		g.shares[webhook] = s
	}
	s.users++
	return s
}

func (g *Gate) leave(webhook string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.shares[webhook]
	if s.users--; s.users == 0 {
		delete(g.shares, webhook)
	}
}

// give returns a place taken from sem (nil: unbounded, nothing taken).
func give(sem chan struct{}) {
	if sem != nil {
		<-sem
	}
}

// waiter takes places for one attempt, calling the keep-alive while it
// waits; one ticker serves both waits, so the calls stay Every apart
// across them.
type waiter struct {
	ctx    context.Context
	keep   KeepAlive
	ticker *time.Ticker
}

// take takes a place of sem (nil: unbounded), waiting while there is
// none; waiting counts it meanwhile.
func (w *waiter) take(sem chan struct{}, waiting *atomic.Int64) error {
	if sem == nil {
		return nil
	}
	select {
	case sem <- struct{}{}:
		return nil
	default:
	}
	waiting.Add(1)
	defer waiting.Add(-1)
	var tick <-chan time.Time
	if w.keep.Func != nil && w.keep.Every > 0 {
		if w.ticker == nil {
			w.ticker = time.NewTicker(w.keep.Every)
		}
		tick = w.ticker.C
	}
	for {
		select {
		case sem <- struct{}{}:
			return nil
		case <-w.ctx.Done():
			return w.ctx.Err()
		case <-tick:
			w.keep.Func()
		}
	}
}

func (w *waiter) stop() {
	if w.ticker != nil {
		w.ticker.Stop()
	}
}
