package main

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/receiver"
)

func sign(secret, ts, body string) string { return receiver.Sign(secret, ts, []byte(body)) }

func TestReceiverVerifiesAndDeduplicates(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var handled []string
	rc := &Receiver{Secret: "whsec_test", Now: func() time.Time { return now }, seen: map[string]time.Time{},
		Handle: func(event string, body []byte) { handled = append(handled, event+" "+string(body)) }}
	body := `{"id":"d1","event":"test","created_at":"2026-11-22T00:00:00.000Z","data":{}}`
	fresh := strconv.FormatInt(now.Unix(), 10)
	stale := strconv.FormatInt(now.Add(-301*time.Second).Unix(), 10)

	tests := []struct {
		name, ts, sig, body, delivery string
		want                          int
		handled                       int
	}{
		{"valid", fresh, sign("whsec_test", fresh, body), body, "d1", http.StatusNoContent, 1},
		{"retry of the same delivery", fresh, sign("whsec_test", fresh, body), body, "d1", http.StatusNoContent, 1},
		{"tampered body", fresh, sign("whsec_test", fresh, body), body + " ", "d2", http.StatusUnauthorized, 1},
		{"other secret", fresh, sign("whsec_old", fresh, body), body, "d3", http.StatusUnauthorized, 1},
		{"timestamp outside 300 s", stale, sign("whsec_test", stale, body), body, "d4", http.StatusUnauthorized, 1},
		{"signature of another timestamp", fresh, sign("whsec_test", stale, body), body, "d5", http.StatusUnauthorized, 1},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
		req.Header.Set("X-Service-Timestamp", tt.ts)
		req.Header.Set("X-Service-Signature", tt.sig)
		req.Header.Set("X-Service-Delivery", tt.delivery)
		req.Header.Set("X-Service-Event", "test")
		rec := httptest.NewRecorder()
		rc.ServeHTTP(rec, req)
		if rec.Code != tt.want || len(handled) != tt.handled {
			t.Errorf("%s: status %d, handled %d; want %d, %d", tt.name, rec.Code, len(handled), tt.want, tt.handled)
		}
	}
}
