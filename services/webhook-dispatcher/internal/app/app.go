// Package app holds the dispatcher's use cases: managing a workspace's
// webhook, sending test events, delivering customer events with retries and
// the pause rule (each attempt within its webhook's share of the instance
// and past its circuit: domain/isolation), and keeping the delivery log.
// One file per verb.
package app

import (
	"time"

	"github.com/parleyhq/parley/pkg/safehttp"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/isolation"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/replay"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// Policy is the delivery policy (WEBHOOK_* and DELIVERY_RETENTION) and
// how an instance shares its capacity between receivers.
type Policy struct {
	AllowPrivateTargets bool
	RetryDelays         []time.Duration
	AttemptTimeout      time.Duration
	PauseAfter          int
	Retention           time.Duration

	// Concurrency and ReplayConcurrency bound the attempts in flight on
	// the instance, of live deliveries and of replays; WebhookConcurrency
	// bounds one webhook's, live and replayed together. 0: no bound.
	Concurrency        int
	ReplayConcurrency  int
	WebhookConcurrency int
	// Circuit is the breaker of every webhook; the zero value is off.
	Circuit isolation.Policy
	// PendingAfter is how long a delivery taken on for the first time may
	// be under way (waiting for a place, its first attempt in flight)
	// before the log shows it pending; 0 is DefaultPendingAfter. A
	// delivery settled sooner is written once, with its outcome.
	PendingAfter time.Duration
}

func (c Policy) pendingAfter() time.Duration {
	if c.PendingAfter > 0 {
		return c.PendingAfter
	}
	return DefaultPendingAfter
}

// MaxAttempts is how many attempts one round of a delivery makes.
func (c Policy) MaxAttempts() int { return len(c.RetryDelays) + 1 }

// Schedule is the longest one round of attempts can take: every attempt
// timing out, with every delay between them.
func (c Policy) Schedule() time.Duration {
	total := time.Duration(c.MaxAttempts()) * c.AttemptTimeout
	for _, d := range c.RetryDelays {
		total += d
	}
	return total
}

// KeepAliveEvery is how often a delivery waiting for a place calls its
// keepAlive. Half a round: the consumer's ack wait is a round plus a
// margin, and a first attempt that skips its extension (events.Config
// Fresh) still has a whole round of it ahead.
func (c Policy) KeepAliveEvery() time.Duration { return c.Schedule() / 2 }

// Observer is told what happens in the use cases, for the metrics and
// the logs (adapters/observe); each method is named for what happened.
type Observer interface {
	// AttemptSent is told about every attempt of d sent: at ended with
	// the receiver's answer, a timeout or a transport error.
	AttemptSent(d *delivery.Delivery, at delivery.Attempt)
	// AttemptNotSent is told about an attempt of d an open circuit
	// refused: at is recorded as failed without being sent.
	AttemptNotSent(d *delivery.Delivery, at delivery.Attempt)
	// CircuitOpened is told each time a webhook's circuit opens (again).
	CircuitOpened(c CircuitOpening)
	// ProgressNotStored is told when d's attempts so far could not be
	// stored between attempts (its outcome is stored at the end anyway).
	ProgressNotStored(d *delivery.Delivery, err error)
	// DeliveryFinished is told about every delivery whose outcome was
	// stored: delivered, failed or skipped.
	DeliveryFinished(event string, status delivery.Status)
	// DeliverySkipped is told about an event recorded as skipped, not
	// sent, because its webhook is paused.
	DeliverySkipped(d *delivery.Delivery)
	// WebhookPaused is told when the pause rule pauses a workspace's
	// webhook after pauseAfter failed deliveries in a row.
	WebhookPaused(workspaceID string, pauseAfter int)
	// DeliveryLogPurged is told how many deliveries a retention pass
	// deleted, when it deleted any; PurgeFailed when it failed.
	DeliveryLogPurged(deleted int64)
	PurgeFailed(err error)
	// ReplayQueued is told what one call of a replay of a period queued.
	ReplayQueued(r *replay.Replay)
	// DeliveryReplayQueued is told about the replay of one delivery,
	// queued with its event's stream sequence seq.
	DeliveryReplayQueued(r *replay.Replay, seq uint64)
	// ReplayDropped is told about a replayed event of a workspace that
	// has no webhook any more: nothing is sent or recorded.
	ReplayDropped(deliveryID, workspaceID string)
	// ReplayNotSent is told about a replayed event not sent because the
	// webhook was paused since the replay was queued.
	ReplayNotSent(d *delivery.Delivery)
}

// CircuitOpening is a webhook's circuit opening: the workspace and webhook,
// whether the attempt that opened it was a half-open circuit's probe, that
// attempt's error, and how long the circuit stays open.
type CircuitOpening struct {
	WorkspaceID string
	WebhookID   string
	Probe       bool
	LastError   string
	CoolDown    time.Duration
}

// Deps are what the use cases work with.
type Deps struct {
	// Policy is how deliveries are made and how the instance shares its
	// capacity.
	Policy     Policy
	Webhooks   webhook.Store
	Deliveries delivery.Store
	Sender     delivery.Sender
	// Resolver checks a saved URL's host at save time; nil skips that
	// (every dial is checked anyway).
	Resolver safehttp.Resolver
	// Observer is told what happens; nil: nobody.
	Observer Observer
	// Clock is time.Now unless a test needs another.
	Clock func() time.Time
}

// App runs the use cases.
type App struct {
	cfg        Policy
	webhooks   webhook.Store
	deliveries delivery.Store
	sender     delivery.Sender
	resolver   safehttp.Resolver
	obs        Observer
	clock      func() time.Time

	// live and replay are the lanes of one gate (so a webhook's live
	// deliveries and replays share its places); circuits are read on a
	// clock of their own, since Deps.Clock may be a test's.
	gate         *isolation.Gate
	live, replay *isolation.Lane
	circuits     *isolation.Circuits
}

// New returns the use cases over deps.
func New(deps Deps) *App {
	cfg := deps.Policy
	a := &App{
		cfg:        cfg,
		webhooks:   deps.Webhooks,
		deliveries: deps.Deliveries,
		sender:     deps.Sender,
		resolver:   deps.Resolver,
		obs:        deps.Observer,
		clock:      deps.Clock,
	}
	if a.clock == nil {
		a.clock = time.Now
	}
	a.gate = isolation.NewGate(cfg.WebhookConcurrency)
	a.live, a.replay = a.gate.Lane(cfg.Concurrency), a.gate.Lane(cfg.ReplayConcurrency)
	a.circuits = isolation.NewCircuits(cfg.Circuit, time.Now)
	if a.obs == nil {
		a.obs = nopObserver{}
	}
	return a
}

// now is the clock in UTC at the precision PostgreSQL keeps, so what a use
// case returns equals what a later read returns.
func (a *App) now() time.Time { return a.clock().UTC().Truncate(time.Microsecond) }

// Capacity is what the instance's places and circuits hold right now.
type Capacity struct {
	// InFlight and ReplayInFlight are attempts holding a place, of live
	// deliveries and of replays: sent and not yet answered.
	InFlight, ReplayInFlight int
	// WaitingForWebhook is attempts waiting for a place of their webhook;
	// WaitingForInstance those holding it and waiting for a slot of the
	// instance.
	WaitingForWebhook, WaitingForInstance int
	// OpenCircuits is webhooks whose circuit is open or half-open.
	OpenCircuits int
}

// Capacity reads the places and circuits (metrics).
func (a *App) Capacity() Capacity {
	return Capacity{
		InFlight:           a.live.InFlight(),
		ReplayInFlight:     a.replay.InFlight(),
		WaitingForWebhook:  a.gate.Waiting(),
		WaitingForInstance: a.live.Waiting() + a.replay.Waiting(),
		OpenCircuits:       a.circuits.NotClosed(),
	}
}

type nopObserver struct{}

func (nopObserver) AttemptSent(*delivery.Delivery, delivery.Attempt)    {}
func (nopObserver) AttemptNotSent(*delivery.Delivery, delivery.Attempt) {}
func (nopObserver) CircuitOpened(CircuitOpening)                        {}
func (nopObserver) ProgressNotStored(*delivery.Delivery, error)         {}
func (nopObserver) DeliveryFinished(string, delivery.Status)            {}
func (nopObserver) DeliverySkipped(*delivery.Delivery)                  {}
func (nopObserver) WebhookPaused(string, int)                           {}
func (nopObserver) DeliveryLogPurged(int64)                             {}
func (nopObserver) PurgeFailed(error)                                   {}
func (nopObserver) ReplayQueued(*replay.Replay)                         {}
func (nopObserver) DeliveryReplayQueued(*replay.Replay, uint64)         {}
func (nopObserver) ReplayDropped(string, string)                        {}
func (nopObserver) ReplayNotSent(*delivery.Delivery)                    {}
