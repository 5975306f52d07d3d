// Package adminclient is the one typed client of the services' operator
// calls: the admin endpoints of the gateway, messaging, the webhook
// dispatcher and the flow-runner, and the few API endpoints an operator
// reads as a workspace (the delivery log, a flow's list and a run's trace),
// all over NATS through pkg/rpc. parleyctl and the operator console both
// call the services through it, never through another service's tables.
//
// Its methods take and return the services' own wire types, from pkg/api
// (docs/architecture.md "Wire types"): it declares no body of its own, only
// the query filters of its list calls. Times stay the strings the services
// send (RFC 3339, UTC), so that what is shown is what was answered. Every
// answer outside 2xx is an *Error carrying its status, code and message.
package adminclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/parleyhq/parley/pkg/errs"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/rpc"
)

// Caller calls a service endpoint; *rpc.Client implements it, tests give
// a fake. CallJSON sends in as JSON (nil for no body); CallRaw sends a
// request the caller built, for a body that must go byte for byte (a flow
// document) or a request that carries more than a workspace (its
// features). Both decode a 2xx answer into out (nil to ignore it) and
// return any other answer as an *errs.Error.
type Caller interface {
	CallJSON(ctx context.Context, service, endpoint, workspaceID, method, path string, in, out any) error
	CallRaw(ctx context.Context, service, endpoint string, req *rpcv1.Request, out any) error
}

// Error is the error of every refused call: Status is the HTTP status the
// service answered, Code and Message its {"code","message"} body. It is
// pkg/errs's type, the one error type of the project, so a service's
// refusal reaches the console as the service worded it.
type Error = errs.Error

// AsError reports whether err is (or wraps) a service's refusal and
// returns it.
func AsError(err error) (*Error, bool) { return errs.As(err) }

// Client calls the services' operator endpoints.
type Client struct {
	call Caller
}

// New returns a client sending its calls through call (an *rpc.Client in
// production).
func New(call Caller) *Client { return &Client{call: call} }

// admin calls a service's admin endpoint; body nil sends none.
func (c *Client) admin(ctx context.Context, service, method, path string, body, out any) error {
	return c.call.CallJSON(ctx, service, rpc.EndpointAdmin, "", method, path, body, out)
}

// get is admin for a GET with a query.
func (c *Client) get(ctx context.Context, service, path string, query url.Values, out any) error {
	return c.admin(ctx, service, http.MethodGet, withQuery(path, query), nil, out)
}

// asWorkspace calls a service's API endpoint as the workspace, as the
// gateway forwards a request it authenticated.
func (c *Client) asWorkspace(ctx context.Context, service, workspaceID, method, path string, body, out any) error {
	return c.call.CallJSON(ctx, service, rpc.EndpointAPI, workspaceID, method, path, body, out)
}

// withQuery appends query to path, when there is one.
func withQuery(path string, query url.Values) string {
	if len(query) == 0 {
		return path
	}
	return path + "?" + query.Encode()
}

// pageQuery is the query of a paged list: each filter that is set, and
// the limit when it is not 0 (the service's default).
func pageQuery(filters map[string]string, limit int) url.Values {
	query := url.Values{}
	for name, value := range filters {
		if value != "" {
			query.Set(name, value)
		}
	}
	if limit != 0 {
		query.Set("limit", strconv.Itoa(limit))
	}
	return query
}

// segment escapes an id for a path.
func segment(id string) string { return url.PathEscape(id) }
