package rpc

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parleyhq/parley/pkg/errs"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/testenv"
)

// stopHarness is a server whose endpoint runs the test's handler, and a
// client to call it.
type stopHarness struct {
	srv      *Server
	client   *Client
	entered  chan struct{} // a request reached the handler
	release  chan struct{} // closing it lets the handler answer
	answered atomic.Bool   // the handler wrote its answer
}

func newStopHarness(t *testing.T, h func(s *stopHarness, w http.ResponseWriter, r *http.Request), opts ...EndpointOption) *stopHarness {
	t.Helper()
	env := testenv.New(t)
	s := &stopHarness{entered: make(chan struct{}, 1), release: make(chan struct{})}
	srv, err := NewServer(env.NATS(t), env.RPCPrefix, "stoptest", "1.0.0", env.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	if err := srv.Handle(EndpointAPI, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(s, w, r) }), opts...); err != nil {
		t.Fatal(err)
	}
	s.srv, s.client = srv, NewClient(env.NATS(t), env.RPCPrefix)
	return s
}

// call sends one request and reports its outcome on the channel.
func (s *stopHarness) call() <-chan error {
	out := make(chan error, 1)
	go func() {
		out <- s.client.CallJSON(context.Background(), "stoptest", EndpointAPI, "ws", http.MethodGet, "/", nil, nil)
	}()
	return out
}

// A request under way when Stop is called is answered, and Stop returns
// only after it was.
func TestStopWaitsForRequestsInFlight(t *testing.T) {
	t.Parallel()
	s := newStopHarness(t, func(s *stopHarness, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/probe" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		s.entered <- struct{}{}
		<-s.release
		s.answered.Store(true)
		w.WriteHeader(http.StatusNoContent)
	})
	answer := s.call()
	<-s.entered

	stopped := make(chan bool, 1) // whether the answer was written when Stop returned
	go func() {
		if err := s.srv.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		stopped <- s.answered.Load()
	}()
	// Stop has begun once the service no longer takes requests (probes
	// handed over before that are served, as they should be).
	for {
		err := s.client.CallJSON(context.Background(), "stoptest", EndpointAPI, "ws", http.MethodGet, "/probe", nil, nil)
		if err != nil && strings.Contains(err.Error(), "not running") {
			break
		}
	}
	select {
	case <-stopped:
		t.Fatal("Stop returned while a request was still being served")
	default:
	}
	close(s.release)
	if err := <-answer; err != nil {
		t.Fatalf("the request in flight got %v, want its answer", err)
	}
	if answeredFirst := <-stopped; !answeredFirst {
		t.Fatal("Stop returned before the request in flight was answered")
	}
}

// Past the grace, Stop cancels what still runs, says so, and lets nothing
// start any more.
func TestStopCancelsRequestsPastItsGrace(t *testing.T) {
	t.Parallel()
	s := newStopHarness(t, func(s *stopHarness, w http.ResponseWriter, r *http.Request) {
		s.entered <- struct{}{}
		<-r.Context().Done()
		w.WriteHeader(http.StatusGatewayTimeout)
	})
	s.srv.grace = 50 * time.Millisecond
	answer := s.call()
	<-s.entered
	err := s.srv.Stop()
	if err == nil || !strings.Contains(err.Error(), "1 requests still running") {
		t.Fatalf("stop = %v, want the cancelled request counted", err)
	}
	if err := <-answer; err == nil {
		t.Fatal("the cancelled request was answered as a success")
	}
	if s.srv.begin() {
		t.Fatal("a request could still start after Stop returned")
	}
}

// A request that reaches a stopped server is answered 503
// service_unavailable with Retry-After at once, not left to time out.
func TestRefusalIsServiceUnavailable(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	nc := env.NATS(t)
	// A responder that answers as a stopped server does.
	sub, err := nc.Subscribe(Subject(env.RPCPrefix, "stopped", EndpointAPI), func(m *nats.Msg) { _ = m.Respond(refusal) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	resp, err := NewClient(nc, env.RPCPrefix).Do(context.Background(), "stopped", EndpointAPI, &rpcv1.Request{Method: http.MethodGet, Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	retryAfter := ""
	for _, h := range resp.GetHeaders() {
		if h.GetName() == "Retry-After" {
			retryAfter = h.GetValue()
		}
	}
	if resp.GetStatus() != http.StatusServiceUnavailable || retryAfter != "1" || !strings.Contains(string(resp.GetBody()), errs.CodeServiceUnavailable) {
		t.Fatalf("refusal = %d, Retry-After %q, %s; want 503 service_unavailable with Retry-After", resp.GetStatus(), retryAfter, resp.GetBody())
	}
}

// An endpoint with a timeout of its own longer than the grace (a flow run)
// is waited for up to that timeout: a request under way past the grace is
// answered, not cancelled, and Stop reports nothing left.
func TestStopWaitsForALongEndpointPastTheGrace(t *testing.T) {
	t.Parallel()
	s := newStopHarness(t, func(s *stopHarness, w http.ResponseWriter, r *http.Request) {
		s.entered <- struct{}{}
		select {
		case <-s.release:
			s.answered.Store(true)
			w.WriteHeader(http.StatusNoContent)
		case <-r.Context().Done():
			w.WriteHeader(http.StatusGatewayTimeout)
		}
	}, WithHandlerTimeout(time.Minute))
	s.srv.grace = 50 * time.Millisecond
	if got := s.srv.StopWait(); got != time.Minute {
		t.Fatalf("StopWait = %s, want the endpoint's minute", got)
	}
	answer := s.call()
	<-s.entered
	stopped := make(chan error, 1)
	go func() { stopped <- s.srv.Stop() }()
	// Past the grace, ten times over, the request is still being waited for.
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while the long request was still running", err)
	case <-time.After(500 * time.Millisecond):
	}
	close(s.release)
	if err := <-answer; err != nil {
		t.Fatalf("the long request got %v, want its answer", err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stop = %v, want nothing cancelled", err)
	}
	if !s.answered.Load() {
		t.Fatal("the long request was not answered")
	}
}
