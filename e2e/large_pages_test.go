package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// TestLargestPagesComeBackWhole reads the largest pages the API documents
// through the gateway: 100 messages of 4,096 characters that JSON escapes
// to six bytes each ("<" is \u003c), about 2.4 MB, and the delivery log
// page of their events, larger still. Both are over NATS's 1 MiB
// max_payload, so they cross from the service in chunks; each must arrive
// whole, as valid JSON (a chunk lost fails the call: docs/architecture.md
// "Large replies travel in chunks"). How long they take is logged, not
// bounded: on a shared machine that is a benchmark's to say.
func TestLargestPagesComeBackWhole(t *testing.T) {
	t.Parallel()
	sh := newTgShop(t)
	text := strings.Repeat("<", 4096)
	first := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := range 100 {
		sh.customerWrites(t, int64(i+1), 4242, "Ada", first.Add(time.Duration(i)*time.Second), text)
	}
	events := sh.rcv.WaitForN(t, "message.received", 100)
	var ev customerEvent
	if err := json.Unmarshal(events[0].Body, &ev); err != nil || ev.Data.ConversationID == "" {
		t.Fatalf("event %s: %v", events[0].Body, err)
	}

	var page struct {
		Messages []struct {
			Content string `json:"content"`
			Sender  string `json:"sender"`
		} `json:"messages"`
	}
	raw := sh.timedGet(t, "/v1/conversations/"+ev.Data.ConversationID+"/messages?limit=100", &page)
	if len(raw) < 2_400_000 {
		t.Fatalf("the messages page is %d bytes; the test means one over 2.4 MB", len(raw))
	}
	if len(page.Messages) != 100 {
		t.Fatalf("%d messages on the page, want 100", len(page.Messages))
	}
	for i, m := range page.Messages {
		if m.Content != text || m.Sender != "contact" {
			t.Fatalf("message %d: %d characters from %q, want the 4,096 sent by the contact", i, len(m.Content), m.Sender)
		}
	}

	// The log records an outcome just after the receiver answers.
	wait.Until(t, 15*time.Second, "100 delivered in the log", func() bool {
		n := 0
		for _, d := range sh.s.deliveries(t, sh.key, "limit=100&status=delivered") {
			if d["event"] == "message.received" {
				n++
			}
		}
		return n == 100
	})
	var log struct {
		Deliveries []struct {
			Event   string `json:"event"`
			Status  string `json:"status"`
			Payload string `json:"payload"`
		} `json:"deliveries"`
	}
	raw = sh.timedGet(t, "/v1/webhook/deliveries?limit=100", &log)
	if len(raw) < 2_400_000 {
		t.Fatalf("the delivery log page is %d bytes; the test means one over 2.4 MB", len(raw))
	}
	if len(log.Deliveries) != 100 {
		t.Fatalf("%d deliveries on the page, want 100", len(log.Deliveries))
	}
	for i, d := range log.Deliveries {
		var body customerEvent
		if err := json.Unmarshal([]byte(d.Payload), &body); err != nil {
			t.Fatalf("delivery %d: payload is not the JSON body: %v", i, err)
		}
		if got, _ := body.Data.Message["text"].(string); d.Event != "message.received" || d.Status != "delivered" || got != text {
			t.Fatalf("delivery %d: %s %s, message of %d characters", i, d.Event, d.Status, len(got))
		}
	}
}

// timedGet calls path through the gateway, checks that a whole, valid 200
// answer came back within two seconds, decodes it into out and returns it.
func (sh *tgShop) timedGet(t *testing.T, path string, out any) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, sh.s.gatewayURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+sh.key)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d after %s: %.300s", path, resp.StatusCode, took, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("GET %s: %d bytes that are not valid JSON: %v", path, len(raw), err)
	}
	t.Logf("GET %s: %d bytes in %s", path, len(raw), took)
	return raw
}
