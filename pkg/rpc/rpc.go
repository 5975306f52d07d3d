// Package rpc carries HTTP requests between Parley processes over NATS
// request/reply (docs/architecture.md "Requests: rpc over NATS"). A
// service registers as a NATS micro
// service in a queue group, so N instances share the load, and serves each
// endpoint with an ordinary http.Handler (its echo router). The gateway and
// parleyctl are the clients. Messages are the protobufs of proto/parley/rpc.
package rpc

import (
	"context"
	"slices"
	"strings"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/ids"
)

// Endpoints every service may serve. "api" receives the public /v1 routes the
// gateway forwards after authentication; "admin" receives parleyctl's
// operator calls.
const (
	EndpointAPI   = "api"
	EndpointAdmin = "admin"
)

// Service names, which are also the queue groups.
const (
	ServiceGateway    = "gateway"
	ServiceMessaging  = "messaging"
	ServiceDispatcher = "webhook-dispatcher"
	ServiceFlowRunner = "flow-runner"
	ServiceConsole    = "console"
)

// Subject is the NATS subject of one endpoint of a service.
func Subject(prefix, service, endpoint string) string {
	return prefix + "." + service + "." + endpoint
}

type workspaceKey struct{}

// WithWorkspace stores the authenticated workspace id in ctx.
func WithWorkspace(ctx context.Context, workspaceID string) context.Context {
	return context.WithValue(ctx, workspaceKey{}, workspaceID)
}

// WorkspaceID returns the workspace the gateway authenticated, or "".
func WorkspaceID(ctx context.Context) string {
	id, _ := ctx.Value(workspaceKey{}).(string)
	return id
}

// AuthenticatedWorkspace is the workspace the gateway authenticated, as
// ids are compared (lower case), or 401 unauthorized for a request that
// carries none: it did not come through the gateway.
func AuthenticatedWorkspace(ctx context.Context) (string, error) {
	id := WorkspaceID(ctx)
	if !ids.Valid(id) {
		return "", errs.Unauthorized("request carries no authenticated workspace")
	}
	return strings.ToLower(id), nil
}

type accountKey struct{}

// account is what the gateway read of the workspace's plan when it
// authenticated the key.
type account struct {
	modules, features []string
}

// WithAccount stores the authenticated workspace's plan modules and
// switched-on features in ctx. The server does it for every request; tests
// of handlers use it to stand in for the gateway.
func WithAccount(ctx context.Context, modules, features []string) context.Context {
	return context.WithValue(ctx, accountKey{}, account{modules: modules, features: features})
}

// HasModule reports whether the workspace's plan includes the module
// ("flows", "flow_script", ...). It is false on admin calls, which carry no
// workspace.
func HasModule(ctx context.Context, name string) bool {
	a, _ := ctx.Value(accountKey{}).(account)
	return slices.Contains(a.modules, name)
}

// HasFeature reports whether the feature ("flows_api") is switched on for
// the workspace. It is false on admin calls.
func HasFeature(ctx context.Context, name string) bool {
	a, _ := ctx.Value(accountKey{}).(account)
	return slices.Contains(a.features, name)
}
