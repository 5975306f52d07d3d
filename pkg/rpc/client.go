package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/errs"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/natsx"
)

// CallTimeout is how long a client waits for a service's answer.
const CallTimeout = HandlerTimeout + 5*time.Second

// LongCallTimeout is how long a client waits for an endpoint served with
// WithHandlerTimeout(LongHandlerTimeout); give it as the ctx deadline.
const LongCallTimeout = LongHandlerTimeout + 5*time.Second

// ErrNotSent is in the error of a call that certainly reached no instance
// of the service: none was running (NATS answered "no responders"), NATS
// was not connected, or the request could not be published. The service
// did nothing, so the call may be made again; every other error of a call
// (no answer in time, the connection lost while waiting, an answer that
// could not be read) leaves open whether the service did its work.
var ErrNotSent = errors.New("rpc: the request reached no service")

// notSentError is a call's answer to its caller (e) when the request was
// not sent: errs.As finds e, errors.Is finds ErrNotSent.
type notSentError struct{ answer *errs.Error }

func notSent(e *errs.Error) error { return &notSentError{answer: e} }

func (e *notSentError) Error() string   { return e.answer.Error() }
func (e *notSentError) Unwrap() []error { return []error{e.answer, ErrNotSent} }

// Client calls services' endpoints. Its replies arrive on one inbox
// subscription of its own (see chunk.go), which takes replies of any size
// and streams (see stream.go).
type Client struct {
	nc      *nats.Conn
	prefix  string
	replies *replies

	// StreamKeepAlive and StreamGap; shorter in tests.
	keepAlive, streamGap time.Duration
	// ackEvery is how many bytes handed on a stream's reader acknowledges
	// at once while more is queued (half of StreamWindow); smaller in
	// tests.
	ackEvery int
}

// NewClient returns a client for services registered under prefix.
func NewClient(nc *nats.Conn, prefix string) *Client {
	return &Client{
		nc:        nc,
		prefix:    prefix,
		replies:   &replies{nc: nc, gap: ChunkGap},
		keepAlive: StreamKeepAlive,
		streamGap: StreamGap,
		ackEvery:  StreamWindow / 2,
	}
}

// Do sends req to a service endpoint and returns its whole response,
// reassembled when it came in chunks. A streamed response is read to its
// end within ctx and returned whole, as a caller that does not take streams
// gets it; use Open to relay one as it comes. It answers 503
// service_unavailable with Retry-After at once when NATS is unreachable
// (nothing is buffered while disconnected) or no instance of the service is
// running, and when the service does not answer in time.
func (c *Client) Do(ctx context.Context, service, endpoint string, req *rpcv1.Request) (*rpcv1.Response, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, CallTimeout)
		defer cancel()
	}
	reply, err := c.Open(ctx, service, endpoint, req)
	if err != nil {
		return nil, err
	}
	defer reply.Close()
	resp := reply.Response
	for reply.Streaming() {
		data, err := reply.Next(ctx)
		switch {
		case errors.Is(err, io.EOF):
			return resp, nil
		case errors.Is(err, context.DeadlineExceeded):
			return nil, errs.ServiceUnavailable("%s did not answer in time; try again shortly", service)
		case err != nil:
			return nil, fmt.Errorf("call %s: %w", service, err)
		case len(resp.Body)+len(data) > MaxReplyBytes:
			return nil, fmt.Errorf("call %s: streamed reply is over the %d-byte bound of a reply", service, MaxReplyBytes)
		}
		resp.Body = append(resp.Body, data...)
	}
	return resp, nil
}

// Open sends req to a service endpoint and returns its response as it
// begins: whole when the service answered at once, or the head of a stream
// when its handler flushed, whose body follows through Reply.Next. ctx
// bounds the wait for that first answer (CallTimeout when it has no
// deadline), not the stream after it: a stream lasts while its messages
// keep coming, within the service's handler timeout. The caller must Close
// the reply. Errors are Do's.
func (c *Client) Open(ctx context.Context, service, endpoint string, req *rpcv1.Request) (*Reply, error) {
	data, err := proto.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode rpc request: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, CallTimeout)
		defer cancel()
	}
	msg, call, err := c.request(ctx, Subject(c.prefix, service, endpoint), data)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, notSent(errs.ServiceUnavailable("%s is not running; try again shortly", service))
	case errors.Is(err, nats.ErrMaxPayload):
		// Replies of any size come back in chunks; a request must fit one
		// message (the gateway's body limit sees to that for the API).
		return nil, notSent(errs.Newf(http.StatusRequestEntityTooLarge, errs.CodePayloadTooLarge,
			"request of %d bytes is over the %d-byte bound of one message", len(data), c.nc.MaxPayload()))
	case natsx.Unavailable(err) && errors.Is(err, ErrNotSent):
		return nil, notSent(errs.ServiceUnavailable("the message bus is unreachable; try again shortly"))
	case natsx.Unavailable(err):
		// The connection dropped after the request went: its reply is
		// lost, whatever the service did.
		return nil, errs.ServiceUnavailable("the message bus is unreachable; try again shortly")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return nil, errs.ServiceUnavailable("%s did not answer in time; try again shortly", service)
	case err != nil:
		return nil, fmt.Errorf("call %s: %w", service, err)
	}
	reply := c.newReply(msg, call)
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		reply.Close()
		return nil, fmt.Errorf("call %s: %s %s", service, code, msg.Header.Get("Nats-Service-Error"))
	}
	var resp rpcv1.Response
	if err := proto.Unmarshal(msg.Data, &resp); err != nil {
		reply.Close()
		return nil, fmt.Errorf("decode %s response: %w", service, err)
	}
	if reply.Streaming() && reply.control == "" {
		reply.Close()
		return nil, fmt.Errorf("call %s: stream head without %s", service, HeaderStreamControl)
	}
	reply.Response = &resp
	reply.unacked = len(resp.Body)
	return reply, nil
}

// call is one request's place among the client's replies.
type call struct {
	inbox string
	p     *pending
}

// request publishes data to subject with a reply subject of the client's
// inbox and waits for the whole reply, or a stream's head. The call stays
// open for the caller to close.
func (c *Client) request(ctx context.Context, subject string, data []byte) (*nats.Msg, call, error) {
	if !c.nc.IsConnected() {
		// Whatever the state between connections, nothing sent now
		// would be answered.
		return nil, call{}, fmt.Errorf("%w: %w", ErrNotSent, nats.ErrDisconnected)
	}
	inbox, p, err := c.replies.open()
	if err != nil {
		return nil, call{}, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	msg := &nats.Msg{Subject: subject, Reply: inbox, Data: data, Header: nats.Header{
		HeaderAcceptChunks: {"1"},
		HeaderAcceptStream: {strconv.Itoa(acceptStreamAcks)},
	}}
	if err := c.nc.PublishMsg(msg); err != nil {
		c.replies.close(inbox)
		return nil, call{}, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	reply, err := p.wait(ctx, c.replies.gap)
	if err != nil {
		c.replies.close(inbox)
		// A stream's head may have come just as ctx ended; its handler
		// stops now rather than once it misses the keep-alives.
		if control := p.streamControl(); control != "" {
			_ = c.nc.Publish(control, []byte(controlCancel))
		}
		return nil, call{}, err
	}
	return reply, call{inbox: inbox, p: p}, nil
}

// CallJSON is Do for JSON endpoints: it sends in (nil for no body) and
// decodes a 2xx body into out (nil to ignore it). A non-2xx answer comes back
// as the service's *errs.Error.
func (c *Client) CallJSON(ctx context.Context, service, endpoint, workspaceID, method, path string, in, out any) error {
	req := &rpcv1.Request{WorkspaceId: workspaceID, Method: method}
	req.Path, req.RawQuery, _ = strings.Cut(path, "?")
	if in != nil {
		body, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		req.Body = body
	}
	return c.CallRaw(ctx, service, endpoint, req, out)
}

// answerError is a service's non-2xx answer as the *errs.Error it sent:
// its status, code and message, and the body's further fields in Extra
// (a refused flow document's node_id and field), so a caller reads them
// as fields rather than out of the message. A body that is no error
// object is internal_error, with the body as its message.
func answerError(resp *rpcv1.Response) *errs.Error {
	var body map[string]any
	_ = json.Unmarshal(resp.GetBody(), &body)
	code, _ := body["code"].(string)
	message, _ := body["message"].(string)
	if code == "" {
		return errs.New(int(resp.GetStatus()), errs.CodeInternal, string(resp.GetBody()))
	}
	e := errs.New(int(resp.GetStatus()), code, message)
	delete(body, "code")
	delete(body, "message")
	if len(body) > 0 {
		e.Extra = body
	}
	return e
}

// CallRaw is CallJSON for a request the caller builds: its body goes as is,
// as JSON (Content-Type application/json unless req names one), so a
// document is stored byte for byte as its author wrote it rather than
// re-encoded; and the caller sets whatever else the request carries (the
// modules and features of the workspace it acts for). A 2xx body is decoded
// into out (nil to ignore it); a non-2xx answer is the service's
// *errs.Error.
func (c *Client) CallRaw(ctx context.Context, service, endpoint string, req *rpcv1.Request, out any) error {
	if len(req.GetBody()) > 0 && !slices.ContainsFunc(req.GetHeaders(), func(h *rpcv1.Header) bool {
		return strings.EqualFold(h.GetName(), "Content-Type")
	}) {
		req = proto.CloneOf(req) // the caller's request stays as it built it
		req.Headers = append(req.Headers, &rpcv1.Header{Name: "Content-Type", Value: "application/json"})
	}
	resp, err := c.Do(ctx, service, endpoint, req)
	if err != nil {
		return err
	}
	if resp.GetStatus() < 200 || resp.GetStatus() > 299 {
		return answerError(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.GetBody(), out); err != nil {
		return fmt.Errorf("decode %s response: %w", service, err)
	}
	return nil
}
