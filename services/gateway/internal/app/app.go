// Package app holds the gateway's use cases, one file per verb: operators
// create and change workspaces and API keys; every API request is
// authenticated to a workspace; GET /v1/me describes it.
package app

import (
	"crypto/rand"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// App is the gateway's use cases over its stores.
type App struct {
	workspaces account.WorkspaceStore
	keys       account.KeyStore
	channels   account.ChannelDirectory
	// defaultRate is RATE_LIMIT_PER_MINUTE, for workspaces without their own.
	defaultRate int
	now         func() time.Time
	random      io.Reader
	newID       func() string
}

// Deps are what New builds the use cases from.
type Deps struct {
	Workspaces account.WorkspaceStore
	Keys       account.KeyStore
	// Channels lists a workspace's channels for GET /v1/me.
	Channels account.ChannelDirectory
	// DefaultRatePerMinute is RATE_LIMIT_PER_MINUTE: the limit of a
	// workspace without its own.
	DefaultRatePerMinute int
	// Clock stamps workspaces and keys; nil is time.Now to the microsecond.
	Clock func() time.Time
}

// New returns the use cases.
func New(d Deps) *App {
	a := &App{
		workspaces:  d.Workspaces,
		keys:        d.Keys,
		channels:    d.Channels,
		defaultRate: d.DefaultRatePerMinute,
		now:         d.Clock,
		random:      rand.Reader,
		// Version 7 ids are time-ordered, which keeps the primary-key
		// indexes compact.
		newID: func() string { return uuid.Must(uuid.NewV7()).String() },
	}
	if a.now == nil {
		// Postgres keeps microseconds; a time answered at creation must
		// equal the one read back later.
		a.now = func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
	}
	return a
}

// DefaultRatePerMinute is the limit of workspaces without their own.
func (a *App) DefaultRatePerMinute() int { return a.defaultRate }
