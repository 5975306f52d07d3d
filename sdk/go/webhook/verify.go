// Package webhook receives the events Parley delivers to a developer's
// webhook (docs/webhooks.md): it verifies a delivery's signature and
// timestamp (Verify), decodes the envelope into a typed event (Parse), and
// NewHandler puts both behind an http.Handler that also handles each
// delivery once, however often it arrives.
//
// Sign computes the signature Parley sends, for a receiver's own tests.
// The package depends on the standard library only.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a delivery (docs/webhooks.md "Headers").
const (
	// HeaderEvent is the event kind, as the envelope's event.
	HeaderEvent = "X-Service-Event"
	// HeaderDelivery is the delivery's id, as the envelope's id: the same
	// on every attempt and replay of one event.
	HeaderDelivery = "X-Service-Delivery"
	// HeaderTimestamp is when the attempt was sent, in Unix seconds.
	HeaderTimestamp = "X-Service-Timestamp"
	// HeaderSignature is SignaturePrefix and the hex HMAC-SHA256 of
	// "<timestamp>.<raw body>", keyed with the webhook's secret.
	HeaderSignature = "X-Service-Signature"
)

// SignaturePrefix starts every X-Service-Signature.
const SignaturePrefix = "sha256="

// Tolerance is how far X-Service-Timestamp may be from the receiver's
// clock, either way, before Verify refuses the delivery: a delivery
// recorded by someone else cannot be replayed later, as its timestamp is
// signed.
const Tolerance = 300 * time.Second

// The reasons Verify refuses a delivery, for errors.Is. The errors Verify
// returns wrap one of them and say which header and why.
var (
	// ErrMissingHeader: X-Service-Timestamp or X-Service-Signature is
	// absent.
	ErrMissingHeader = errors.New("webhook: missing header")
	// ErrTimestamp: X-Service-Timestamp is not Unix seconds, or is more
	// than Tolerance away from now.
	ErrTimestamp = errors.New("webhook: timestamp refused")
	// ErrSignature: X-Service-Signature is not the signature of the body
	// with the secret.
	ErrSignature = errors.New("webhook: signature does not match")
)

// Sign returns the X-Service-Signature of body sent at timestamp (Unix
// seconds): SignaturePrefix and the lower-case hex HMAC-SHA256, keyed with
// secret, of the timestamp's decimal digits, a dot, and body.
func Sign(secret string, timestamp int64, body []byte) string {
	return sign(secret, strconv.FormatInt(timestamp, 10), body)
}

func sign(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return SignaturePrefix + hex.EncodeToString(mac.Sum(nil))
}

// Verify checks a delivery as of now; see VerifyAt.
func Verify(secret string, header http.Header, body []byte) error {
	return VerifyAt(secret, header, body, time.Now())
}

// VerifyAt checks a delivery the way docs/webhooks.md "Verifying a
// delivery" says, as of now: X-Service-Timestamp must be within Tolerance
// of now, either way, and X-Service-Signature must be Sign of body (the raw
// bytes as received, before any parsing) at that timestamp, compared in
// constant time. A nil error means the delivery is genuine; otherwise the
// error wraps ErrMissingHeader, ErrTimestamp or ErrSignature. An empty
// secret (an unset environment variable) verifies nothing: anyone can
// sign with it, so every delivery is refused with ErrSignature.
//
// Deduplicating by X-Service-Delivery is the caller's part (NewHandler
// does it).
func VerifyAt(secret string, header http.Header, body []byte, now time.Time) error {
	// First: a receiver without its secret refuses every delivery the
	// same way, whatever the delivery's headers.
	if secret == "" {
		return fmt.Errorf("%w: no secret to check %s with", ErrSignature, HeaderSignature)
	}
	ts := headerValue(header, HeaderTimestamp)
	if ts == "" {
		return fmt.Errorf("%w: %s", ErrMissingHeader, HeaderTimestamp)
	}
	got := headerValue(header, HeaderSignature)
	if got == "" {
		return fmt.Errorf("%w: %s", ErrMissingHeader, HeaderSignature)
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || unix < 0 {
		return fmt.Errorf("%w: %s %q is not Unix seconds", ErrTimestamp, HeaderTimestamp, ts)
	}
	// Compare in seconds: a time.Duration overflows for timestamps far
	// from now, and a forged one could wrap into the window.
	if skew := now.Unix() - unix; skew > int64(Tolerance/time.Second) || skew < -int64(Tolerance/time.Second) {
		return fmt.Errorf("%w: %s %s is %ds from now, more than %s", ErrTimestamp, HeaderTimestamp, ts, skew, Tolerance)
	}
	if !hmac.Equal([]byte(got), []byte(sign(secret, ts, body))) {
		return fmt.Errorf("%w: %s", ErrSignature, HeaderSignature)
	}
	return nil
}

// headerValue is header's first value of name, whatever the case of the
// map's key: net/http's maps hold canonical keys, but one built by hand or
// by another framework may not.
func headerValue(header http.Header, name string) string {
	if v := header.Get(name); v != "" {
		return v
	}
	for k, vs := range header {
		if len(vs) > 0 && strings.EqualFold(k, name) {
			return vs[0]
		}
	}
	return ""
}
