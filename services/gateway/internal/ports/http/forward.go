package http

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/errs"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// MaxBodyBytes bounds a request body of the public API, every /v1 route
// alike (docs/limits-and-errors.md "Request body limits"): it fits in one
// NATS message of
// the server's default max_payload (1 MiB) with room for the request's
// other fields, so the documented limit is the one a client meets; the
// services behind accept whatever the gateway forwards.
const MaxBodyBytes = 512 << 10

// forwardedHeaders are the only request headers a service sees. Everything
// else, Authorization and cookies above all, stays at the gateway.
var forwardedHeaders = []string{"Content-Type", "Accept", "Idempotency-Key", "User-Agent"}

// gatewayHeaders are response headers the gateway owns; a service's values
// for them are dropped. Hop-by-hop headers belong to one connection, and
// Content-Length is the gateway's: that of the body it writes. Keys are in
// canonical form ("Ratelimit-Limit"), as http.Header stores them.
var gatewayHeaders = canonicalSet(
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length",
	echo.HeaderXRequestID, ratelimit.HeaderLimit, ratelimit.HeaderRemaining, ratelimit.HeaderReset,
)

func canonicalSet(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[http.CanonicalHeaderKey(n)] = true
	}
	return m
}

// longCalls are the services whose API may work longer than rpc.CallTimeout
// in one request, and how long the gateway waits for them: a headless flow
// run has a 60 s budget (RUN_BUDGET_TIME).
var longCalls = map[string]time.Duration{rpc.ServiceFlowRunner: rpc.LongCallTimeout}

type forwarder struct {
	client     *rpc.Client
	maxPayload int64
	// writeTimeout bounds each write of a relayed stream (SSE_WRITE_TIMEOUT).
	writeTimeout time.Duration
	obs          Observer
	log          *zap.Logger
}

// forward sends the request to service's "api" endpoint, with the
// workspace it was authenticated for, and writes back its status, headers
// and body; a streamed answer (Server-Sent Events of a flow run) is relayed
// as it comes (see relay). The plan's modules and the workspace's features
// travel with it: the service decides on them (403 module_inactive, 404
// not_found) without reading the accounts schema, which it may not.
func (f *forwarder) forward(c echo.Context, service, path string, w account.Workspace) error {
	r := c.Request()
	if r.ContentLength > MaxBodyBytes {
		return httpx.TooLarge(MaxBodyBytes)
	}
	body, err := httpx.ReadBody(r.Body, MaxBodyBytes)
	if err != nil {
		return err
	}
	if err := jsonBody(r.Header.Get(echo.HeaderContentType), body); err != nil {
		return err
	}
	req := &rpcv1.Request{
		RequestId:   c.Response().Header().Get(echo.HeaderXRequestID),
		WorkspaceId: w.ID,
		Method:      r.Method,
		Path:        path,
		RawQuery:    r.URL.RawQuery,
		Body:        body,
		Modules:     make([]string, len(w.Plan.Modules)),
		Features:    w.EnabledFeatures(),
	}
	for i, m := range w.Plan.Modules {
		req.Modules[i] = string(m)
	}
	for _, name := range forwardedHeaders {
		for _, v := range r.Header.Values(name) {
			req.Headers = append(req.Headers, &rpcv1.Header{Name: name, Value: v})
		}
	}
	// NATS refuses messages over the server's max_payload (1 MB by
	// default); say so as the client's problem rather than fail inside.
	if size := int64(proto.Size(req)); f.maxPayload > 0 && size > f.maxPayload {
		return httpx.TooLarge(max(f.maxPayload-(size-int64(len(body))), 0))
	}

	// The wait bounds the answer, or a stream's head; a stream then lasts
	// while its messages come, within the service's handler timeout.
	answer := r.Context()
	if wait, ok := longCalls[service]; ok {
		var cancel context.CancelFunc
		answer, cancel = context.WithTimeout(answer, wait)
		defer cancel()
	}
	start := time.Now()
	reply, err := f.client.Open(answer, service, rpc.EndpointAPI, req)
	// A stream counts until its head: the time the service took to
	// answer, not how long its client watched.
	f.obs.Forwarded(service, time.Since(start))
	if err != nil {
		return err
	}
	// A stream not relayed to its end is cancelled, so its run stops.
	defer reply.Close()
	resp := reply.Response
	status := int(resp.GetStatus())
	if status < 200 || status > 599 {
		return errs.Internal()
	}
	h := c.Response().Header()
	for _, hd := range resp.GetHeaders() {
		name := http.CanonicalHeaderKey(hd.GetName())
		if gatewayHeaders[name] || strings.HasPrefix(name, "Proxy-") {
			continue
		}
		h.Add(name, hd.GetValue())
	}
	if reply.Streaming() {
		f.relay(c, service, status, reply)
		return nil
	}
	out := resp.GetBody()
	if len(out) > 0 && r.Method != http.MethodHead {
		// The answer is whole: said with its length, it goes out as it
		// is, where net/http would otherwise cut any body over its 2 KB
		// buffer into chunks (a page of the API is tens of KB) and end
		// it with a last write of its own.
		h.Set(echo.HeaderContentLength, strconv.Itoa(len(out)))
	}
	c.Response().WriteHeader(status)
	_, err = c.Response().Write(out)
	return err
}

// relay writes a stream's head and then each piece as it arrives, flushed
// at once, until the stream ends. The status is sent by then, so a failure
// just ends the response: the client sees an event stream stop short. When
// the client goes (its request context ends) or stops reading (a write
// fails or takes longer than writeTimeout), the caller's Close cancels the
// run. Asking the reply for the next piece tells the service the last was
// written (rpc flow control), so a client that stops reading holds the run
// within rpc.StreamWindow of what it was sent, until the write times out.
func (f *forwarder) relay(c echo.Context, service string, status int, reply *rpc.Reply) {
	res := c.Response()
	h := res.Header()
	if h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", "no-store")
	}
	if h.Get("X-Accel-Buffering") == "" {
		h.Set("X-Accel-Buffering", "no") // nginx: pass each event on at once
	}
	res.WriteHeader(status)
	// Each piece under writeTimeout: a client that stops reading is let
	// go, and the run it watched is cancelled.
	out := httpx.NewFlushWriter(res, f.writeTimeout)
	ctx := c.Request().Context()
	log := f.log.With(zap.String("service", service), zap.String("request_id", h.Get(echo.HeaderXRequestID)))
	piece := reply.Response.GetBody()
	for {
		if err := out.Write(piece); err != nil {
			log.Debug("stream client stopped reading", zap.Error(err))
			return
		}
		var err error
		piece, err = reply.Next(ctx)
		switch {
		case errors.Is(err, io.EOF):
			return
		case ctx.Err() != nil:
			log.Debug("stream client went away")
			return
		case err != nil:
			log.Warn("stream from service broken", zap.Error(err))
			return
		}
	}
}

// jsonBody refuses a body declared as another media type than JSON
// (docs/api.md "What the gateway checks, in order"): the services read
// every body as JSON, so text/plain or a form would otherwise be taken for
// it. A body without a Content-Type is read as JSON; a Content-Type
// without a body is no body at all.
func jsonBody(contentType string, body []byte) error {
	if len(body) == 0 || contentType == "" {
		return nil
	}
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil || mediaType != echo.MIMEApplicationJSON {
		return errs.InvalidRequest("Content-Type must be application/json, not %q", httpx.Clip(contentType))
	}
	return nil
}
