package app

import (
	"context"
	"errors"
	"sync"
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
	// Clock dates the sweep's cutoff, the pruning and the backlog's
	// counts; time.Now when nil.
	Clock func() time.Time

	// Poll is how often the sweep looks for events left unpublished (1 s
	// when zero).
	Poll time.Duration
	// SweepAge is how old an unpublished event must be before the sweep
	// publishes it (10 s when zero): younger ones are still on their way
	// through Publish.
	SweepAge time.Duration
	// PublishTimeout bounds the wait for the stream's acks of one batch
	// (5 s when zero).
	PublishTimeout time.Duration
	// Batch is how many events one publish takes (500 when zero).
	Batch int
	// Queue bounds the committed events waiting in memory to be published
	// (10,000 when zero); past it, they wait in the outbox for the sweep.
	Queue int
	// MinBackoff and MaxBackoff bound the wait after a failed sweep (100 ms
	// and 5 s when zero).
	MinBackoff, MaxBackoff time.Duration
	// PruneEvery spaces the pruning passes of Prune (10 min when zero).
	PruneEvery time.Duration
	// Prune are tables the relay's periodic job keeps short (the ingress
	// dedupe receipts, the send receipts).
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
	if c.SweepAge <= 0 {
		c.SweepAge = 10 * time.Second
	}
	if c.PublishTimeout <= 0 {
		c.PublishTimeout = 5 * time.Second
	}
	if c.Batch <= 0 {
		c.Batch = 500
	}
	if c.Queue <= 0 {
		c.Queue = 10_000
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

// Relay publishes outbox events to their streams. Events are handed to it
// right after the commit that wrote them (Publish), published with their
// ids as Nats-Msg-Id, and their rows deleted once the stream has them: a
// row is never locked or rewritten. A sweep publishes what is older than
// SweepAge, which only a crash or an outage leaves behind: killed between
// commit and publish, the event goes out with the sweep; between publish
// and delete, it goes out again and the stream's duplicate window drops
// the repeat.
type Relay struct {
	cfg  RelayDeps
	wake chan struct{}

	mu sync.Mutex
	// queued are committed events not yet published; published are ids
	// the stream acknowledged whose rows are not deleted yet (a failed
	// delete is retried with the next batch).
	queued    []outbox.Event
	published []string
	// failing is whether the last publish or sweep failed.
	failing bool

	// backlogAt is when the backlog gauge was last counted (the sweep's
	// goroutine only).
	backlogAt time.Time
}

// NewRelay returns a relay from d.Store to d.Publisher.
func NewRelay(d RelayDeps) *Relay {
	return &Relay{cfg: d.withDefaults(), wake: make(chan struct{}, 1)}
}

// Publish hands the relay events a transaction has just committed to the
// outbox, to publish now and then forget. It never blocks: past Queue
// events waiting, the new ones are left to the sweep.
func (r *Relay) Publish(events []outbox.Event) {
	if len(events) == 0 {
		return
	}
	r.mu.Lock()
	room := len(r.queued)+len(events) <= r.cfg.Queue
	if room {
		r.queued = append(r.queued, events...)
	}
	r.mu.Unlock()
	if !room {
		return
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run relays until ctx ends: the events handed to Publish as they come,
// and the sweep every Poll. The events handed over before ctx ended are
// published before it returns, each batch bounded by PublishTimeout.
func (r *Relay) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.publishCommitted(ctx)
	}()
	r.sweepEvery(ctx)
	<-done
}

// publishCommitted publishes what Publish queues, in batches: while one is
// on its way, the next gathers.
func (r *Relay) publishCommitted(ctx context.Context) {
	// What is taken from the queue is published and forgotten even when
	// ctx ends meanwhile; each publish is bounded by PublishTimeout.
	work := context.WithoutCancel(ctx)
	for {
		select {
		case <-ctx.Done():
			r.flush(work)
			return
		case <-r.wake:
			r.flush(work)
		}
	}
}

// flush publishes the queued events until none are left, deleting the
// rows of each batch the stream took. After a failed publish, the events
// not acknowledged and every one queued are dropped from memory: their rows
// wait for the sweep, rather than each batch waiting out PublishTimeout
// while the stream is away (and a shutdown with it).
func (r *Relay) flush(ctx context.Context) {
	for {
		r.mu.Lock()
		n := min(len(r.queued), r.cfg.Batch)
		batch := r.queued[:n:n]
		r.queued = r.queued[n:]
		if len(r.queued) == 0 {
			r.queued = nil
		}
		r.mu.Unlock()
		if n == 0 {
			return
		}
		accepted, err := r.publish(ctx, batch)
		r.cfg.Observer.OutboxPublished(accepted)
		if err != nil {
			r.mu.Lock()
			r.queued = nil
			r.mu.Unlock()
		}
		r.passed(accepted, errors.Join(err, r.forget(ctx, batch[:accepted])))
	}
}

// forget deletes the rows of events the stream took, with those of earlier
// batches whose delete failed. Ids past Queue are let go: their rows are
// published again by the sweep, and the stream drops the repeat.
func (r *Relay) forget(ctx context.Context, events []outbox.Event) error {
	r.mu.Lock()
	ids := r.published
	r.published = nil
	r.mu.Unlock()
	for _, e := range events {
		ids = append(ids, e.ID)
	}
	if len(ids) == 0 {
		return nil
	}
	err := r.cfg.Store.Forget(ctx, ids)
	if err != nil {
		r.mu.Lock()
		r.published = append(ids[:0:0], ids[max(0, len(ids)-r.cfg.Queue):]...)
		r.mu.Unlock()
	}
	return err
}

func (r *Relay) publish(ctx context.Context, events []outbox.Event) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	defer cancel()
	return r.cfg.Publisher.PublishBatch(ctx, events)
}

// passed tells the observer of a publish or sweep that failed, and of the
// first that publishes after a run of failures. A sweep that found nothing
// old enough tells nothing: it did not reach the stream.
func (r *Relay) passed(published int, err error) {
	if err == nil && published == 0 {
		return
	}
	r.mu.Lock()
	was := r.failing
	r.failing = err != nil
	r.mu.Unlock()
	switch {
	case err != nil:
		r.cfg.Observer.OutboxPassFailed()
		if !was {
			r.cfg.Observer.OutboxFailing(err)
		}
	case was:
		r.cfg.Observer.OutboxRecovered()
	}
}

// sweepEvery sweeps at once and then every Poll, backing off while sweeps
// fail, and runs the pruning job every PruneEvery.
func (r *Relay) sweepEvery(ctx context.Context) {
	poll := time.NewTicker(r.cfg.Poll)
	defer poll.Stop()
	var backoff time.Duration
	var lastPrune time.Time
	for {
		n, err := r.sweep(ctx)
		if ctx.Err() != nil {
			return
		}
		r.passed(n, err)
		if err != nil {
			backoff = min(max(2*backoff, r.cfg.MinBackoff), r.cfg.MaxBackoff)
			r.updateBacklog(ctx)
			if !sleep(ctx, backoff) {
				return
			}
			continue
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
		case <-poll.C:
		}
	}
}

// sweep publishes the events older than SweepAge, in batches, until none
// are left or a batch fails, and returns how many it published.
func (r *Relay) sweep(ctx context.Context) (int, error) {
	// The transaction outlives a cancelled ctx so that what was published
	// is also deleted; each publish is bounded by PublishTimeout.
	work := context.WithoutCancel(ctx)
	total := 0
	for ctx.Err() == nil {
		cutoff := r.cfg.Clock().Add(-r.cfg.SweepAge)
		n, err := r.cfg.Store.Sweep(work, cutoff, r.cfg.Batch, r.publish)
		r.cfg.Observer.OutboxPublished(n)
		total += n
		if err != nil || n < r.cfg.Batch {
			return total, err
		}
	}
	return total, nil
}

// prune deletes the rows of every task past its retention. A failure is
// logged and retried on the next pass; it does not hold up the others.
func (r *Relay) prune(ctx context.Context, now time.Time) {
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
// a poll interval.
func (r *Relay) updateBacklog(ctx context.Context) {
	now := r.cfg.Clock()
	if now.Sub(r.backlogAt) < r.cfg.Poll {
		return
	}
	r.backlogAt = now
	n, err := r.cfg.Store.Backlog(ctx)
	if err != nil {
		// The gauge keeps its last value; the failing sweep is observed.
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
