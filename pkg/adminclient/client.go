// Package adminclient is the one typed client of the services' operator
// calls: the admin endpoints of the gateway, messaging, the webhook
// dispatcher and the flow-runner, and the few API endpoints an operator
// reads as a workspace (the delivery log, a flow's list and a run's trace),
// all over NATS through pkg/rpc. parleyctl and the operator console both
// call the services through it, never through another service's tables.
//
// Request and response structs carry the services' JSON field names as
// they answer them. Times stay the strings the services send (RFC 3339,
// UTC), so that what is shown is what was answered. Every answer outside
// 2xx is an *Error carrying its status, code and message.
package adminclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/parleyhq/parley/pkg/errs"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/rpc"
)

// Caller sends one request to a service endpoint and decodes a 2xx JSON
// answer into out (nil to ignore it); any other answer is an *errs.Error.
// *rpc.Client implements it; tests give a fake.
type Caller interface {
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

// request is one call to a service endpoint.
type request struct {
	service  string
	endpoint string
	// workspaceID and features say whom an API endpoint answers, as the
	// gateway would have authenticated them; admin endpoints take none.
	workspaceID string
	features    []string
	method      string
	path        string
	query       url.Values
	// body is encoded as JSON unless it is nil; raw goes as is.
	body any
	raw  []byte
}

// do sends r and decodes a 2xx answer into out.
func (c *Client) do(ctx context.Context, r request, out any) error {
	req := &rpcv1.Request{
		WorkspaceId: r.workspaceID,
		Features:    r.features,
		Method:      r.method,
		Path:        r.path,
		Body:        r.raw,
	}
	if len(r.query) > 0 {
		req.RawQuery = r.query.Encode()
	}
	if r.body != nil {
		body, err := json.Marshal(r.body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		req.Body = body
	}
	return c.call.CallRaw(ctx, r.service, r.endpoint, req, out)
}

// admin calls a service's admin endpoint.
func (c *Client) admin(ctx context.Context, service, method, path string, body, out any) error {
	return c.do(ctx, request{service: service, endpoint: rpc.EndpointAdmin, method: method, path: path, body: body}, out)
}

// get is admin for a GET with a query.
func (c *Client) get(ctx context.Context, service, path string, query url.Values, out any) error {
	return c.do(ctx, request{service: service, endpoint: rpc.EndpointAdmin, method: http.MethodGet, path: path, query: query}, out)
}

// segment escapes an id for a path.
func segment(id string) string { return url.PathEscape(id) }
