// Package config is the console's configuration, read from the environment.
package config

import (
	"fmt"
	"time"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/httpx"
)

// Config is everything the console reads at start.
type Config struct {
	config.Connections
	// Proxying is TRUSTED_PROXIES, for the client address the per-address
	// limits count.
	httpx.Proxying

	// Addr is where the console's pages and the probes listen.
	Addr string `env:"CONSOLE_ADDR" envDefault:":8084"`
	// SessionTTL is how long a signed-in session lasts without use; each
	// request slides it, up to SessionMaxAge after sign-in.
	SessionTTL time.Duration `env:"CONSOLE_SESSION_TTL" envDefault:"12h"`
	// SessionMaxAge caps a session however busy it is: past it the operator
	// signs in again.
	SessionMaxAge time.Duration `env:"CONSOLE_SESSION_MAX_AGE" envDefault:"168h"`
	// LoginFailuresPerMinute is how many failed sign-ins one client address
	// may have a minute before its sign-ins are refused unheard until the
	// minute ends.
	LoginFailuresPerMinute int `env:"CONSOLE_LOGIN_FAILURES_PER_MINUTE" envDefault:"10"`
	// LoginAccountFailuresPerMinute is the same bound on one account (one
	// email, known or not), so a password is not guessed from many
	// addresses either.
	LoginAccountFailuresPerMinute int `env:"CONSOLE_LOGIN_ACCOUNT_FAILURES_PER_MINUTE" envDefault:"5"`
	// InsecureCookies sends the session cookie without Secure over plain
	// HTTP from any address, for a console tried out in docker compose:
	// the browser reaches it through a published port, so the console
	// sees the bridge's gateway, not loopback, and a Secure cookie would
	// never come back over http://. Whoever can watch that traffic can
	// take the session: never on for a console reached over a network.
	InsecureCookies bool `env:"CONSOLE_INSECURE_COOKIES" envDefault:"false"`
}

// Validate checks the settings.
func (c Config) Validate() error {
	if err := c.Connections.Validate(); err != nil {
		return err
	}
	if err := config.CheckListenAddr("CONSOLE_ADDR", c.Addr); err != nil {
		return err
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
	if c.LoginAccountFailuresPerMinute < 1 {
		return fmt.Errorf("CONSOLE_LOGIN_ACCOUNT_FAILURES_PER_MINUTE: %d must be at least 1", c.LoginAccountFailuresPerMinute)
	}
	if err := c.Proxying.Validate(); err != nil {
		return err
	}
	return nil
}
