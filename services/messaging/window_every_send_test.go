package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestEverySendKeepsTheWindowOnMessengerAndInstagram: on Messenger and on
// Instagram, each send route (messages, image, carousel, typing) is
// refused 409 outside_messaging_window for a customer who wrote before
// the window (MESSAGING_WINDOW, here 1 h), with nothing sent to Meta and
// nothing stored; the same sends to a customer inside the window go out.
func TestEverySendKeepsTheWindowOnMessengerAndInstagram(t *testing.T) {
	t.Parallel()
	graph := newMetaGraph(t)
	h := newHarness(t, withMeta(graph), withWindow(time.Hour))
	ws := uuid.NewString()
	h.metaChannel(ws, "messenger", testPageID, "external")
	h.metaChannel(ws, "instagram", testIGID, "external")
	now := time.Now()
	const freshPSID, stalePSID, freshIGSID, staleIGSID = "7100000000000001", "7100000000000002", "7200000000000001", "7200000000000002"
	h.sendMeta(notification("page", testPageID, textEvent(testPageID, freshPSID, "m_w1", "hello", now.Add(-time.Minute))))
	h.sendMeta(notification("page", testPageID, textEvent(testPageID, stalePSID, "m_w2", "hello", now.Add(-2*time.Hour))))
	h.sendMeta(notification("instagram", testIGID, textEvent(testIGID, freshIGSID, "m_w3", "hello", now.Add(-time.Minute))))
	h.sendMeta(notification("instagram", testIGID, textEvent(testIGID, staleIGSID, "m_w4", "hello", now.Add(-2*time.Hour))))
	convs := map[string]string{}
	for _, c := range h.conversations(ws, "").Conversations {
		convs[c.Contact.SenderID] = c.ID
	}
	if len(convs) != 4 {
		t.Fatalf("conversations by sender = %v, want 4", convs)
	}

	sends := []struct {
		path       string
		body       map[string]any
		wantStatus int
	}{
		{"/v1/messages", map[string]any{"text": "Still there?"}, http.StatusCreated},
		{"/v1/image", map[string]any{"image_url": "https://cdn.example/jacket.png", "text": "This one?"}, http.StatusCreated},
		{"/v1/carousel", map[string]any{"elements": []map[string]any{{"title": "Jacket", "subtitle": "$80", "image_url": "https://cdn.example/jacket.jpg"}}}, http.StatusCreated},
		{"/v1/typing", map[string]any{}, http.StatusOK},
	}
	send := func(conv, path string, fields map[string]any) (int, []byte) {
		t.Helper()
		body := map[string]any{"conversation_id": conv}
		for k, v := range fields {
			body[k] = v
		}
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		return h.apiRaw(ws, http.MethodPost, path, string(raw))
	}

	before := len(graph.sends())
	for _, sender := range []string{stalePSID, staleIGSID} {
		for _, s := range sends {
			status, raw := send(convs[sender], s.path, s.body)
			if status != http.StatusConflict {
				t.Errorf("%s to %s, 2 h after the customer wrote: %d %s, want 409 outside_messaging_window", s.path, sender, status, raw)
				continue
			}
			if code, _ := errorBody(t, raw); code != "outside_messaging_window" {
				t.Errorf("%s to %s, 2 h after the customer wrote: %d %s, want 409 outside_messaging_window", s.path, sender, status, raw)
			}
		}
	}
	if n := len(graph.sends()); n != before {
		t.Fatalf("meta got %d sends outside the window", n-before)
	}
	if n := h.count("messages", "sender = 'user'"); n != 0 {
		t.Fatalf("stored %d sent messages outside the window", n)
	}

	for _, sender := range []string{freshPSID, freshIGSID} {
		for _, s := range sends {
			if status, raw := send(convs[sender], s.path, s.body); status != s.wantStatus {
				t.Errorf("%s to %s, a minute after the customer wrote: %d %s, want %d", s.path, sender, status, raw, s.wantStatus)
			}
		}
	}
	// Per platform: a text, an image and its text, a carousel, typing.
	if n := len(graph.sends()); n != before+2*5 {
		t.Fatalf("meta got %d sends inside the window, want 10", n-before)
	}
}
