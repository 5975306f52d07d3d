package meta

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

const (
	pageID = "106372195012345"
	psid   = "6843201987654321"
	igID   = "17841400000000001"
	igsid  = "1104567890123456"
)

// readEntries reads the entries of a testdata notification.
func readEntries(t testing.TB, name string) []Entry {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return mustEntries(t, raw)
}

// mustEntries reads the entries of the notification raw, which must all
// be readable.
func mustEntries(t testing.TB, raw []byte) []Entry {
	t.Helper()
	var n Notification
	if err := json.Unmarshal(raw, &n); err != nil {
		t.Fatal(err)
	}
	out := make([]Entry, len(n.Entry))
	for i, r := range n.Entry {
		e, err := ParseEntry(r)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = e
	}
	return out
}

// deliveriesOf parses every messaging event of entries.
func deliveriesOf(entries []Entry, receivedAt time.Time) []Delivery {
	var out []Delivery
	for _, e := range entries {
		for _, raw := range e.Messaging {
			m, err := ParseMessaging(raw)
			if err != nil {
				panic(err)
			}
			out = append(out, m.Deliveries(e.ID, receivedAt)...)
		}
	}
	return out
}

func ms(n int64) time.Time { return time.UnixMilli(n).UTC() }

func TestDeliveries(t *testing.T) {
	t.Parallel()
	received := time.Date(2026, 1, 15, 10, 30, 0, 0, time.UTC)
	customer := func(sender string, at int64, in conversation.Inbound) conversation.Inbound {
		in.SenderID, in.ReplyTo, in.SentAt = sender, sender, ms(at)
		return in
	}
	tests := []struct {
		name string
		file string
		want []Delivery
	}{
		{
			name: "text message",
			file: "messenger_text.json",
			want: []Delivery{{
				Key: "meta:mid:m_AG5Hz2Uq7tuwNEhXfYYKj8mJEM_QPpz5jdCK48PnKAjSdjfipqxqMvK8ma6AC8fplwlqLP_5cgXIbu7I3rBN0P",
				Inbound: customer(psid, 1768471200123, conversation.Inbound{
					Type: "text", Text: "Hi, is the blue jacket in stock?",
					ExternalID: "m_AG5Hz2Uq7tuwNEhXfYYKj8mJEM_QPpz5jdCK48PnKAjSdjfipqxqMvK8ma6AC8fplwlqLP_5cgXIbu7I3rBN0P",
				}),
			}},
		},
		{name: "the page's echo is dropped", file: "messenger_echo.json", want: nil},
		{
			name: "quick reply",
			file: "messenger_quick_reply.json",
			want: []Delivery{{
				Key: "meta:mid:m_qr_9hQ2cX1bVnLk3sT0",
				Inbound: customer(psid, 1768471299500, conversation.Inbound{
					Type: "text", Text: "Size M", ExternalID: "m_qr_9hQ2cX1bVnLk3sT0",
					Metadata: map[string]any{"quick_reply_payload": "Size M"},
				}),
			}},
		},
		{
			name: "several attachments become one message each; one attachment is one message",
			file: "messenger_attachments.json",
			want: []Delivery{
				{Key: "meta:mid:m_att_Jk2nB7vQ0pLx", Inbound: customer(psid, 1768471399001, conversation.Inbound{
					Type: "image", ExternalID: "m_att_Jk2nB7vQ0pLx",
					Attachment: &conversation.Attachment{Type: "image", URL: "https://scontent.xx.fbcdn.net/v/t1.15752-9/receipt-front.jpg?_nc_cat=1&oh=00_AfA"},
					Metadata:   map[string]any{"attachment_index": 0, "attachment_count": 3},
				})},
				{Key: "meta:mid:m_att_Jk2nB7vQ0pLx:1", Inbound: customer(psid, 1768471399001, conversation.Inbound{
					Type: "image", ExternalID: "m_att_Jk2nB7vQ0pLx",
					Attachment: &conversation.Attachment{Type: "image", URL: "https://scontent.xx.fbcdn.net/v/t1.15752-9/receipt-back.jpg?_nc_cat=1&oh=00_AfB"},
					Metadata:   map[string]any{"attachment_index": 1, "attachment_count": 3},
				})},
				{Key: "meta:mid:m_att_Jk2nB7vQ0pLx:2", Inbound: customer(psid, 1768471399001, conversation.Inbound{
					Type: "file", ExternalID: "m_att_Jk2nB7vQ0pLx",
					Attachment: &conversation.Attachment{Type: "file", URL: "https://cdn.fbsbx.com/v/t59.2708-21/invoice.pdf?_nc_cat=1"},
					Metadata:   map[string]any{"attachment_index": 2, "attachment_count": 3},
				})},
				{Key: "meta:mid:m_att_audio_Q8s", Inbound: customer(psid, 1768471399502, conversation.Inbound{
					Type: "audio", ExternalID: "m_att_audio_Q8s",
					Attachment: &conversation.Attachment{Type: "audio", URL: "https://cdn.fbsbx.com/v/t59.3654-21/audioclip-1768471399.mp4?_nc_cat=1"},
				})},
			},
		},
		{
			name: "postbacks with and without a mid",
			file: "messenger_postback.json",
			want: []Delivery{
				{Key: "meta:mid:m_pb_Xr4tY7uI", Inbound: customer(psid, 1768471499750, conversation.Inbound{
					Type: "postback", Text: "Talk to us", ExternalID: "m_pb_Xr4tY7uI",
					Postback: &conversation.Postback{Payload: "HUMAN"},
				})},
				{Key: "meta:postback:3f73d34270cb4d6d8a4548b0c1c371487242013111d3c580ea8896921c0cff24", Inbound: customer(psid, 1768471499999, conversation.Inbound{
					Type: "postback", Text: "Get Started",
					Postback: &conversation.Postback{Payload: "GET_STARTED"},
				})},
			},
		},
		{name: "delivery and read receipts and reactions carry no message", file: "messenger_receipts.json", want: nil},
		{
			name: "instagram text",
			file: "instagram_text.json",
			want: []Delivery{{
				Key: "meta:mid:aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOjE3ODQxNDAwMDAwMDAwMDAx",
				Inbound: customer(igsid, 1768471699321, conversation.Inbound{
					Type: "text", Text: "Do you ship to Ulaanbaatar?", ExternalID: "aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOjE3ODQxNDAwMDAwMDAwMDAx",
				}),
			}},
		},
		{
			name: "instagram story mention kept, unsent notice and echo dropped",
			file: "instagram_story_mention.json",
			want: []Delivery{{
				Key: "meta:mid:aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOnN0b3J5",
				Inbound: customer(igsid, 1768471799000, conversation.Inbound{
					Type: "story_mention", ExternalID: "aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOnN0b3J5",
					Attachment: &conversation.Attachment{Type: "story_mention", URL: "https://lookaside.fbsbx.com/ig_messaging_cdn/?asset_id=17900000000000001&signature=AbC"},
				}),
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := deliveriesOf(readEntries(t, tt.file), received)
			if !reflect.DeepEqual(got, tt.want) {
				gj, _ := json.MarshalIndent(got, "", "  ")
				wj, _ := json.MarshalIndent(tt.want, "", "  ")
				t.Fatalf("deliveries =\n%s\nwant\n%s", gj, wj)
			}
		})
	}
}

// mustParse is ParseMessaging of raw, which must succeed.
func mustParse(raw string) Messaging {
	m, err := ParseMessaging(json.RawMessage(raw))
	if err != nil {
		panic(err)
	}
	return m
}

func TestDeliveriesEdgeCases(t *testing.T) {
	t.Parallel()
	received := time.Date(2026, 1, 15, 10, 30, 0, 0, time.UTC)
	tests := []struct {
		name     string
		give     Messaging
		wantKeys []string
		check    func(t *testing.T, d []Delivery)
	}{
		{
			name:     "no timestamp: the time of receipt",
			give:     Messaging{Sender: Party{"7"}, Message: &Message{MID: "m1", Text: "hi"}},
			wantKeys: []string{"meta:mid:m1"},
			check: func(t *testing.T, d []Delivery) {
				if !d[0].Inbound.SentAt.Equal(received) {
					t.Fatalf("sent at %v", d[0].Inbound.SentAt)
				}
			},
		},
		{
			// SHA-256 of {"message":{"text":"hi"},"sender":{"id":"7"},"timestamp":1768471200000}
			name:     "a message without a mid is keyed by its content",
			give:     mustParse(` { "timestamp": 1768471200000, "sender": {"id": "7"}, "message": {"text": "hi"} }`),
			wantKeys: []string{"meta:message:0432d37b3937e31aee7c9d250e963628b956a849b71bb037646e46d4bc5db608"},
		},
		{
			name: "attachments without a mid",
			give: mustParse(`{"sender":{"id":"7"},"message":{"attachments":[{"type":"image"},{"type":"file"}]}}`),
			wantKeys: []string{
				"meta:message:b06f800cafc556950c2e5bd1e1870ba0051976bfed437b3c887ba91f1d34080f",
				"meta:message:b06f800cafc556950c2e5bd1e1870ba0051976bfed437b3c887ba91f1d34080f:1",
			},
		},
		{
			name:     "text with an attachment: the text goes with it",
			give:     Messaging{Sender: Party{"7"}, Timestamp: 1, Message: &Message{MID: "m2", Text: "see this", Attachments: []Attachment{{Type: "image"}}}},
			wantKeys: []string{"meta:mid:m2"},
			check: func(t *testing.T, d []Delivery) {
				if in := d[0].Inbound; in.Text != "see this" || in.Type != "image" || in.Attachment == nil {
					t.Fatalf("inbound %+v", in)
				}
			},
		},
		{
			name:     "an attachment without a type is a file",
			give:     Messaging{Sender: Party{"7"}, Timestamp: 1, Message: &Message{MID: "m3", Attachments: []Attachment{{}}}},
			wantKeys: []string{"meta:mid:m3"},
			check: func(t *testing.T, d []Delivery) {
				if d[0].Inbound.Type != "file" || d[0].Inbound.Attachment.Type != "file" {
					t.Fatalf("inbound %+v", d[0].Inbound)
				}
			},
		},
		{name: "no sender", give: Messaging{Timestamp: 1, Message: &Message{MID: "m4", Text: "x"}}},
		{name: "the page writing without is_echo", give: Messaging{Sender: Party{pageID}, Timestamp: 1, Message: &Message{MID: "m5", Text: "x"}}},
		{name: "empty message", give: Messaging{Sender: Party{"7"}, Timestamp: 1, Message: &Message{MID: "m6"}}},
		{name: "unsupported message", give: Messaging{Sender: Party{"7"}, Timestamp: 1, Message: &Message{MID: "m7", IsUnsupported: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.give.Deliveries(pageID, received)
			var keys []string
			for _, d := range got {
				keys = append(keys, d.Key)
			}
			if !reflect.DeepEqual(keys, tt.wantKeys) {
				t.Fatalf("keys = %v, want %v", keys, tt.wantKeys)
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

// FuzzDeliveries feeds arbitrary webhook bodies through the parser: it
// never panics, and every delivery it returns is keyed, from a customer,
// and replies to that customer.
func FuzzDeliveries(f *testing.F) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			raw, err := os.ReadFile(filepath.Join("testdata", e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(raw)
		}
	}
	f.Add([]byte(`{"object":"page","entry":[{"id":"1","messaging":[{"sender":{"id":"2"},"message":{"attachments":[{},{}]}}]}]}`))
	f.Add([]byte(`{"object":"page","entry":[{"id":"1","messaging":[{"sender":{"id":"2"},"postback":{}}]}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var n Notification
		if json.Unmarshal(raw, &n) != nil {
			return
		}
		for _, raw := range n.Entry {
			e, err := ParseEntry(raw)
			if err != nil {
				if !errors.Is(err, ErrMalformedEntry) {
					t.Fatalf("ParseEntry: %v", err)
				}
				continue
			}
			for _, raw := range e.Messaging {
				m, err := ParseMessaging(raw)
				if err != nil {
					if !errors.Is(err, ErrMalformedMessaging) {
						t.Fatalf("ParseMessaging: %v", err)
					}
					continue
				}
				for _, d := range m.Deliveries(e.ID, time.Unix(0, 0)) {
					if !strings.HasPrefix(d.Key, "meta:") || d.Inbound.SenderID == "" || d.Inbound.SenderID == e.ID ||
						d.Inbound.ReplyTo != d.Inbound.SenderID || d.Inbound.Type == "" {
						t.Fatalf("delivery %+v of entry %s", d, e.ID)
					}
				}
			}
		}
	})
}
