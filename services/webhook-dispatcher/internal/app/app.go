// Package app holds the dispatcher's use cases: managing a workspace's
// webhook, sending test events, delivering customer events with retries and
// the pause rule (each attempt within its webhook's share of the instance
// and past its circuit: domain/isolation), and keeping the delivery log.
// One file per verb.
package app

import (
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/safehttp"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/isolation"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// Config is the delivery policy (WEBHOOK_* and DELIVERY_RETENTION) and
// how an instance shares its capacity between receivers.
type Config struct {
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
}

// MaxAttempts is how many attempts one round of a delivery makes.
func (c Config) MaxAttempts() int { return len(c.RetryDelays) + 1 }

// Schedule is the longest one round of attempts can take: every attempt
// timing out, with every delay between them.
func (c Config) Schedule() time.Duration {
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
func (c Config) KeepAliveEvery() time.Duration { return c.Schedule() / 2 }

// Observer is told about attempts and outcomes (metrics).
type Observer interface {
	// AttemptFinished is told about every attempt sent.
	AttemptFinished(a delivery.Attempt)
	// AttemptNotSent is told about an attempt an open circuit recorded
	// as failed without sending it.
	AttemptNotSent()
	// CircuitOpened is told each time a webhook's circuit opens (again).
	CircuitOpened()
	DeliveryFinished(event string, status delivery.Status)
}

// Deps are what the use cases work with.
type Deps struct {
	Webhooks   webhook.Store
	Deliveries delivery.Store
	Sender     delivery.Sender
	// Resolver checks a saved URL's host at save time; nil skips that
	// (every dial is checked anyway).
	Resolver safehttp.Resolver
	Observer Observer
	Log      *zap.Logger
	// Clock is time.Now unless a test needs another.
	Clock func() time.Time
}

// App runs the use cases.
type App struct {
	cfg        Config
	webhooks   webhook.Store
	deliveries delivery.Store
	sender     delivery.Sender
	resolver   safehttp.Resolver
	obs        Observer
	log        *zap.Logger
	clock      func() time.Time

	// live and replay are the lanes of one gate (so a webhook's live
	// deliveries and replays share its places); circuits are read on a
	// clock of their own, since Deps.Clock may be a test's.
	gate         *isolation.Gate
	live, replay *isolation.Lane
	circuits     *isolation.Circuits
}

// New returns the use cases over deps.
func New(cfg Config, deps Deps) *App {
	a := &App{
		cfg:        cfg,
		webhooks:   deps.Webhooks,
		deliveries: deps.Deliveries,
		sender:     deps.Sender,
		resolver:   deps.Resolver,
		obs:        deps.Observer,
		log:        deps.Log,
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
	if a.log == nil {
		a.log = zap.NewNop()
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

func (nopObserver) AttemptFinished(delivery.Attempt)         {}
func (nopObserver) AttemptNotSent()                          {}
func (nopObserver) CircuitOpened()                           {}
func (nopObserver) DeliveryFinished(string, delivery.Status) {}
