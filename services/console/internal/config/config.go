// Package config is the console's configuration, read from the environment.
package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/pkg/config"
)

// Config is everything the console reads at start.
type Config struct {
	config.Connections

	// Addr is where the console's pages and the probes listen.
	Addr string `env:"CONSOLE_ADDR" envDefault:":8084"`
	// SessionTTL is how long a signed-in session lasts without use; each
	// request slides it, up to SessionMaxAge after sign-in.
	SessionTTL time.Duration `env:"CONSOLE_SESSION_TTL" envDefault:"12h"`
	// SessionMaxAge caps a session however busy it is: past it the operator
	// signs in again.
	SessionMaxAge time.Duration `env:"CONSOLE_SESSION_MAX_AGE" envDefault:"168h"`
	// LoginFailuresPerMinute is how many failed sign-ins one client address
	// may have per minute; one account gets half of it (at least 1), so a
	// password is not guessed from many addresses either.
	LoginFailuresPerMinute int `env:"CONSOLE_LOGIN_FAILURES_PER_MINUTE" envDefault:"10"`
}

// Validate checks the settings.
func (c Config) Validate() error {
	if err := c.Connections.Validate(); err != nil {
		return err
	}
	if c.Addr == "" {
		return errors.New("CONSOLE_ADDR: must not be empty")
	}
	if c.SessionTTL < time.Second {
		return fmt.Errorf("CONSOLE_SESSION_TTL: %s must be at least 1s", c.SessionTTL)
	}
	if c.SessionMaxAge < c.SessionTTL {
		return fmt.Errorf("CONSOLE_SESSION_MAX_AGE: %s must be at least CONSOLE_SESSION_TTL (%s)", c.SessionMaxAge, c.SessionTTL)
	}
	if c.LoginFailuresPerMinute < 1 {
		return fmt.Errorf("CONSOLE_LOGIN_FAILURES_PER_MINUTE: %d must be at least 1", c.LoginFailuresPerMinute)
	}
	return nil
}
