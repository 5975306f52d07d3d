// Package config is the webhook dispatcher's configuration, read from the
// environment (ARCHITECTURE.md §6) with the specification's defaults.
package config

import (
	"errors"
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
	// Concurrency bounds the deliveries one instance works on at once.
	Concurrency int `env:"DISPATCHER_CONCURRENCY" envDefault:"64"`
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
	if c.Addr == "" {
		return errors.New("DISPATCHER_ADDR: must not be empty")
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
	if c.ReplayConcurrency < 1 || c.ReplayConcurrency > 4096 {
		return fmt.Errorf("DISPATCHER_REPLAY_CONCURRENCY: must be between 1 and 4096, got %d", c.ReplayConcurrency)
	}
	if c.MetricsInterval < 10*time.Millisecond || c.MetricsInterval > time.Hour {
		return fmt.Errorf("DISPATCHER_METRICS_INTERVAL: %s is not between 10ms and 1h", c.MetricsInterval)
	}
	return nil
}
