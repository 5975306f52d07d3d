package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The golden vector in testdata was computed outside Go (Python's hmac), so
// a change to what is signed (order, separator, encoding) fails here.
func TestSignGoldenVector(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/signature.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Secret    string `json:"secret"`
		Timestamp int64  `json:"timestamp"`
		Body      string `json:"body"`
		Signature string `json:"signature"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if got := Sign(v.Secret, v.Timestamp, []byte(v.Body)); got != v.Signature {
		t.Fatalf("Sign = %s, want %s", got, v.Signature)
	}
	h := http.Header{}
	h.Set(HeaderTimestamp, strconv.FormatInt(v.Timestamp, 10))
	h.Set(HeaderSignature, v.Signature)
	if err := VerifyAt(v.Secret, h, []byte(v.Body), time.Unix(v.Timestamp, 0)); err != nil {
		t.Fatalf("VerifyAt refused the golden delivery: %v", err)
	}
	// HMAC-SHA256("whsec_test", "1800000000.{}"), computed with openssl
	// dgst -sha256 -hmac whsec_test.
	const want = "sha256=482e6337ac5272392d375c6fdc4d52a7e615dc2facedab0ffe155ddfd6a56e66"
	if got := Sign("whsec_test", 1_800_000_000, []byte("{}")); got != want {
		t.Fatalf("Sign = %q, want %q", got, want)
	}
}

func TestVerifyAt(t *testing.T) {
	t.Parallel()
	const secret = "whsec_test"
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"d1","event":"test","created_at":"2026-11-22T00:00:00.000Z","data":{}}`)
	at := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	signed := func(ts string) string { return sign(secret, ts, body) }
	fresh := at(0)

	tests := []struct {
		name    string
		ts, sig string // "-" leaves the header out
		body    []byte
		want    error
		secret  string   // "" is secret, "-" the empty secret
		extra   []string // more X-Service-Signature values, after sig
	}{
		{"now", fresh, signed(fresh), body, nil, "", nil},
		{"300 s ago", at(-300 * time.Second), signed(at(-300 * time.Second)), body, nil, "", nil},
		{"300 s ahead", at(300 * time.Second), signed(at(300 * time.Second)), body, nil, "", nil},
		{"301 s ago", at(-301 * time.Second), signed(at(-301 * time.Second)), body, ErrTimestamp, "", nil},
		{"301 s ahead", at(301 * time.Second), signed(at(301 * time.Second)), body, ErrTimestamp, "", nil},
		{"a year ahead", at(365 * 24 * time.Hour), signed(at(365 * 24 * time.Hour)), body, ErrTimestamp, "", nil},
		{"far future", "9223372036854775807", signed("9223372036854775807"), body, ErrTimestamp, "", nil},
		{"not a number", "yesterday", signed("yesterday"), body, ErrTimestamp, "", nil},
		{"negative", "-1", signed("-1"), body, ErrTimestamp, "", nil},
		{"wrong secret", fresh, sign("whsec_other", fresh, body), body, ErrSignature, "", nil},
		{"tampered body", fresh, signed(fresh), append([]byte(" "), body...), ErrSignature, "", nil},
		{"signature of another timestamp", fresh, signed(at(-1 * time.Second)), body, ErrSignature, "", nil},
		{"upper-case hex", fresh, "sha256=" + strings.ToUpper(strings.TrimPrefix(signed(fresh), "sha256=")), body, ErrSignature, "", nil},
		{"no prefix", fresh, strings.TrimPrefix(signed(fresh), "sha256="), body, ErrSignature, "", nil},
		{"no timestamp", "-", signed(fresh), body, ErrMissingHeader, "", nil},
		{"no signature", fresh, "-", body, ErrMissingHeader, "", nil},
		{"one byte changed", fresh, signed(fresh), bytes.Replace(body, []byte("d1"), []byte("d2"), 1), ErrSignature, "", nil},
		{"one byte more", fresh, signed(fresh), append(slices.Clone(body), '\n'), ErrSignature, "", nil},
		{"another version", fresh, "sha512=" + strings.TrimPrefix(signed(fresh), "sha256="), body, ErrSignature, "", nil},
		{"v1= as other services sign", fresh, "v1=" + strings.TrimPrefix(signed(fresh), "sha256="), body, ErrSignature, "", nil},
		{"the prefix alone", fresh, "sha256=", body, ErrSignature, "", nil},
		{"truncated", fresh, signed(fresh)[:40], body, ErrSignature, "", nil},
		{"padded", fresh, signed(fresh) + "00", body, ErrSignature, "", nil},
		{"a list with the right one second", fresh, "sha256=00," + signed(fresh), body, ErrSignature, "", nil},
		{"huge", fresh, "sha256=" + strings.Repeat("ab", 1<<19), body, ErrSignature, "", nil},
		{"a forged one first, the genuine one duplicated after", fresh, sign("whsec_other", fresh, body), body, ErrSignature, "", []string{signed(fresh)}},
		{"a huge timestamp", strings.Repeat("9", 1<<16), signed(strings.Repeat("9", 1<<16)), body, ErrTimestamp, "", nil},
		{"an empty secret", fresh, sign("", fresh, body), body, ErrSignature, "-", nil},
		// An unset secret is told as such whatever the delivery.
		{"an empty secret, a stale timestamp", at(-301 * time.Second), sign("", at(-301*time.Second), body), body, ErrSignature, "-", nil},
		{"an empty secret, no headers", "-", "-", body, ErrSignature, "-", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			if tt.secret == "" {
				tt.secret = secret
			}
			if tt.ts != "-" {
				h.Set(HeaderTimestamp, tt.ts)
			}
			if tt.sig != "-" {
				h.Set(HeaderSignature, tt.sig)
			}
			if tt.secret == "-" {
				tt.secret = ""
			}
			for _, extra := range tt.extra {
				h.Add(HeaderSignature, extra)
			}
			err := VerifyAt(tt.secret, h, tt.body, now)
			if tt.want == nil && err != nil {
				t.Fatalf("VerifyAt = %v, want nil", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("VerifyAt = %v, want %v", err, tt.want)
			}
		})
	}
}

// Verify checks against the machine's clock.
func TestVerifyNow(t *testing.T) {
	t.Parallel()
	body := []byte(`{}`)
	h := http.Header{}
	ts := time.Now().Unix()
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, Sign("whsec_k", ts, body))
	if err := Verify("whsec_k", h, body); err != nil {
		t.Fatalf("Verify = %v", err)
	}
	h.Set(HeaderTimestamp, strconv.FormatInt(ts-3600, 10))
	h.Set(HeaderSignature, Sign("whsec_k", ts-3600, body))
	if err := Verify("whsec_k", h, body); !errors.Is(err, ErrTimestamp) {
		t.Fatalf("Verify of an hour-old delivery = %v, want ErrTimestamp", err)
	}
}

func FuzzVerifyAt(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	f.Add("1800000000", "sha256=00", []byte(`{}`))
	f.Add("", "", []byte(nil))
	f.Add("+1800000000", sign("k", "+1800000000", []byte("x")), []byte("x"))
	f.Fuzz(func(t *testing.T, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderSignature, sig)
		err := VerifyAt("k", h, body, now)
		if err == nil && sig != sign("k", ts, body) {
			t.Fatalf("accepted %q for %q at %q", sig, body, ts)
		}
	})
}

// Header names are case-insensitive: a header map built by hand or by
// another framework (lower-case keys, as HTTP/2 and many gateways give
// them) verifies as net/http's does.
func TestVerifyHeaderNamesAnyCase(t *testing.T) {
	t.Parallel()
	const secret = "whsec_test"
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	for _, h := range []http.Header{
		{"x-service-timestamp": {ts}, "x-service-signature": {sign(secret, ts, body)}},
		{"X-SERVICE-TIMESTAMP": {ts}, "X-Service-signature": {sign(secret, ts, body)}},
	} {
		if err := VerifyAt(secret, h, body, now); err != nil {
			t.Errorf("VerifyAt(%v) = %v, want nil", h, err)
		}
	}
	h := http.Header{"x-service-timestamp": {ts}, "x-service-signature": {sign("whsec_other", ts, body)}}
	if err := VerifyAt(secret, h, body, now); !errors.Is(err, ErrSignature) {
		t.Errorf("a wrong signature under a lower-case name: %v, want ErrSignature", err)
	}
}
