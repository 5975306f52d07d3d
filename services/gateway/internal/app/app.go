// Package app holds the gateway's use cases, one file per verb: operators
// create and change workspaces and API keys; every API request is
// authenticated to a workspace; GET /v1/me describes it.
package app

import (
	"context"
	"crypto/rand"
	"fmt"
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
	changes    account.ChangeToken
	// credentials are the credentials of recent requests' keys.
	credentials *credentials
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
	// Changes is the accounts change token shared by every instance:
	// each change to a key or workspace rotates it before it is answered,
	// and credentials read under an earlier token are read again.
	Changes account.ChangeToken
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
		changes:     d.Changes,
		credentials: newCredentials(),
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

// announce rotates the change token after a change is stored and before
// it is answered, so that no instance authenticates with what it had read
// before. The change is stored whether or not that works; an error asks
// the caller to repeat the call, which announces it then.
func (a *App) announce(ctx context.Context) error {
	if err := a.changes.Rotate(ctx); err != nil {
		return fmt.Errorf("%w: %w", account.ErrChangesUnavailable, err)
	}
	return nil
}

// DefaultRatePerMinute is the limit of workspaces without their own.
func (a *App) DefaultRatePerMinute() int { return a.defaultRate }
