// Package errs is Parley's one error type: a public code, an HTTP status and
// a message that is safe to show to API callers. Every service returns these
// from its ports; anything else becomes 500 internal_error.
package errs

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is an error that may be shown to an API caller as
// {"code": Code, "message": Message} with HTTP status Status.
type Error struct {
	Status  int
	Code    string
	Message string
	// Extra holds additional top-level body fields some errors carry
	// (run_id on idempotency_response_unavailable, docs/limits-and-errors.md
	// "The error shape").
	Extra map[string]any
	// Header holds response headers the error requires (Retry-After).
	Header http.Header
}

// New returns an Error with the given status, code and message.
func New(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

// Newf is New with a formatted message.
func Newf(status int, code, format string, args ...any) *Error {
	return New(status, code, fmt.Sprintf(format, args...))
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// WithHeader returns a copy of e that also sets a response header.
func (e *Error) WithHeader(key, value string) *Error {
	c := *e
	c.Header = e.Header.Clone()
	if c.Header == nil {
		c.Header = http.Header{}
	}
	c.Header.Set(key, value)
	return &c
}

// WithExtra returns a copy of e with an additional body field.
func (e *Error) WithExtra(key string, value any) *Error {
	c := *e
	c.Extra = make(map[string]any, len(e.Extra)+1)
	for k, v := range e.Extra {
		c.Extra[k] = v
	}
	c.Extra[key] = value
	return &c
}

// Body is the JSON shape of an error response.
func (e *Error) Body() map[string]any {
	b := make(map[string]any, 2+len(e.Extra))
	for k, v := range e.Extra {
		b[k] = v
	}
	b["code"] = e.Code
	b["message"] = e.Message
	return b
}

// As reports whether err is (or wraps) an *Error and returns it.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// Codes shared by every service (docs/architecture.md "Errors").
const (
	CodeInvalidRequest     = "invalid_request"
	CodeUnauthorized       = "unauthorized"
	CodeModuleInactive     = "module_inactive"
	CodeNotFound           = "not_found"
	CodeRateLimited        = "rate_limited"
	CodeInternal           = "internal_error"
	CodeMethodNotAllowed   = "method_not_allowed"
	CodePayloadTooLarge    = "payload_too_large"
	CodeRequestTimeout     = "request_timeout"
	CodeServiceUnavailable = "service_unavailable"
	CodePlatformError      = "platform_error"
	// CodeQuotaExceeded is the plan's AI units used up: the gateway's
	// answer to a use past ai_limit, and a flow run's in-run error.
	CodeQuotaExceeded = "quota_exceeded"
)

// InvalidRequest is 400 invalid_request; the message names the field.
func InvalidRequest(format string, args ...any) *Error {
	return Newf(http.StatusBadRequest, CodeInvalidRequest, format, args...)
}

// InvalidID is 400 invalid_request for a field that is not the id of a
// kind ("workspace", "delivery", ...) as the services write ids (see
// pkg/ids): every service words it alike and none echoes the value.
func InvalidID(field, kind string) *Error {
	return InvalidRequest("%s must be a %s id (UUID)", field, kind)
}

// NotFound is 404 with a resource-specific code such as conversation_not_found.
func NotFound(code, message string) *Error {
	return New(http.StatusNotFound, code, message)
}

// Unauthorized is 401 unauthorized.
func Unauthorized(message string) *Error {
	return New(http.StatusUnauthorized, CodeUnauthorized, message)
}

// Internal is the body every unknown error is turned into; it never carries
// the cause.
func Internal() *Error {
	return New(http.StatusInternalServerError, CodeInternal, "internal server error")
}
