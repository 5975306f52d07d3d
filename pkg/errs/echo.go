package errs

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// EchoHandler returns echo's HTTPErrorHandler for every Parley service. It
// writes {"code","message"}; errors it does not know become 500
// internal_error, logged once here with the request id and never leaked. A
// dependency that is down (DependencyDown) is 503 service_unavailable with
// Retry-After, logged once as a warning.
func EchoHandler(log *zap.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		e := FromEcho(err)
		if e.Status == http.StatusServiceUnavailable && e.Header.Get("Retry-After") == "" {
			// Every 503 says when to come back, whoever built it.
			e = e.WithHeader("Retry-After", strconv.Itoa(RetryAfterSeconds))
		}
		if level, ok := logLevel(err, e); ok {
			log.Log(level, "request failed",
				zap.Error(err),
				zap.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)),
				zap.String("method", c.Request().Method),
				zap.String("path", c.Request().URL.Path))
		}
		for k, vs := range e.Header {
			for _, v := range vs {
				c.Response().Header().Add(k, v)
			}
		}
		var werr error
		if c.Request().Method == http.MethodHead {
			werr = c.NoContent(e.Status)
		} else {
			werr = c.JSON(e.Status, e.Body())
		}
		if werr != nil {
			log.Warn("write error response", zap.Error(werr))
		}
	}
}

// logLevel says whether and how the handler logs err, answered as e: an
// internal error always, as an error; a dependency found down as a warning
// (the outage is logged where it is seen, not as a bug); nothing else,
// since client errors and deliberate 503s are the caller's news.
func logLevel(err error, e *Error) (zapcore.Level, bool) {
	if e.Code == CodeInternal {
		return zap.ErrorLevel, true
	}
	if _, own := As(err); !own && e.Code == CodeServiceUnavailable {
		return zap.WarnLevel, true
	}
	return 0, false
}

// FromEcho maps any error to an *Error: our own pass through, echo's
// routing and binding errors get their documented codes, a dependency that
// is down is 503 service_unavailable, the rest is 500.
func FromEcho(err error) *Error {
	if e, ok := As(err); ok {
		return e
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return New(http.StatusNotFound, CodeNotFound, "no such route")
		case http.StatusMethodNotAllowed:
			return New(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method not allowed on this route")
		case http.StatusRequestEntityTooLarge:
			return New(http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "request body too large")
		case http.StatusUnsupportedMediaType:
			return New(http.StatusUnsupportedMediaType, CodeInvalidRequest, "request body must be JSON")
		case http.StatusBadRequest:
			return New(http.StatusBadRequest, CodeInvalidRequest, messageOf(he))
		}
		if he.Code < http.StatusInternalServerError {
			return New(he.Code, strings.ReplaceAll(strings.ToLower(http.StatusText(he.Code)), " ", "_"), messageOf(he))
		}
	}
	if DependencyDown(err) {
		return ServiceUnavailable("a service this call needs is unavailable; try again shortly")
	}
	return Internal()
}

func messageOf(he *echo.HTTPError) string {
	if s, ok := he.Message.(string); ok {
		return s
	}
	return strings.ToLower(http.StatusText(he.Code))
}
