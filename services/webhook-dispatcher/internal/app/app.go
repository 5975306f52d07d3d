// Package app holds the dispatcher's use cases: managing a workspace's
// webhook, sending test events, delivering customer events with retries and
// the pause rule, and keeping the delivery log. One file per verb.
package app

import (
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/safehttp"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// Config is the delivery policy (WEBHOOK_* and DELIVERY_RETENTION).
type Config struct {
	AllowPrivateTargets bool
	RetryDelays         []time.Duration
	AttemptTimeout      time.Duration
	PauseAfter          int
	Retention           time.Duration
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

// Observer is told about attempts and outcomes (metrics).
type Observer interface {
	AttemptFinished(a delivery.Attempt)
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

type nopObserver struct{}

func (nopObserver) AttemptFinished(delivery.Attempt)         {}
func (nopObserver) DeliveryFinished(string, delivery.Status) {}
