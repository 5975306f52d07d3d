package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// sendKeyed posts body to the gateway's path with the workspace's API key
// and an Idempotency-Key, and returns the raw answer.
func (sh *tgShop) sendKeyed(t *testing.T, path, idemKey, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, sh.s.gatewayURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+sh.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idempotencyKeyHeader, idemKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, raw
}

// TestIdempotentSendThroughTheGateway: a send repeated with its
// Idempotency-Key through the built gateway is the first answer again,
// with Idempotent-Replayed: true, and the customer gets one message; the
// key with another body is 422, a bad key 400.
func TestIdempotentSendThroughTheGateway(t *testing.T) {
	t.Parallel()
	sh := newTgShop(t)
	sh.customerWrites(t, 1, 5151, "Grace", time.Now().Add(-time.Minute), "Where is my order?")
	var event struct {
		Data struct {
			ConversationID string `json:"conversation_id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(sh.rcv.WaitFor(t, "message.received").Body, &event); err != nil {
		t.Fatal(err)
	}
	conv := event.Data.ConversationID
	body := fmt.Sprintf(`{"conversation_id": %q, "text": "It ships today"}`, conv)

	status, header, first := sh.sendKeyed(t, "/v1/messages", "ship-order-1", body)
	if status != http.StatusCreated || header.Get(replayedHeader) != "" {
		t.Fatalf("first send = %d %v %s", status, header, first)
	}
	for i := range 2 {
		status, header, again := sh.sendKeyed(t, "/v1/messages", "ship-order-1", body)
		if status != http.StatusCreated || header.Get(replayedHeader) != "true" || !bytes.Equal(again, first) {
			t.Fatalf("repeat %d = %d %s=%q %s, want %s replayed", i+1, status, replayedHeader, header.Get(replayedHeader), again, first)
		}
	}
	sends := 0
	for _, c := range sh.bot.Calls() {
		if c.Method == "sendMessage" && c.Params["text"] == "It ships today" {
			sends++
		}
	}
	if sends != 1 {
		t.Fatalf("Telegram received %d sends, want 1", sends)
	}

	other := fmt.Sprintf(`{"conversation_id": %q, "text": "It ships tomorrow"}`, conv)
	if status, _, raw := sh.sendKeyed(t, "/v1/messages", "ship-order-1", other); status != http.StatusUnprocessableEntity || !strings.Contains(string(raw), `"idempotency_key_reuse"`) {
		t.Fatalf("another body = %d %s", status, raw)
	}
	if status, _, raw := sh.sendKeyed(t, "/v1/messages", strings.Repeat("k", 129), body); status != http.StatusBadRequest || !strings.Contains(string(raw), `"idempotency_key_invalid"`) {
		t.Fatalf("a 129-character key = %d %s", status, raw)
	}
}
