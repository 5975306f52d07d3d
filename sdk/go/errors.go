package parley

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Error is every error answer of the API: its documented Code, the
// Message meant for people, the HTTP Status, Retry-After and the request
// id to quote when reporting a problem. Compare it with errors.Is against
// the sentinels (errors.Is(err, parley.ErrConversationNotFound)), which
// match by Code; read its fields with errors.As.
//
// An answer that is not the API's JSON error (a proxy's 502 page) is an
// *Error too, with its Status, an empty Code and the start of its body as
// Message.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is the stable code meant for programs ("conversation_not_found").
	Code string
	// Message is a sentence for people; it may change.
	Message string
	// RetryAfter is the answer's Retry-After; 0 when it had none.
	RetryAfter time.Duration
	// RequestID is the answer's X-Request-Id.
	RequestID string
	// RunID, MessageID and CommentID name what the first request made, on
	// a 409 idempotency_response_unavailable: RunID on an invoke,
	// MessageID on a message send, CommentID on a comment reply.
	RunID, MessageID, CommentID string
	// IdempotencyKey is the key the call sent (the caller's, or the one
	// the client generated), on the calls that take one; "" on others.
	// IdempotencyKeyOf reads it from any error of such a call.
	IdempotencyKey string
}

// Error returns the code, the status, the message and the request id.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("parley: ")
	if e.Code != "" {
		b.WriteString(e.Code)
		b.WriteString(" ")
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, "(%d %s)", e.Status, http.StatusText(e.Status))
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.RequestID != "" {
		b.WriteString(" [request id ")
		b.WriteString(e.RequestID)
		b.WriteString("]")
	}
	return b.String()
}

// Is reports whether target is an *Error with the same Code, so that
// errors.Is(err, parley.ErrRateLimited) holds for every rate_limited
// answer.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code != "" && t.Code == e.Code
}

// sentinels is every sentinel, in the order declared.
var sentinels []*Error

func sentinel(status int, code string) *Error {
	e := &Error{Status: status, Code: code, Message: "the sentinel of " + code}
	sentinels = append(sentinels, e)
	return e
}

// Codes returns the code of every sentinel this package declares, one per
// error code of Parley's API document: a test (in any module) can check
// them against the document. The slice is the caller's.
func Codes() []string {
	out := make([]string, len(sentinels))
	for i, e := range sentinels {
		out[i] = e.Code
	}
	return out
}

// The sentinels, one per documented error code, for errors.Is. Each holds
// the code's usual status; compare with errors.Is, never with ==.
var (
	// Shared codes, which any route may answer.

	ErrInvalidRequest     = sentinel(400, "invalid_request")
	ErrUnauthorized       = sentinel(401, "unauthorized")
	ErrModuleInactive     = sentinel(403, "module_inactive")
	ErrNotFound           = sentinel(404, "not_found")
	ErrMethodNotAllowed   = sentinel(405, "method_not_allowed")
	ErrRequestTimeout     = sentinel(408, "request_timeout")
	ErrPayloadTooLarge    = sentinel(413, "payload_too_large")
	ErrRateLimited        = sentinel(429, "rate_limited")
	ErrInternalError      = sentinel(500, "internal_error")
	ErrPlatformError      = sentinel(502, "platform_error")
	ErrServiceUnavailable = sentinel(503, "service_unavailable")

	// Idempotency-Key codes (sends, comment replies, invoke).

	ErrIdempotencyKeyInvalid          = sentinel(400, "idempotency_key_invalid")
	ErrIdempotencyInProgress          = sentinel(409, "idempotency_in_progress")
	ErrIdempotencyResponseUnavailable = sentinel(409, "idempotency_response_unavailable")
	ErrIdempotencyKeyReuse            = sentinel(422, "idempotency_key_reuse")

	// Conversations and sending.

	ErrTagUnsupported         = sentinel(400, "tag_unsupported")
	ErrConversationNotFound   = sentinel(404, "conversation_not_found")
	ErrOutsideMessagingWindow = sentinel(409, "outside_messaging_window")
	ErrPlatformUnsupported    = sentinel(501, "platform_unsupported")

	// Comments.

	ErrCommentNotFound             = sentinel(404, "comment_not_found")
	ErrPrivateReplyUsed            = sentinel(409, "private_reply_used")
	ErrPrivateReplyExpired         = sentinel(409, "private_reply_expired")
	ErrPrivateReplyCommenterWindow = sentinel(429, "private_reply_commenter_window")
	ErrPrivateReplyDailyCap        = sentinel(429, "private_reply_daily_cap")

	// Webhooks.

	ErrWebhookNotFound = sentinel(404, "webhook_not_found")

	// Flows.

	ErrInputInvalid       = sentinel(400, "input_invalid")
	ErrFlowNotFound       = sentinel(404, "flow_not_found")
	ErrSessionNotFound    = sentinel(404, "session_not_found")
	ErrRunNotFound        = sentinel(404, "run_not_found")
	ErrSessionBusy        = sentinel(409, "session_busy")
	ErrSessionExpired     = sentinel(410, "session_expired")
	ErrFlowNotInvokable   = sentinel(422, "flow_not_invokable")
	ErrConcurrencyLimited = sentinel(429, "concurrency_limited")
	ErrDailyInvokeCap     = sentinel(429, "daily_invoke_cap")
	ErrGuardNotWired      = sentinel(503, "guard_not_wired")
)

// ErrStreamDropped is yielded by InvokeStream and ContinueStream when the
// event stream ends before its end event (the connection was reset or
// closed). The server then stops the run and stores it failed, unless the
// connection was lost after the run ended: Client.Run with the RunStart's
// RunID tells. To run the flow again, call again with a new
// Idempotency-Key (the old key replays the stored answer).
var ErrStreamDropped = errors.New("parley: the event stream ended before its end event; " +
	"the run is stored failed (Run with its run id tells): retry with a new Idempotency-Key")

// ErrMalformedAnswer is wrapped by the error of a success (2xx) answer the
// client cannot read as the API's: not its JSON (a proxy's page), no body
// where one is due (a 204), a body over the client's bound (64 MiB, the
// largest answer Parley sends), a stream's line or event over that bound
// or not JSON, or a page whose next_before does not go back in time.
// Such an answer is never retried: the call may have acted. On a call
// that carries an Idempotency-Key, IdempotencyKeyOf(err) reads its key.
var ErrMalformedAnswer = errors.New("parley: an answer that is not the API's")

// keyedError is a failure of a call that carried an Idempotency-Key and
// got no answer of the API's (a lost connection, a body cut short), with
// that key.
type keyedError struct {
	key string
	err error
}

func (e *keyedError) Error() string { return e.err.Error() }
func (e *keyedError) Unwrap() error { return e.err }

// IdempotencyKeyOf returns the Idempotency-Key of the call that failed
// with err, or "" when the call took none. When the client's retries run
// out on a send or an invoke (still idempotency_in_progress, or no answer
// at all), or its context ends first (err then matches the context's
// error), the first attempt may have acted: repeat the call later with
// WithIdempotencyKey(IdempotencyKeyOf(err)), and the server answers it
// once, replaying the first answer if there was one.
func IdempotencyKeyOf(err error) string {
	var ke *keyedError
	if errors.As(err, &ke) {
		return ke.key
	}
	var e *Error
	if errors.As(err, &e) {
		return e.IdempotencyKey
	}
	return ""
}
