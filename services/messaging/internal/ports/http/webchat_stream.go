package http

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/ratelimit"
	webchatadapter "github.com/parleyhq/parley/services/messaging/internal/adapters/webchat"
)

// GET /webchat/:channel_id/events
//
// Server-sent events for one open widget: "ready" once it is subscribed
// (whatever is pushed after that arrives), "message" with a message as the
// history shows it, "typing", and a ": ping" comment every PingInterval so
// proxies keep the connection and dead clients are found. The stream ends
// when the client leaves, falls behind, loses its place (see below) or the
// service shuts down; the widget reconnects and reloads the history.
//
// The token comes in X-Visitor-Token only. Each stream holds a place in
// its channel's, its visitor's and its client address's bounds, across
// instances: a lease in Redis renewed every third of StreamLease while the
// stream is open, so the places of an instance that died free themselves.
func (w *webchatHandlers) events(c echo.Context) error {
	ch, v, err := w.visitor(c, c.Request().Header.Get(VisitorTokenHeader))
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	channelSlot := ratelimit.Slot{Name: "webchat:streams:channel:" + ch.ID, Limit: w.deps.StreamsPerChannel}
	visitorSlot := ratelimit.Slot{Name: "webchat:streams:visitor:" + ch.ID + ":" + v.ID, Limit: w.deps.StreamsPerVisitor}
	lease, err := w.deps.Streams.Acquire(ctx, visitorSlot,
		ratelimit.Slot{Name: "webchat:streams:addr:" + w.clientKey(c), Limit: w.deps.StreamsPerAddress}, channelSlot)
	var full *ratelimit.FullError
	switch {
	case errors.As(err, &full) && full.Slot == visitorSlot.Name:
		return limited(5*time.Second, "too many open chat windows; close one")
	case errors.As(err, &full) && full.Slot == channelSlot.Name:
		return limited(15*time.Second, "this chat has as many visitors as it takes")
	case errors.As(err, &full):
		return limited(15*time.Second, "too many open chat windows from one address")
	case err != nil:
		return w.limiterDown(c, err)
	}
	release := func() {
		// The request's context may be done by now; the place is given
		// back even so, or it runs out with the lease.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := lease.Release(rctx); err != nil {
			w.log.Warn("webchat stream place not released", zap.Error(err))
		}
	}

	stream, err := w.bus.Open(ch.ID, v.ID)
	if err != nil {
		release()
		return w.streamRefused(ch.ID, err)
	}
	// The place in the bounds goes first: once this instance counts the
	// stream closed, it is free everywhere.
	defer func() { release(); stream.Close() }()

	sse := httpx.StartSSE(c.Response())
	// retry: how long the browser waits before reconnecting by itself.
	if sse.Raw([]byte("retry: 3000\n\n")) != nil || sse.Event("ready", []byte("{}")) != nil {
		return nil
	}
	ping := time.NewTicker(w.deps.PingInterval)
	defer ping.Stop()
	// Redis lost sight of this stream long enough for its place to go:
	// end it, and the widget asks again. Other failures mean Redis is
	// away; the lease may outlast it, and the next renewal tells.
	leaseLost := make(chan struct{})
	stopRenewing := lease.KeepRenewed(ctx, func(err error) {
		if errors.Is(err, ratelimit.ErrLeaseLost) {
			close(leaseLost)
			return
		}
		w.log.Warn("webchat stream lease not renewed", zap.Error(err))
	})
	defer stopRenewing()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-stream.Done():
			return nil
		case <-leaseLost:
			return nil
		case <-ping.C:
			if sse.Comment("ping") != nil {
				return nil
			}
		case f := <-stream.Frames():
			if sse.Event(f.Event, f.Data) != nil {
				return nil
			}
		}
	}
}

// streamRefused answers a stream the bus did not open (err from Bus.Open):
// this instance's own bound, its shutdown, or NATS out of reach. The
// widget retries after Retry-After.
func (w *webchatHandlers) streamRefused(channelID string, err error) error {
	switch {
	case errors.Is(err, webchatadapter.ErrTooManyStreams):
		return limited(5*time.Second, "too many open chat windows on this server")
	case errors.Is(err, webchatadapter.ErrClosed):
		return errs.New(http.StatusServiceUnavailable, errs.CodeServiceUnavailable, "the service is restarting; retry").
			WithHeader("Retry-After", "1")
	}
	// NATS is unreachable: the widget retries, as after a restart.
	w.log.Warn("webchat stream not opened", zap.String("channel_id", channelID), zap.Error(err))
	return errs.New(http.StatusServiceUnavailable, errs.CodeServiceUnavailable, "live updates are unavailable; retry").
		WithHeader("Retry-After", "2")
}
