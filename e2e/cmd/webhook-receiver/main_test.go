package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/sdk/go/webhook"
)

// The receiver prints each genuine event once, its body as Parley sent it
// (the delivery log's payload: `<` and `&` as written, milliseconds kept),
// and refuses the rest; the checks themselves are the webhook package's,
// tested there.
func TestReceiverPrintsEachEventOnce(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var out bytes.Buffer
	rc := newReceiver("whsec_test", &out, webhook.WithClock(func() time.Time { return now }))
	body := `{"id":"d1","event":"message.received","created_at":"2026-11-22T00:00:00.000Z","data":{"workspace_id":"w1",` +
		`"conversation_id":"c1","platform":"telegram","channel":{"kind":"telegram","external_id":"bot"},` +
		`"contact":{"id":"k1","sender_id":"4242","name":"Ada","profile_pic":""},` +
		`"message":{"id":"m1","text":"Is <b> & c ok?","type":"text","external_id":"1","created_at":"2026-11-22T00:00:00.000Z"}}}`

	tests := []struct {
		name, secret string
		at           time.Time
		want         int
	}{
		{"valid", "whsec_test", now, http.StatusOK},
		{"retry of the same delivery", "whsec_test", now.Add(time.Second), http.StatusOK},
		{"other secret", "whsec_old", now, http.StatusUnauthorized},
		{"timestamp outside 300 s", "whsec_test", now.Add(-301 * time.Second), http.StatusUnauthorized},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(tt.at.Unix(), 10))
		req.Header.Set(webhook.HeaderSignature, webhook.Sign(tt.secret, tt.at.Unix(), []byte(body)))
		req.Header.Set(webhook.HeaderDelivery, "d1")
		req.Header.Set(webhook.HeaderEvent, "message.received")
		rec := httptest.NewRecorder()
		rc.ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("%s: status %d %q, want %d", tt.name, rec.Code, rec.Body, tt.want)
		}
	}
	want := "message.received " + body + "\n"
	if out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
}
