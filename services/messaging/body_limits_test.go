package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// padded is a valid JSON object of exactly n bytes: fields, then a pad
// field no route reads.
func padded(fields string, n int) string {
	frame := `{` + fields + `,"pad":""}`
	return `{` + fields + `,"pad":"` + strings.Repeat("x", n-len(frame)) + `"}`
}

// TestBodyLimitsOfThePublicListener: each route's documented limit is
// taken whole, and one byte more is 413 payload_too_large naming it, never
// a claim that valid JSON is malformed (docs/limits-and-errors.md "Request
// body limits").
func TestBodyLimitsOfThePublicListener(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tg := h.telegramChannel(uuid.NewString(), "auto")
	wc := h.webchatChannel(uuid.NewString(), "auto")
	token, _ := newVisitor(t, h.base, wc.ID)

	post := func(path, body string, header map[string]string) (int, string, string) {
		rec := h.post(path, body, header)
		if rec.Code == http.StatusOK || rec.Code == http.StatusCreated {
			return rec.Code, "", ""
		}
		code, message := errorBody(t, rec.Body.Bytes())
		return rec.Code, code, message
	}
	update := `"update_id":9001,"message":{"message_id":1,"date":1700000000,"from":{"id":7,"is_bot":false,"first_name":"A"},"chat":{"id":7,"type":"private"},"text":"hi"}`
	visitor := map[string]string{"X-Visitor-Token": token}
	tests := []struct {
		name      string
		path      string
		limit     int
		fields    string
		header    map[string]string
		atStatus  int // the answer at the limit: read whole, judged on its content
		atCode    string
		overLimit string
	}{
		{"telegram update", "/ingress/telegram/" + tg.ID, 1 << 20, update,
			map[string]string{"X-Telegram-Bot-Api-Secret-Token": tg.Secret}, http.StatusOK, "", "at most 1048576 bytes"},
		{"meta notification", "/ingress/meta", 4 << 20, `"object":"page","entry":[]`,
			map[string]string{"X-Hub-Signature-256": "sha256=00"}, http.StatusUnauthorized, "unauthorized", "at most 4194304 bytes"},
		{"webchat message", "/webchat/" + wc.ID + "/messages", 32 << 10, `"text":"hi"`,
			visitor, http.StatusCreated, "", "at most 32768 bytes"},
		{"webchat postback", "/webchat/" + wc.ID + "/postbacks", 8 << 10, `"payload":"BUY"`,
			visitor, http.StatusBadRequest, "invalid_request", "at most 8192 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, code, message := post(tt.path, padded(tt.fields, tt.limit), tt.header)
			if status != tt.atStatus || code != tt.atCode || strings.Contains(message, "not valid JSON") {
				t.Fatalf("at the limit: %d %s %q, want %d %s", status, code, message, tt.atStatus, tt.atCode)
			}
			status, code, message = post(tt.path, padded(tt.fields, tt.limit+1), tt.header)
			if status != http.StatusRequestEntityTooLarge || code != "payload_too_large" || !strings.Contains(message, tt.overLimit) {
				t.Fatalf("one byte over: %d %s %q, want 413 payload_too_large %q", status, code, message, tt.overLimit)
			}
		})
	}
}
