package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/bufpool"
	"github.com/parleyhq/parley/pkg/errs"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
)

// MaxInFlight bounds the requests one process serves at once; past it, NATS
// holds further requests until a slot frees.
const MaxInFlight = 256

// HandlerTimeout bounds one forwarded request; the gateway gives up a little
// later, so the service always answers first.
const HandlerTimeout = 25 * time.Second

// LongHandlerTimeout bounds a request that may legitimately work for a
// minute: a synchronous headless flow run, whose budget (RUN_BUDGET_TIME) is
// 60 s, plus the time to store its outcome. An endpoint opts in with
// WithHandlerTimeout; its callers wait LongCallTimeout.
const LongHandlerTimeout = 75 * time.Second

// EndpointOption changes how one endpoint is served.
type EndpointOption func(*endpoint)

type endpoint struct {
	timeout time.Duration
	// long: the timeout was given, so Stop waits it out (WithHandlerTimeout).
	long bool
}

// WithHandlerTimeout bounds the endpoint's requests by d instead of
// HandlerTimeout. An endpoint given a timeout of its own is one whose
// requests need it (a synchronous flow run may work for a minute), so Stop
// also waits up to d for requests in flight instead of StopGrace when d is
// longer: stopping an instance, for a rollout or a scale-down, lets its runs
// finish instead of cancelling them.
func WithHandlerTimeout(d time.Duration) EndpointOption {
	return func(e *endpoint) { e.timeout, e.long = d, true }
}

// StopGrace bounds how long Stop waits for the requests in flight, unless an
// endpoint's own timeout is longer (WithHandlerTimeout); those still running
// then are cancelled.
const StopGrace = 10 * time.Second

// Server is a service's NATS micro service.
type Server struct {
	nc     *nats.Conn
	svc    micro.Service
	group  micro.Group
	log    *zap.Logger
	slots  chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	grace  time.Duration // StopGrace; shorter in tests
	// longest is the longest timeout given to an endpoint with
	// WithHandlerTimeout; Stop waits for it when it is longer than grace.
	longest time.Duration

	// StreamIdle and StreamBeat; shorter in tests.
	streamIdle, streamBeat time.Duration
	// StreamWindow; smaller in tests.
	streamWindow int64

	// mu orders starting a request against Stop: once closed, no handler
	// starts, so none runs after Stop returns and its caller closes the
	// database under it.
	mu       sync.Mutex
	closed   bool
	inflight int
	idle     chan struct{} // closed when inflight drops to zero, while Stop waits
}

// NewServer registers service (queue group of the same name) on nc.
func NewServer(nc *nats.Conn, prefix, service, version string, log *zap.Logger) (*Server, error) {
	svc, err := micro.AddService(nc, micro.Config{
		Name:        service,
		Version:     version,
		QueueGroup:  service,
		Description: "Parley " + service,
	})
	if err != nil {
		return nil, fmt.Errorf("register %s with nats: %w", service, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		nc:     nc,
		svc:    svc,
		group:  svc.AddGroup(prefix + "." + service),
		log:    log,
		slots:  make(chan struct{}, MaxInFlight),
		ctx:    ctx,
		cancel: cancel,
		grace:  StopGrace,

		streamIdle:   StreamIdle,
		streamBeat:   StreamBeat,
		streamWindow: StreamWindow,
	}, nil
}

// Handle serves endpoint with h. Each request runs on its own goroutine:
// NATS calls a subscription's handler serially, and one slow platform call
// must not hold up the rest.
//
// A request that arrives once Stop has finished waiting is answered 503
// service_unavailable with Retry-After at once, so the caller retries
// (another instance, or this one restarted) instead of waiting out its
// timeout.
//
// Handle returns once NATS routes the endpoint's requests here, so a
// request sent right after, on any connection, finds it.
func (s *Server) Handle(name string, h http.Handler, opts ...EndpointOption) error {
	ep := endpoint{timeout: HandlerTimeout}
	for _, o := range opts {
		o(&ep)
	}
	if ep.long {
		s.mu.Lock()
		s.longest = max(s.longest, ep.timeout)
		s.mu.Unlock()
	}
	err := s.group.AddEndpoint(name, micro.HandlerFunc(func(req micro.Request) {
		if !s.begin() {
			s.refuse(req)
			return
		}
		s.slots <- struct{}{}
		go func() {
			defer func() { <-s.slots; s.end() }()
			s.serve(req, h, ep.timeout)
		}()
	}))
	if err != nil {
		return err
	}
	// The subscription is live at the server once it has answered a ping
	// sent after it.
	if err := s.nc.Flush(); err != nil {
		return fmt.Errorf("register endpoint %s: %w", name, err)
	}
	return nil
}

// begin counts a request in, unless the server is closed.
func (s *Server) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.inflight++
	return true
}

// end counts a request out and wakes Stop when it was the last.
func (s *Server) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight--
	if s.inflight == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// refuse answers a request that came too late to be served.
func (s *Server) refuse(msg micro.Request) {
	if err := msg.Respond(refusal); err != nil {
		s.log.Warn("refuse rpc request", zap.String("subject", msg.Subject()), zap.Error(err))
	}
}

// refusal is the answer to a request that reaches a stopped server.
var refusal = func() []byte {
	body, _ := json.Marshal(map[string]string{"code": errs.CodeServiceUnavailable, "message": "the service is stopping; try again shortly"})
	out, err := proto.Marshal(&rpcv1.Response{
		Status: http.StatusServiceUnavailable,
		Headers: []*rpcv1.Header{
			{Name: "Content-Type", Value: "application/json"},
			{Name: "Retry-After", Value: "1"},
		},
		Body: body,
	})
	if err != nil {
		panic(err) // a constant message always encodes
	}
	return out
}()

func (s *Server) serve(msg micro.Request, h http.Handler, timeout time.Duration) {
	var in rpcv1.Request
	if err := proto.Unmarshal(msg.Data(), &in); err != nil {
		s.log.Warn("malformed rpc request", zap.String("subject", msg.Subject()), zap.Error(err))
		_ = msg.Error("400", "malformed request", nil)
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	// A stream's caller may go away before the handler is done; the
	// stream cancels the handler then, saying why.
	ctx, cancelStream := context.WithCancelCause(ctx)
	defer cancelStream(nil)
	ctx = WithWorkspace(ctx, in.GetWorkspaceId())
	ctx = WithAccount(ctx, in.GetModules(), in.GetFeatures())
	target := in.GetPath()
	if in.GetRawQuery() != "" {
		target += "?" + in.GetRawQuery()
	}
	req, err := http.NewRequestWithContext(ctx, in.GetMethod(), "http://rpc"+target, bytes.NewReader(in.GetBody()))
	if err != nil {
		_ = msg.Error("400", "malformed request: "+err.Error(), nil)
		return
	}
	req.RequestURI = target
	for _, hd := range in.GetHeaders() {
		req.Header.Add(hd.GetName(), hd.GetValue())
	}
	if in.GetRequestId() != "" {
		req.Header.Set("X-Request-Id", in.GetRequestId())
	}
	rec := newRecorder()
	defer rec.release()
	if accept := msg.Headers().Get(HeaderAcceptStream); accept != "" && msg.Reply() != "" {
		rec.stream = s.newStream(ctx, msg.Reply(), in.GetRequestId(), cancelStream, acknowledges(accept))
	}
	h.ServeHTTP(rec, req)
	if rec.streaming() {
		rec.stream.finish(rec.body.Bytes())
		return
	}
	out := replyBuffers.Get()
	defer replyBuffers.Put(out)
	if *out, err = (proto.MarshalOptions{}).MarshalAppend((*out)[:0], rec.response()); err != nil {
		s.log.Error("encode rpc response", zap.Error(err))
		_ = msg.Error("500", "encode response", nil)
		return
	}
	s.reply(msg, *out, in.GetRequestId())
}

// replyBuffers hold the replies encoded from the bodies handlers write
// (in bodyBuffers) between requests: NATS copies a reply as it sends it,
// so once sent both are free, and a page of the API (tens of KB) would
// otherwise allocate its size twice a request, which the garbage collector
// then spends as much again on.
var (
	replyBuffers bufpool.Pool
	bodyBuffers  = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

// StopWait is how long Stop waits for the requests in flight: StopGrace, or
// the longest timeout of an endpoint given one with WithHandlerTimeout.
func (s *Server) StopWait() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.grace, s.longest)
}

// Stop deregisters the service, so no further request reaches this
// instance, and waits up to StopWait for the requests in flight to be
// answered (those already handed over by NATS while it waits are served
// too). Requests still running then are cancelled and Stop says how many.
// Stop returns when nothing will start any more; it may be called again.
func (s *Server) Stop() error {
	err := s.svc.Stop()
	wait := s.StopWait()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		if s.inflight == 0 {
			s.closed = true
			s.mu.Unlock()
			s.cancel()
			return err
		}
		idle := make(chan struct{})
		s.idle = idle
		s.mu.Unlock()
		select {
		case <-idle:
			// Look again: a request handed over during the wait may
			// have started since.
		case <-timer.C:
			s.mu.Lock()
			s.closed, s.idle = true, nil
			left := s.inflight
			s.mu.Unlock()
			s.cancel()
			return errors.Join(err, fmt.Errorf("%d requests still running after %s were cancelled", left, wait))
		}
	}
}

// recorder is the http.ResponseWriter a forwarded request is served into.
type recorder struct {
	header http.Header
	status int
	body   *bytes.Buffer // written since the last flush of a stream; from bodyBuffers
	// stream sends the response as it is flushed; nil when the caller
	// does not take streams.
	stream *stream
}

func newRecorder() *recorder {
	return &recorder{header: http.Header{}, body: bodyBuffers.Get().(*bytes.Buffer)}
}

// release gives the body's buffer back once the response is sent: as with
// an http.Server, a handler must not write after it returned.
func (r *recorder) release() {
	if r.body.Cap() <= bufpool.MaxKept {
		r.body.Reset()
		bodyBuffers.Put(r.body)
	}
	r.body = nil
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

// Flush sends what was written so far when the caller takes streams, and
// makes the response a stream (see stream.go); it returns once the caller
// is at most StreamWindow behind, so a handler cannot run far ahead of its
// reader. For a caller that does not take streams it does nothing: the
// response is sent when the handler returns, in one message or, when
// large, in chunks (see chunk.go).
func (r *recorder) Flush() { _ = r.FlushError() }

// FlushError is Flush for http.ResponseController, which prefers it: it
// says when the stream could not be sent, or its caller went (the
// handler's context is cancelled then too).
func (r *recorder) FlushError() error {
	if r.stream == nil {
		return nil
	}
	if !r.streaming() {
		r.WriteHeader(http.StatusOK)
		err := r.stream.start(r.response())
		if !r.streaming() {
			// Nothing was sent: the response goes whole at the end, as
			// for a caller that does not take streams.
			r.stream.log.Warn("rpc stream not started; the response goes whole",
				zap.String("request_id", r.stream.requestID), zap.Error(err))
			r.stream = nil
			return nil
		}
		r.body.Reset()
		if err != nil {
			return err
		}
		return r.stream.awaitAcks(r.stream.window)
	}
	if r.body.Len() == 0 {
		return nil
	}
	err := r.stream.flush(r.body.Bytes())
	r.body.Reset()
	return err
}

// AwaitDelivery flushes what the handler wrote to the stream w answers and
// returns once its caller has taken all of it: the gateway acknowledges a
// message once it has written it to its HTTP client. It fails, with the
// cause, when that cannot happen any more: the caller went
// (ErrStreamCancelled) or the handler's context ended. For a response that
// is not a stream (never flushed, the caller does not take streams, or w
// is not an rpc request's) and a caller that does not acknowledge, it
// returns nil at once: the response goes when the handler returns, and
// there is nothing to wait for or no way to know.
func AwaitDelivery(w http.ResponseWriter) error {
	for {
		switch t := w.(type) {
		case *recorder:
			if !t.streaming() {
				return nil
			}
			if err := t.FlushError(); err != nil {
				return err
			}
			return t.stream.awaitAcks(0)
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return nil
		}
	}
}

// streaming reports whether the response has begun to be sent as a stream.
func (r *recorder) streaming() bool {
	if r.stream == nil {
		return false
	}
	r.stream.mu.Lock()
	defer r.stream.mu.Unlock()
	return r.stream.started
}

func (r *recorder) response() *rpcv1.Response {
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	return &rpcv1.Response{Status: int32(status), Headers: toHeaders(r.header), Body: r.body.Bytes()}
}

func toHeaders(h http.Header) []*rpcv1.Header {
	out := make([]*rpcv1.Header, 0, len(h))
	for name, values := range h {
		for _, v := range values {
			out = append(out, &rpcv1.Header{Name: name, Value: v})
		}
	}
	return out
}
