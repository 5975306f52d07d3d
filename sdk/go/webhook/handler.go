package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// DefaultBodyLimit is the largest body NewHandler reads unless
// WithBodyLimit says otherwise; a larger one is refused with 413.
const DefaultBodyLimit = 1 << 20

// Store remembers which deliveries were handled, so that NewHandler
// handles each once however often it arrives: deliveries are at least once,
// and every attempt and replay of one event carries the same
// X-Service-Delivery.
//
// MemoryStore keeps the ids in the process. Several receiver instances
// behind one URL need a store they share, or each would handle an event
// the others did: for example Redis, where Claim is SET key 1 NX EX ttl
// (first is whether it set the key) and Release is DEL key. Whatever the
// store, Claim must be atomic: two concurrent claims of one id may not both
// be first, and a claimed id must be remembered at least MinTTL (an EX of
// 601 or more), as long as a replay of its delivery verifies.
type Store interface {
	// Claim records id and reports whether it is new (first): false means
	// the delivery was handled, or is being handled, already.
	Claim(ctx context.Context, id string) (first bool, err error)
	// Release forgets id, after its handling failed, so that the next
	// attempt of the delivery is handled.
	Release(ctx context.Context, id string) error
}

// Option changes what NewHandler builds.
type Option func(*handler)

// WithBodyLimit sets the largest body read; zero or less means
// DefaultBodyLimit.
func WithBodyLimit(n int64) Option {
	return func(h *handler) {
		if n > 0 {
			h.limit = n
		}
	}
}

// WithClock sets the clock timestamps are checked against (time.Now
// otherwise), for tests.
func WithClock(now func() time.Time) Option { return func(h *handler) { h.now = now } }

// NewHandler returns the http.Handler of a webhook URL. For each request it
//
//   - reads the raw body, up to the body limit (413 beyond it);
//   - verifies it with secret (VerifyAt): 401 if it fails, the body one
//     line saying why;
//   - decodes it (Parse): 400 if it is malformed, or if X-Service-Delivery
//     is not the envelope's id;
//   - claims the delivery's id in store: a delivery claimed before is
//     answered 200 without calling handle;
//   - calls handle with the request's context: 200 if it returns nil; 500
//     if it returns an error, the claim released so that Parley's next
//     attempt is handled again. A panic releases the claim too and goes on
//     to net/http, which drops the connection (no answer, a failed attempt
//     for Parley).
//
// A 500's body says only that the event was not handled (Parley's delivery
// log keeps the start of it): handle should log its own errors, and a
// store's errors are the store's to log.
//
// Parley waits 10 s for an answer: handle should be quick and leave long
// work for later. A duplicate that arrives while the first is still in
// handle is answered 200 as well; if the first then fails, Parley retries
// it.
func NewHandler(secret string, store Store, handle func(context.Context, *Event) error, opts ...Option) http.Handler {
	h := &handler{secret: secret, store: store, handle: handle, limit: DefaultBodyLimit, now: time.Now}
	for _, o := range opts {
		o(h)
	}
	return h
}

type handler struct {
	secret string
	store  Store
	handle func(context.Context, *Event) error
	limit  int64
	now    func() time.Time
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		refuse(w, http.StatusMethodNotAllowed, "webhook deliveries are POST")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.limit))
	if err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			refuse(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", h.limit))
			return
		}
		refuse(w, http.StatusBadRequest, "unreadable body")
		return
	}
	if err := VerifyAt(h.secret, r.Header, body, h.now()); err != nil {
		refuse(w, http.StatusUnauthorized, err.Error())
		return
	}
	ev, err := Parse(body)
	if err != nil {
		refuse(w, http.StatusBadRequest, err.Error())
		return
	}
	// The envelope's id is signed and X-Service-Delivery is not; they are
	// the same in every genuine delivery, so claim the signed one.
	if d := r.Header.Get(HeaderDelivery); d != "" && d != ev.ID {
		refuse(w, http.StatusBadRequest, fmt.Sprintf("%s %q is not the envelope's id %q", HeaderDelivery, d, ev.ID))
		return
	}
	first, err := h.store.Claim(r.Context(), ev.ID)
	if err != nil {
		refuse(w, http.StatusInternalServerError, "delivery store unavailable")
		return
	}
	if !first {
		w.WriteHeader(http.StatusOK)
		return
	}
	if err := h.call(r.Context(), ev); err != nil {
		refuse(w, http.StatusInternalServerError, "event not handled")
		return
	}
	w.WriteHeader(http.StatusOK)
}

// call runs handle; when it fails, or panics, the claim is released so
// that the next attempt of the delivery is handled.
func (h *handler) call(ctx context.Context, ev *Event) (err error) {
	handled := false
	defer func() {
		if handled && err == nil {
			return
		}
		// A context of its own: the request's may be why handle failed.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if rerr := h.store.Release(rctx, ev.ID); rerr != nil && err != nil {
			err = errors.Join(err, rerr)
		}
	}()
	err = h.handle(ctx, ev)
	handled = true
	return err
}

// refuse answers code with why as a one-line text body: Parley keeps the
// start of a failed attempt's body in the delivery log.
func refuse(w http.ResponseWriter, code int, why string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintln(w, oneLine(why))
}

func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}
