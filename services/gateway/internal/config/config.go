// Package config is the gateway's configuration, read from the environment
// (ARCHITECTURE.md §6).
package config

import (
	"errors"
	"fmt"

	"github.com/parleyhq/parley/pkg/config"
)

// Config is everything the gateway reads at start.
type Config struct {
	config.Connections

	// Addr is where the public API (/v1, /api/v1) and the probes listen.
	Addr string `env:"GATEWAY_ADDR" envDefault:":8080"`
	// RatePerMinute is the API request limit of a workspace that has none
	// of its own.
	RatePerMinute int `env:"RATE_LIMIT_PER_MINUTE" envDefault:"120"`
}

// Validate checks the settings.
func (c Config) Validate() error {
	if err := c.Connections.Validate(); err != nil {
		return err
	}
	if c.Addr == "" {
		return errors.New("GATEWAY_ADDR: must not be empty")
	}
	if c.RatePerMinute < 1 {
		return fmt.Errorf("RATE_LIMIT_PER_MINUTE: %d must be at least 1", c.RatePerMinute)
	}
	return nil
}
