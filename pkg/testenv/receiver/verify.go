package receiver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// MaxSkew is the replay window of docs/webhooks.md "Verifying a delivery":
// a delivery signed longer ago
// (or further ahead) than this is refused, so a captured request cannot be
// replayed later.
const MaxSkew = 300 * time.Second

// The reasons Verify refuses a delivery, for errors.Is.
var (
	ErrTimestamp = errors.New("X-Service-Timestamp is not within 300 s of now")
	ErrSignature = errors.New("X-Service-Signature does not verify")
)

// Verify checks a webhook delivery the way docs/webhooks.md "Verifying a
// delivery" tells receivers to:
// X-Service-Signature must be "sha256=" + hex(HMAC-SHA256(secret,
// "<X-Service-Timestamp>.<raw body>")), compared in constant time, and the
// timestamp (unix seconds) within MaxSkew of now. It is the one
// implementation the tests and the example receiver (e2e/cmd/webhook-receiver)
// share, so what the tests accept is what the documented receiver accepts.
func Verify(secret string, header http.Header, body []byte, now time.Time) error {
	ts := header.Get("X-Service-Timestamp")
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q is not unix seconds", ErrTimestamp, ts)
	}
	if d := now.Sub(time.Unix(unix, 0)); d > MaxSkew || d < -MaxSkew {
		return fmt.Errorf("%w: %s is %s away", ErrTimestamp, ts, d)
	}
	got := header.Get("X-Service-Signature")
	if !hmac.Equal([]byte(got), []byte(Sign(secret, ts, body))) {
		return fmt.Errorf("%w: %q", ErrSignature, got)
	}
	return nil
}

// Sign returns the X-Service-Signature of body sent at timestamp ts (unix
// seconds, as in X-Service-Timestamp), for tests that forge deliveries.
func Sign(secret, ts string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}
