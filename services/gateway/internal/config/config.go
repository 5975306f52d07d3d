// Package config is the gateway's configuration, read from the environment
// (docs/operations.md "Configuration").
package config

import (
	"fmt"
	"time"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/httpx"
)

// Config is everything the gateway reads at start.
type Config struct {
	config.Connections
	// Proxying is TRUSTED_PROXIES, for the client address the per-address
	// limits count.
	httpx.Proxying

	// Addr is where the public API (/v1, /api/v1) and the probes listen.
	Addr string `env:"GATEWAY_ADDR" envDefault:":8080"`
	// RatePerMinute is the API request limit of a workspace that has none
	// of its own.
	RatePerMinute int `env:"RATE_LIMIT_PER_MINUTE" envDefault:"120"`
	// AuthFailuresPerMinute is how many failed authentications (401s) one
	// client address may have per minute before its requests are refused
	// (429) without a key lookup.
	AuthFailuresPerMinute int `env:"AUTH_FAILURES_PER_MINUTE" envDefault:"30"`
	// SSEWriteTimeout bounds each write of a relayed stream (a flow run's
	// events) to its client: one that stops reading is cut, and its run
	// stops and is stored failed.
	SSEWriteTimeout time.Duration `env:"SSE_WRITE_TIMEOUT" envDefault:"30s"`
}

// Validate checks the settings.
func (c Config) Validate() error {
	if err := c.Connections.Validate(); err != nil {
		return err
	}
	if err := config.CheckListenAddr("GATEWAY_ADDR", c.Addr); err != nil {
		return err
	}
	if c.RatePerMinute < 1 {
		return fmt.Errorf("RATE_LIMIT_PER_MINUTE: %d must be at least 1", c.RatePerMinute)
	}
	if c.AuthFailuresPerMinute < 1 {
		return fmt.Errorf("AUTH_FAILURES_PER_MINUTE: %d must be at least 1", c.AuthFailuresPerMinute)
	}
	if c.SSEWriteTimeout <= 0 {
		return fmt.Errorf("SSE_WRITE_TIMEOUT: %s must be positive", c.SSEWriteTimeout)
	}
	if err := c.Proxying.Validate(); err != nil {
		return err
	}
	return nil
}
