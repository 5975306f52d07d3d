// Package config is the webhook dispatcher's configuration, read from the
// environment with the documented defaults (docs/operations.md
// "webhook-dispatcher").
package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/parleyhq/parley/pkg/config"
)

// Config is every setting of the dispatcher.
type Config struct {
	config.Connections

	// Addr serves /healthz, /readyz and /metrics.
	Addr string `env:"DISPATCHER_ADDR" envDefault:":8082"`

	// AllowPrivateTargets lets webhooks use plain http and reach loopback and
	// private addresses; for local development and tests only.
	AllowPrivateTargets bool `env:"WEBHOOK_ALLOW_PRIVATE_TARGETS" envDefault:"false"`
	// RetryDelays are the waits before the second, third, ... attempt; their
	// count plus one is the number of attempts per delivery.
	RetryDelays []time.Duration `env:"WEBHOOK_RETRY_DELAYS" envDefault:"500ms,1s,2s" envSeparator:","`
	// AttemptTimeout cuts one attempt: connect, send and read the answer.
	AttemptTimeout time.Duration `env:"WEBHOOK_ATTEMPT_TIMEOUT" envDefault:"10s"`
	// PauseAfter consecutive failed deliveries pause a webhook.
	PauseAfter int `env:"WEBHOOK_PAUSE_AFTER" envDefault:"20"`
	// DeliveryRetention is how long the delivery log keeps an entry.
	DeliveryRetention time.Duration `env:"DELIVERY_RETENTION" envDefault:"336h"`

	// Consumer names the durable JetStream consumer every instance shares.
	Consumer string `env:"DISPATCHER_CONSUMER" envDefault:"webhook-dispatcher"`
	// Concurrency bounds the HTTP attempts of live deliveries in flight
	// on one instance. A delivery waiting between attempts, or for a
	// place, holds none.
	Concurrency int `env:"DISPATCHER_CONCURRENCY" envDefault:"64"`
	// InHand bounds the events one instance holds at once: sending,
	// waiting between attempts or waiting for a place. A waiting event
	// costs a goroutine and its payload (a few KB); the consumer hands out
	// at most 8192 unacknowledged events across all instances anyway.
	InHand int `env:"DISPATCHER_IN_HAND" envDefault:"4096"`
	// WebhookConcurrency bounds one webhook's attempts in flight on one
	// instance, live and replayed together: its share of Concurrency, so
	// a slow or hanging receiver holds no more than that.
	WebhookConcurrency int `env:"DISPATCHER_WEBHOOK_CONCURRENCY" envDefault:"8"`
	// CircuitAfter attempts of one webhook in a row that got no answer (a
	// timeout or a transport error) open its circuit on this instance:
	// its attempts are then recorded as failed without being sent for
	// CircuitCoolDown, after which one probe is sent. 0 turns it off.
	CircuitAfter    int           `env:"DISPATCHER_CIRCUIT_AFTER" envDefault:"5"`
	CircuitCoolDown time.Duration `env:"DISPATCHER_CIRCUIT_COOLDOWN" envDefault:"10s"`
	// ReplayConcurrency bounds the replayed deliveries one instance works
	// on at once, beside (not out of) Concurrency, so a large replay
	// cannot hold up live events.
	ReplayConcurrency int `env:"DISPATCHER_REPLAY_CONCURRENCY" envDefault:"8"`
	// MetricsInterval is how often the sampled gauges (consumer lag,
	// paused webhooks) are read.
	MetricsInterval time.Duration `env:"DISPATCHER_METRICS_INTERVAL" envDefault:"15s"`
}

// MaxRetries bounds WEBHOOK_RETRY_DELAYS, so a typo cannot keep a delivery
// (and its JetStream message) busy for hours.
const MaxRetries = 10

// Validate checks the settings at start, so a bad value fails fast.
func (c Config) Validate() error {
	if err := c.Connections.Validate(); err != nil {
		return err
	}
	if err := config.CheckListenAddr("DISPATCHER_ADDR", c.Addr); err != nil {
		return err
	}
	if len(c.RetryDelays) > MaxRetries {
		return fmt.Errorf("WEBHOOK_RETRY_DELAYS: at most %d delays, got %d", MaxRetries, len(c.RetryDelays))
	}
	for _, d := range c.RetryDelays {
		if d < 0 || d > time.Hour {
			return fmt.Errorf("WEBHOOK_RETRY_DELAYS: %s is not between 0 and 1h", d)
		}
	}
	if c.AttemptTimeout <= 0 || c.AttemptTimeout > 5*time.Minute {
		return fmt.Errorf("WEBHOOK_ATTEMPT_TIMEOUT: %s is not between 0 and 5m", c.AttemptTimeout)
	}
	if c.PauseAfter < 1 {
		return fmt.Errorf("WEBHOOK_PAUSE_AFTER: must be at least 1, got %d", c.PauseAfter)
	}
	if c.DeliveryRetention <= 0 {
		return fmt.Errorf("DELIVERY_RETENTION: must be positive, got %s", c.DeliveryRetention)
	}
	if c.Consumer == "" || strings.ContainsAny(c.Consumer, " .*>\t") {
		return fmt.Errorf("DISPATCHER_CONSUMER: %q is not a valid consumer name", c.Consumer)
	}
	if c.Concurrency < 1 || c.Concurrency > 4096 {
		return fmt.Errorf("DISPATCHER_CONCURRENCY: must be between 1 and 4096, got %d", c.Concurrency)
	}
	if c.InHand < c.Concurrency || c.InHand > 65536 {
		return fmt.Errorf("DISPATCHER_IN_HAND: must be between DISPATCHER_CONCURRENCY (%d) and 65536, got %d", c.Concurrency, c.InHand)
	}
	if c.WebhookConcurrency < 1 || c.WebhookConcurrency > c.Concurrency {
		return fmt.Errorf("DISPATCHER_WEBHOOK_CONCURRENCY: must be between 1 and DISPATCHER_CONCURRENCY (%d), got %d", c.Concurrency, c.WebhookConcurrency)
	}
	if c.CircuitAfter < 0 || c.CircuitAfter > 1000 {
		return fmt.Errorf("DISPATCHER_CIRCUIT_AFTER: must be between 0 (off) and 1000, got %d", c.CircuitAfter)
	}
	if c.CircuitCoolDown < 10*time.Millisecond || c.CircuitCoolDown > time.Hour {
		return fmt.Errorf("DISPATCHER_CIRCUIT_COOLDOWN: %s is not between 10ms and 1h", c.CircuitCoolDown)
	}
	if c.ReplayConcurrency < 1 || c.ReplayConcurrency > 4096 {
		return fmt.Errorf("DISPATCHER_REPLAY_CONCURRENCY: must be between 1 and 4096, got %d", c.ReplayConcurrency)
	}
	if c.MetricsInterval < 10*time.Millisecond || c.MetricsInterval > time.Hour {
		return fmt.Errorf("DISPATCHER_METRICS_INTERVAL: %s is not between 10ms and 1h", c.MetricsInterval)
	}
	return nil
}
