// Package httpx builds the echo instances of Parley processes the same way:
// request ids, panic recovery, one error handler, an access log, and the
// /healthz, /readyz and /metrics endpoints every process serves.
package httpx

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/errs"
)

// NewEcho returns an echo with Parley's error handler, request ids, panic
// recovery and access log.
func NewEcho(log *zap.Logger) *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	// c.RealIP() would otherwise believe X-Forwarded-For from anyone. The
	// client's address, for limits, is Proxies.ClientAddr (TRUSTED_PROXIES).
	e.IPExtractor = echo.ExtractIPDirect()
	e.HTTPErrorHandler = errs.EchoHandler(log)
	e.Use(middleware.RequestID())
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{
		DisableStackAll: true,
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			log.Error("panic in handler", zap.Error(err), zap.ByteString("stack", stack),
				zap.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)))
			return errs.Internal()
		},
	}))
	e.Use(accessLog(log))
	return e
}

func accessLog(log *zap.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			if p := c.Path(); p == "/healthz" || p == "/readyz" || p == "/metrics" {
				return nil
			}
			// Checked first: at the levels services run at, a request
			// builds no fields and allocates nothing for a line not written.
			if ce := log.Check(zap.DebugLevel, "http request"); ce != nil {
				ce.Write(
					zap.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)),
					zap.String("method", c.Request().Method),
					zap.String("path", c.Request().URL.Path),
					zap.Int("status", c.Response().Status),
					zap.Duration("took", time.Since(start)))
			}
			return nil
		}
	}
}

// maxClipped bounds what of a request an error message repeats: enough to
// recognise a path or a method by, never the 100 KB a client may send.
const maxClipped = 64

// Clip is s, a part of a request (its path, its method), as an error
// message may repeat it: Truncate to maxClipped bytes.
func Clip(s string) string { return Truncate(s, maxClipped) }

// Truncate keeps at most n bytes of s, cut at a character's start, and
// marks the cut with "…".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Check is one readiness dependency (Postgres, Redis, NATS).
type Check struct {
	Name  string
	Check func(ctx context.Context) error
}

// Shown is something /readyz shows operators beside its checks, under
// Name, without judging it: Show's value, as JSON. Show must not wait on a
// dependency (a probe has a second or so); it returns what was read last.
type Shown struct {
	Name string
	Show func() any
}

// MountProbes adds /healthz (the process is alive), /readyz (every check
// passes; each of shown is added to the answer) and /metrics (Prometheus,
// from reg) to e.
func MountProbes(e *echo.Echo, reg prometheus.Gatherer, checks []Check, shown ...Shown) {
	e.GET("/healthz", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	})
	e.GET("/readyz", func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		result := map[string]string{}
		ready := true
		for _, ch := range checks {
			if err := ch.Check(ctx); err != nil {
				result[ch.Name] = err.Error()
				ready = false
				continue
			}
			result[ch.Name] = "ok"
		}
		status := http.StatusOK
		if !ready {
			status = http.StatusServiceUnavailable
		}
		answer := map[string]any{"ready": ready, "checks": result}
		for _, sh := range shown {
			answer[sh.Name] = sh.Show()
		}
		return c.JSON(status, answer)
	})
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
}

// DefaultShutdownGrace is how long Serve waits for the requests in flight
// once told to stop, unless the service waits longer (see Serve).
const DefaultShutdownGrace = 10 * time.Second

// Bounds of every listener's connections besides the read timeout.
const (
	// maxHeaderWait bounds reading a request's headers, unless the read
	// timeout is shorter.
	maxHeaderWait = 10 * time.Second
	// idleTimeout is how long a kept-alive connection may wait for its
	// next request: longer than the 60 s most load balancers keep an idle
	// connection to their backends, so that the balancer closes first and
	// never sends a request on a connection being closed.
	idleTimeout = 120 * time.Second
)

// NewServer returns the server a Parley listener serves h with on addr.
// readTimeout (HTTP_READ_TIMEOUT, config.Listening; more than zero) bounds
// reading each request whole, headers and body, from its first byte: a
// handler reading a body that has not arrived by then gets an error
// (ReadFailed answers it 408), and a body no handler read is cut there.
// Only reading is bounded: a streamed response writes under its own
// bounds (FlushWriter), and a handler may take as long as it needs once
// it has read its request (the server lifts the read deadline when the
// body has been read to its end, so a long answer's context is not
// cancelled).
func NewServer(addr string, h http.Handler, readTimeout time.Duration) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: min(maxHeaderWait, readTimeout),
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
	}
}

// Serve serves srv (NewServer) until ctx ends, then stops taking requests
// and waits up to grace for those in flight; the connections still open
// then are closed.
func Serve(ctx context.Context, srv *http.Server, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
		return fmt.Errorf("requests still in flight after %s were cut: %w", grace, err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// DropBody is called, before answering, for a request turned away without
// its body being read (no key, a wrong one, no such channel): the
// connection stops reading, so the answer goes at once and the connection
// is closed after it, instead of waiting for a body no one will read (up
// to the read timeout, NewServer, from a client that sends slowly).
func DropBody(c echo.Context) {
	if c.Request().ContentLength == 0 {
		return
	}
	c.Response().Header().Set(echo.HeaderConnection, "close")
	// A writer relayed over rpc has no connection to stop reading.
	_ = http.NewResponseController(c.Response()).SetReadDeadline(time.Now())
}

// BindJSON decodes the request body into v, strictly: unknown fields are
// allowed (clients evolve), but malformed JSON and wrong types are 400
// invalid_request naming the field.
func BindJSON(c echo.Context, v any) error {
	return DecodeJSON(c.Request().Body, v)
}
