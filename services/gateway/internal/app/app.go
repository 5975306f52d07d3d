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

// Option changes a default of New (tests use them for a fixed clock).
type Option func(*App)

// WithClock replaces time.Now.
func WithClock(now func() time.Time) Option { return func(a *App) { a.now = now } }

// New returns the use cases.
func New(workspaces account.WorkspaceStore, keys account.KeyStore, channels account.ChannelDirectory, defaultRatePerMinute int, opts ...Option) *App {
	a := &App{
		workspaces:  workspaces,
		keys:        keys,
		channels:    channels,
		defaultRate: defaultRatePerMinute,
		// Postgres keeps microseconds; a time answered at creation must equal
		// the one read back later.
		now:    func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
		random: rand.Reader,
		// Version 7 ids are time-ordered, which keeps the primary-key
		// indexes compact.
		newID: func() string { return uuid.Must(uuid.NewV7()).String() },
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

// DefaultRatePerMinute is the limit of workspaces without their own.
func (a *App) DefaultRatePerMinute() int { return a.defaultRate }
