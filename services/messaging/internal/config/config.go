// Package config is the messaging service's configuration, read from the
// environment (ARCHITECTURE.md §6).
package config

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/parleyhq/parley/pkg/config"
)

// Config is every setting of the messaging service.
type Config struct {
	config.Connections

	// Addr is where platform ingress and the probes listen.
	Addr string `env:"MESSAGING_ADDR" envDefault:":8081"`
	// TelegramAPIBase is the Bot API's address; tests point it at a fake.
	TelegramAPIBase string `env:"TELEGRAM_API_BASE" envDefault:"https://api.telegram.org"`
	// PlatformTimeout bounds one call to a platform's API.
	PlatformTimeout time.Duration `env:"PLATFORM_TIMEOUT" envDefault:"15s"`

	// OutboxPollInterval is how often the relay looks for events left
	// unpublished (after a crash or a NATS outage); it is also woken right
	// after each commit that writes one.
	OutboxPollInterval time.Duration `env:"OUTBOX_POLL_INTERVAL" envDefault:"1s"`
	// OutboxRetention is how long published events stay in the outbox.
	OutboxRetention time.Duration `env:"OUTBOX_RETENTION" envDefault:"24h"`
	// OutboxPublishTimeout bounds the wait for the stream's ack of one
	// event; past it the event is retried (its Nats-Msg-Id keeps the stream
	// from storing it twice).
	OutboxPublishTimeout time.Duration `env:"OUTBOX_PUBLISH_TIMEOUT" envDefault:"5s"`
}

// Validate checks the settings at start.
func (c Config) Validate() error {
	if err := c.Connections.Validate(); err != nil {
		return err
	}
	if c.Addr == "" {
		return errors.New("MESSAGING_ADDR: must not be empty")
	}
	if u, err := url.Parse(c.TelegramAPIBase); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("TELEGRAM_API_BASE: %q is not an http(s) URL", c.TelegramAPIBase)
	}
	for name, d := range map[string]time.Duration{
		"PLATFORM_TIMEOUT":       c.PlatformTimeout,
		"OUTBOX_POLL_INTERVAL":   c.OutboxPollInterval,
		"OUTBOX_RETENTION":       c.OutboxRetention,
		"OUTBOX_PUBLISH_TIMEOUT": c.OutboxPublishTimeout,
	} {
		if d <= 0 {
			return fmt.Errorf("%s: must be positive, got %s", name, d)
		}
	}
	return nil
}
