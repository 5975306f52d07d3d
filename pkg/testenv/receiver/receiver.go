// Package receiver is a developer's webhook endpoint for tests: an HTTP
// server on loopback that records every request exactly as it arrived (for
// Request.Verify, the signature check of docs/webhooks.md "Verifying a
// delivery" that the Go client's webhook package implements), answers as
// the test says, and lets the test wait for what it expects and hold answers
// to keep deliveries in flight.
package receiver

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/sdk/go/webhook"
)

// Path is the path of URL: receivers are rarely at a server's root, so a
// sender that dropped the path would show.
const Path = "/hooks/parley"

// DefaultWithin is how long the Wait methods wait unless Within says
// otherwise: a delivery, even after a few retries with the tests' short
// delays, arrives well before.
const DefaultWithin = 15 * time.Second

// Request is one request the receiver got.
type Request struct {
	Method string
	// Path is the request URI: path and query.
	Path   string
	Header http.Header
	Body   []byte
	// At is when it arrived, the "now" its timestamp is checked against.
	At time.Time
	// HeldIn is the hold (numbered from 1) whose gate kept this request
	// waiting, 0 when it was answered at once.
	HeldIn int
}

// Event is the request's X-Service-Event.
func (r Request) Event() string { return r.Header.Get("X-Service-Event") }

// Delivery is the request's X-Service-Delivery.
func (r Request) Delivery() string { return r.Header.Get("X-Service-Delivery") }

// Verify checks the request's signature and timestamp with secret, as of
// now, with the Go client's webhook.VerifyAt: what the tests accept is what
// a developer's receiver accepts. Its errors wrap webhook.ErrTimestamp,
// webhook.ErrSignature or webhook.ErrMissingHeader.
func (r Request) Verify(secret string, now time.Time) error {
	return webhook.VerifyAt(secret, r.Header, r.Body, now)
}

// Respond answers the n-th request (counted from 1).
type Respond func(n int, w http.ResponseWriter)

// Status answers every request with code.
func Status(code int) Respond {
	return func(_ int, w http.ResponseWriter) { w.WriteHeader(code) }
}

// Option changes how New builds a receiver.
type Option func(*Receiver)

// Discard keeps no record of the requests (Requests and the Wait methods
// see none); each still goes to the OnRequest function, if any, with its
// body read and dropped. Benchmarks use it so the receiver costs little.
func Discard() Option { return func(r *Receiver) { r.discard = true } }

// OnRequest calls f with each request as it arrives, before it is answered
// (Body is nil under Discard).
func OnRequest(f func(Request)) Option { return func(r *Receiver) { r.onRequest = f } }

// Within sets how long the Wait methods wait (DefaultWithin otherwise),
// for a test whose deliveries come late on purpose.
func Within(d time.Duration) Option { return func(r *Receiver) { r.within = d } }

// Receiver is the endpoint. Its URL is what a test saves as the webhook.
type Receiver struct {
	URL string

	respond   Respond
	within    time.Duration
	status    atomic.Int32
	discard   bool
	onRequest func(Request)
	gate      Gate

	mu       sync.Mutex
	requests []Request
	n        int
	// arrived wakes the Wait methods; it holds at most one token, and a
	// full channel already holds one, so a request never blocks on it.
	arrived chan struct{}
}

// New starts a receiver that answers with respond, or with SetStatus's
// status (200 until set) when respond is nil; it stops when the test ends.
func New(t testing.TB, respond Respond, opts ...Option) *Receiver {
	t.Helper()
	r := &Receiver{respond: respond, within: DefaultWithin, arrived: make(chan struct{}, 1)}
	r.status.Store(http.StatusOK)
	for _, o := range opts {
		o(r)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	t.Cleanup(r.Release) // runs before Close: held handlers must end first
	r.URL = srv.URL + Path
	return r
}

// ServeHTTP records the request and answers it. A test may put the
// receiver behind a handler of its own (one that fails on purpose) by
// calling it.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	got := Request{Method: req.Method, Path: req.URL.RequestURI(), Header: req.Header.Clone()}
	if r.discard {
		_, _ = io.Copy(io.Discard, req.Body)
	} else {
		got.Body, _ = io.ReadAll(req.Body)
	}
	got.At = time.Now()
	var wait func()
	r.mu.Lock()
	r.n++
	n := r.n
	got.HeldIn, wait = r.gate.Enter()
	if !r.discard {
		r.requests = append(r.requests, got)
	}
	r.mu.Unlock()
	select {
	case r.arrived <- struct{}{}:
	default:
	}
	if r.onRequest != nil {
		r.onRequest(got)
	}
	wait()
	if r.respond != nil {
		r.respond(n, w)
		return
	}
	w.WriteHeader(int(r.status.Load()))
}

// SetStatus sets the answer of a receiver built without a Respond.
func (r *Receiver) SetStatus(code int) { r.status.Store(int32(code)) }

// Requests returns the requests recorded so far, in arrival order.
func (r *Receiver) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.requests...)
}

// Forget drops the requests recorded so far: the developer losing what
// they got (a disk, a bug, a bad deploy), or a test starting a new phase.
func (r *Receiver) Forget() {
	r.mu.Lock()
	r.requests = nil
	r.mu.Unlock()
}

// Count is how many recorded requests carry X-Service-Event event.
func (r *Receiver) Count(event string) int {
	return len(OfEvent(r.Requests(), event))
}

// Distinct is how many delivery ids (X-Service-Delivery) have arrived.
func (r *Receiver) Distinct() int {
	seen := map[string]struct{}{}
	for _, req := range r.Requests() {
		seen[req.Delivery()] = struct{}{}
	}
	return len(seen)
}

// OfEvent returns the requests among reqs whose X-Service-Event is event.
func OfEvent(reqs []Request, event string) []Request { return having(reqs, Request.Event, event) }

// OfDelivery returns the requests among reqs whose X-Service-Delivery is
// id: a delivery's attempts and replays, in arrival order.
func OfDelivery(reqs []Request, id string) []Request { return having(reqs, Request.Delivery, id) }

// having returns the requests among reqs whose header, read by header, is
// value.
func having(reqs []Request, header func(Request) string, value string) []Request {
	var out []Request
	for _, req := range reqs {
		if header(req) == value {
			out = append(out, req)
		}
	}
	return out
}

// Await waits (DefaultWithin, or Within's, at the most) until done holds for the requests
// recorded so far and returns them; otherwise it fails t, naming what.
func (r *Receiver) Await(t testing.TB, what string, done func(got []Request) bool) []Request {
	t.Helper()
	deadline := time.NewTimer(r.within)
	defer deadline.Stop()
	for {
		got := r.Requests()
		if done(got) {
			return got
		}
		select {
		case <-r.arrived:
		case <-deadline.C:
			t.Fatalf("receiver: %s: not within %s (got %d requests)", what, r.within, len(got))
		}
	}
}

// Wait waits until n requests have arrived and returns all of them.
func (r *Receiver) Wait(t testing.TB, n int) []Request {
	t.Helper()
	return r.Await(t, fmt.Sprintf("%d requests", n), func(got []Request) bool { return len(got) >= n })
}

// WaitFor returns the first request whose X-Service-Event is event.
func (r *Receiver) WaitFor(t testing.TB, event string) Request {
	t.Helper()
	return r.WaitForN(t, event, 1)[0]
}

// WaitForN returns the requests whose X-Service-Event is event once there
// are n of them.
func (r *Receiver) WaitForN(t testing.TB, event string, n int) []Request {
	t.Helper()
	got := r.Await(t, fmt.Sprintf("%d %s events", n, event), func(got []Request) bool { return len(OfEvent(got, event)) >= n })
	return OfEvent(got, event)
}

// Hold keeps every request from now on waiting for Release (30 s at the
// most), so deliveries stay in flight, and returns the hold's number.
func (r *Receiver) Hold() int { return r.gate.Hold() }

// Release answers the held requests and stops holding.
func (r *Receiver) Release() { r.gate.Release() }

// Waiting is how many requests are held right now.
func (r *Receiver) Waiting() int { return r.gate.Waiting() }
