package app

import (
	"context"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/outbox"
)

// RelayDeps are the relay's store, stream and settings.
type RelayDeps struct {
	// Store holds the outbox; Publisher is the stream it is relayed to.
	Store     outbox.Store
	Publisher outbox.Publisher
	// Observer is told what the relay did (nil: nothing is).
	Observer Observer
	// Clock schedules the pruning and the backlog's counts; time.Now when
	// nil.
	Clock func() time.Time

	// Poll is how often the relay looks for unpublished events without
	// being kicked (1 s when zero).
	Poll time.Duration
	// Retention is how long published events are kept before pruning
	// (24 h when zero).
	Retention time.Duration
	// PublishTimeout bounds the wait for the stream's acks of one batch
	// (5 s when zero).
	PublishTimeout time.Duration
	// Batch is how many events one transaction takes (100 when zero).
	Batch int
	// MinBackoff and MaxBackoff bound the wait after a failed pass (100 ms
	// and 5 s when zero).
	MinBackoff, MaxBackoff time.Duration
	// PruneEvery spaces the pruning passes: published events, and the rows
	// of each of Prune (10 min when zero).
	PruneEvery time.Duration
	// Prune are other tables the same periodic job keeps short (the ingress
	// dedupe receipts).
	Prune []PruneTask
}

// PruneTask is a table the relay's periodic job prunes: rows older than
// now minus Retention are deleted by Prune.
type PruneTask struct {
	// Name says what is pruned, in logs.
	Name      string
	Retention time.Duration
	// Prune deletes the rows older than cutoff and returns how many.
	Prune func(ctx context.Context, cutoff time.Time) (int64, error)
}

func (c RelayDeps) withDefaults() RelayDeps {
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	if c.Retention <= 0 {
		c.Retention = 24 * time.Hour
	}
	if c.PublishTimeout <= 0 {
		c.PublishTimeout = 5 * time.Second
	}
	if c.Batch <= 0 {
		c.Batch = 100
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = 5 * time.Second
	}
	if c.PruneEvery <= 0 {
		c.PruneEvery = 10 * time.Minute
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	c.Observer = observerOr(c.Observer)
	return c
}

// Relay publishes outbox events to the stream: right after a commit that
// wrote one (Kick), and on a poll for those a crash or an outage left
// behind. On failure it keeps the events and retries with backoff; the
// event id as Nats-Msg-Id makes a repeated publish harmless.
type Relay struct {
	cfg  RelayDeps
	kick chan struct{}
	// backlogAt is when the backlog gauge was last counted (Run's
	// goroutine only).
	backlogAt time.Time
}

// NewRelay returns a relay from d.Store to d.Publisher.
func NewRelay(d RelayDeps) *Relay {
	return &Relay{cfg: d.withDefaults(), kick: make(chan struct{}, 1)}
}

// Kick asks for a pass now; it never blocks, and kicks during a pass are
// merged into one more pass.
func (r *Relay) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run relays until ctx ends. A pass under way when ctx ends finishes its
// current event first.
func (r *Relay) Run(ctx context.Context) {
	poll := time.NewTicker(r.cfg.Poll)
	defer poll.Stop()
	var backoff time.Duration
	var lastPrune time.Time
	failing := false
	for {
		err := r.drain(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			r.cfg.Observer.OutboxPassFailed()
			if !failing {
				r.cfg.Observer.OutboxFailing(err)
				failing = true
			}
			backoff = min(max(2*backoff, r.cfg.MinBackoff), r.cfg.MaxBackoff)
			r.updateBacklog(ctx)
			// Kicks are not waited on here: while NATS is down they would
			// only turn the backoff into a busy loop.
			if !sleep(ctx, backoff) {
				return
			}
			continue
		}
		if failing {
			r.cfg.Observer.OutboxRecovered()
			failing = false
		}
		backoff = 0
		if now := r.cfg.Clock(); now.Sub(lastPrune) >= r.cfg.PruneEvery {
			r.prune(ctx, now)
			lastPrune = now
		}
		r.updateBacklog(ctx)
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-poll.C:
		}
	}
}

// drain publishes batches until the outbox is empty or a pass fails.
func (r *Relay) drain(ctx context.Context) error {
	// The transaction outlives a cancelled ctx so that what was published
	// is also marked; each publish is bounded by PublishTimeout.
	work := context.WithoutCancel(ctx)
	for ctx.Err() == nil {
		n, err := r.cfg.Store.PublishPending(work, r.cfg.Batch, r.publish)
		r.cfg.Observer.OutboxPublished(n)
		if err != nil {
			return err
		}
		if n < r.cfg.Batch {
			return nil
		}
	}
	return nil
}

func (r *Relay) publish(ctx context.Context, events []outbox.Event) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	defer cancel()
	return r.cfg.Publisher.PublishBatch(ctx, events)
}

// prune deletes published events past their retention, then the rows of
// every other task past theirs. A failure is logged and retried on the next
// pass; it does not hold up the others.
func (r *Relay) prune(ctx context.Context, now time.Time) {
	if n, err := r.cfg.Store.Prune(ctx, now.Add(-r.cfg.Retention)); err != nil {
		r.cfg.Observer.OutboxPruneFailed(err)
	} else {
		r.cfg.Observer.OutboxPruned(n)
	}
	for _, t := range r.cfg.Prune {
		n, err := t.Prune(ctx, now.Add(-t.Retention))
		if err != nil {
			r.cfg.Observer.TablePruneFailed(t.Name, err)
			continue
		}
		if n > 0 {
			r.cfg.Observer.TablePruned(t.Name, n)
		}
	}
}

// updateBacklog counts the unpublished events for the gauge, at most once
// a poll interval: passes come as often as events are written, and a count
// of a long backlog on each would cost more than the publishing.
func (r *Relay) updateBacklog(ctx context.Context) {
	now := r.cfg.Clock()
	if now.Sub(r.backlogAt) < r.cfg.Poll {
		return
	}
	r.backlogAt = now
	n, err := r.cfg.Store.Backlog(ctx)
	if err != nil {
		// The gauge keeps its last value; the failing pass is observed.
		return
	}
	r.cfg.Observer.OutboxBacklog(n)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
