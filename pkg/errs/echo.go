package errs

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"
)

// EchoHandler returns echo's HTTPErrorHandler for every Parley service. It
// writes {"code","message"}; errors it does not know become 500
// internal_error, logged once here with the request id and never leaked.
func EchoHandler(log *zap.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		e := FromEcho(err)
		if e.Status >= http.StatusInternalServerError && e.Code == CodeInternal {
			log.Error("request failed",
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

// FromEcho maps any error to an *Error: our own pass through, echo's
// routing and binding errors get their documented codes, the rest is 500.
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
			return New(http.StatusRequestEntityTooLarge, CodeRequestTooLarge, "request body too large")
		case http.StatusUnsupportedMediaType:
			return New(http.StatusUnsupportedMediaType, CodeInvalidRequest, "request body must be JSON")
		case http.StatusBadRequest:
			return New(http.StatusBadRequest, CodeInvalidRequest, messageOf(he))
		}
		if he.Code < http.StatusInternalServerError {
			return New(he.Code, strings.ReplaceAll(strings.ToLower(http.StatusText(he.Code)), " ", "_"), messageOf(he))
		}
	}
	return Internal()
}

func messageOf(he *echo.HTTPError) string {
	if s, ok := he.Message.(string); ok {
		return s
	}
	return strings.ToLower(http.StatusText(he.Code))
}
