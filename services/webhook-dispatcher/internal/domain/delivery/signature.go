package delivery

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// SignaturePrefix starts X-Service-Signature.
const SignaturePrefix = "sha256="

// Sign returns X-Service-Signature for body sent at unix time ts:
// "sha256=" and the hex HMAC-SHA256 of "<ts>.<body>" keyed with secret.
func Sign(secret string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(ts, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return SignaturePrefix + hex.EncodeToString(mac.Sum(nil))
}

// Verify reports, in constant time, whether signature is Sign(secret, ts,
// body). It is what a receiver does; the dispatcher's tests use it.
func Verify(secret string, ts int64, body []byte, signature string) bool {
	return hmac.Equal([]byte(Sign(secret, ts, body)), []byte(signature))
}
