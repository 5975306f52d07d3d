// Package app holds the console's use cases: creating operators, signing
// in and out, and reading the workspaces an operator may see.
package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/pkg/adminclient"
	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/pkg/ids"
	"github.com/parleyhq/parley/services/console/internal/domain/operator"
	"github.com/parleyhq/parley/services/console/internal/domain/session"
)

// Workspaces reads workspaces from the gateway's admin endpoint;
// *adminclient.Client implements it.
type Workspaces interface {
	GetWorkspace(ctx context.Context, id string) (gatewayapi.Workspace, error)
	ListWorkspaces(ctx context.Context) ([]gatewayapi.Workspace, error)
}

// SignInLimiter counts failed sign-ins per client address and per account
// (an opaque key of the email) and says when either may try again.
type SignInLimiter interface {
	// Wait is how long until both may try again; zero when they may now.
	Wait(ctx context.Context, address, account string) (time.Duration, error)
	// Fail counts one failed sign-in against both.
	Fail(ctx context.Context, address, account string) error
}

// App is the console's use cases.
type App struct {
	operators  operator.Store
	sessions   session.Store
	workspaces Workspaces
	apiKeys    APIKeys
	channels   Channels
	flows      FlowRunner
	webhooks   Webhooks
	inbox      Inbox
	forms      Forms
	limiter    SignInLimiter
	hasher     *operator.Hasher
	policy     session.Policy
	newID      func() string
	now        func() time.Time
}

// Deps are what New builds the use cases from.
type Deps struct {
	Operators  operator.Store
	Sessions   session.Store
	Workspaces Workspaces
	APIKeys    APIKeys
	Channels   Channels
	Flows      FlowRunner
	Webhooks   Webhooks
	Inbox      Inbox
	// Forms remember the forms posted (each use case's formID), so that
	// a form posted twice does its work once; nil remembers none.
	Forms   Forms
	Limiter SignInLimiter
	Hasher  *operator.Hasher
	Policy  session.Policy
	// NewID returns a fresh row id (a UUID).
	NewID func() string
	// Clock dates sessions and operators; time.Now when nil.
	Clock func() time.Time
}

// New returns the use cases.
func New(d Deps) *App {
	now := d.Clock
	if now == nil {
		now = time.Now
	}
	return &App{operators: d.Operators, sessions: d.Sessions, workspaces: d.Workspaces, webhooks: d.Webhooks, limiter: d.Limiter,
		hasher: d.Hasher, policy: d.Policy, newID: d.NewID, now: now,
		apiKeys: d.APIKeys, channels: d.Channels,
		flows: d.Flows, inbox: d.Inbox, forms: d.Forms}
}

// ErrWorkspaceNotFound is a workspace that does not exist or that the
// operator may not see: the two are one answer, so an operator learns
// nothing of other workspaces' ids.
var ErrWorkspaceNotFound = errors.New("no such workspace")

// visible is nil when op may see workspace id, else ErrWorkspaceNotFound.
// An id that is no UUID names no workspace, so it is refused here, before
// any service is asked: each service would refuse it in its own words.
func visible(op operator.Operator, workspaceID string) error {
	if !op.Sees(workspaceID) || !IsID(workspaceID) {
		return ErrWorkspaceNotFound
	}
	return nil
}

// IsID reports whether s is an id as the services write them (ids.Valid).
func IsID(s string) bool { return ids.Valid(s) }

// Workspace returns workspace id as the gateway answers it, when op may
// see it.
func (a *App) Workspace(ctx context.Context, op operator.Operator, id string) (gatewayapi.Workspace, error) {
	if err := visible(op, id); err != nil {
		return gatewayapi.Workspace{}, err
	}
	w, err := a.workspaces.GetWorkspace(ctx, id)
	if e, ok := adminclient.AsError(err); ok && e.Status == 404 {
		return gatewayapi.Workspace{}, ErrWorkspaceNotFound
	}
	if err != nil {
		return gatewayapi.Workspace{}, fmt.Errorf("get workspace %s: %w", id, err)
	}
	return w, nil
}

// Workspaces lists the workspaces op may see: all of them for a platform
// operator, its own for a workspace operator.
func (a *App) Workspaces(ctx context.Context, op operator.Operator) ([]gatewayapi.Workspace, error) {
	if !op.Platform() {
		w, err := a.Workspace(ctx, op, op.WorkspaceID)
		if errors.Is(err, ErrWorkspaceNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return []gatewayapi.Workspace{w}, nil
	}
	ws, err := a.workspaces.ListWorkspaces(ctx)
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	return ws, nil
}
