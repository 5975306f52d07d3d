package http

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/errs"
	webchatadapter "github.com/parleyhq/parley/services/messaging/internal/adapters/webchat"
)

// streamWriteTimeout bounds one write to a widget stream: a client that
// stops reading is let go rather than holding its connection for ever.
const streamWriteTimeout = 30 * time.Second

// GET /webchat/:channel_id/events?token=
//
// Server-sent events for one open widget: "ready" once it is subscribed
// (whatever is pushed after that arrives), "message" with a message as the
// history shows it, "typing", and a ": ping" comment every PingInterval so
// proxies keep the connection and dead clients are found. The stream ends
// when the client leaves, falls behind, or the service shuts down; the
// widget reconnects and reloads the history.
func (w *webchatHandlers) events(c echo.Context) error {
	token := c.QueryParam("token")
	if token == "" {
		token = c.Request().Header.Get(VisitorTokenHeader)
	}
	ch, v, err := w.visitor(c, token)
	if err != nil {
		return err
	}
	stream, err := w.bus.Open(ch.ID, v.ID)
	switch {
	case errors.Is(err, webchatadapter.ErrTooManyStreams):
		return errs.New(http.StatusTooManyRequests, errs.CodeRateLimited, "too many open chat windows; close one and retry").
			WithHeader("Retry-After", "5")
	case errors.Is(err, webchatadapter.ErrClosed):
		return errs.New(http.StatusServiceUnavailable, errs.CodeServiceUnavailable, "the service is restarting; retry").
			WithHeader("Retry-After", "1")
	case err != nil:
		// NATS is unreachable: the widget retries, as after a restart.
		w.log.Warn("webchat stream not opened", zap.String("channel_id", ch.ID), zap.Error(err))
		return errs.New(http.StatusServiceUnavailable, errs.CodeServiceUnavailable, "live updates are unavailable; retry").
			WithHeader("Retry-After", "2")
	}
	defer stream.Close()

	res := c.Response()
	hd := res.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	res.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(res)
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := res.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// retry: how long the browser waits before reconnecting by itself.
	if !write([]byte("retry: 3000\n\n")) || !write(sseData("ready", []byte("{}"))) {
		return nil
	}
	ping := time.NewTicker(w.opts.PingInterval)
	defer ping.Stop()
	ctx := c.Request().Context()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-stream.Done():
			return nil
		case <-ping.C:
			if !write([]byte(": ping\n\n")) {
				return nil
			}
		case f := <-stream.Frames():
			if !write(sseData(f.Event, f.Data)) {
				return nil
			}
		}
	}
}
