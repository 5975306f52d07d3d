package meta

import (
	"strconv"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// Delivery is one customer message a messaging event carries, with the key
// that stores it once however often Meta redelivers the event.
type Delivery struct {
	Key     string
	Inbound conversation.Inbound
}

// MessageKey names a message for ingress dedupe: "meta:mid:<mid>".
func MessageKey(mid string) string { return "meta:mid:" + mid }

// withoutMIDKey names a message or postback (kind) that came without a
// mid by the event's content (Messaging.contentDigest). Meta sends a mid
// with every message, and with postbacks but older Messenger ones; without
// it, nothing else tells two events apart: neither the sender and the
// timestamp (which may be missing too, or shared by two events) nor the
// text (a customer may send "ok" twice). A redelivery, the same event
// again, has the same key; two events that differ in anything Meta sent
// have different keys, so each is stored.
func withoutMIDKey(kind string, m Messaging) string {
	return "meta:" + kind + ":" + m.contentDigest()
}

// attachmentKey names the n-th attachment of the message keyed key. The
// first keeps the message's own key, so every message claims
// "meta:mid:<mid>" whatever it holds.
func attachmentKey(key string, n int) string {
	if n == 0 {
		return key
	}
	return key + ":" + strconv.Itoa(n)
}

// Metadata keys a Meta message adds to the stored message.
const (
	// MetadataQuickReplyPayload is the payload of the quick reply the
	// customer tapped; the message's text is the quick reply's title.
	MetadataQuickReplyPayload = "quick_reply_payload"
	// MetadataAttachmentIndex and MetadataAttachmentCount place one
	// attachment of a message that carried several (0-based index).
	MetadataAttachmentIndex = "attachment_index"
	MetadataAttachmentCount = "attachment_count"
)

// Deliveries returns the customer messages of one messaging event on the
// page or account pageID, nil when it carries none Parley stores:
//
//   - echoes (is_echo) and anything else the page itself sent: the page's
//     own messages are never stored nor forwarded;
//   - events other than a message or a postback (delivery and read
//     receipts, reactions, referrals, ...), and messages without text or
//     attachment (Instagram's is_deleted and is_unsupported notices).
//
// A text message, a quick reply (its text, with the payload in metadata)
// or a message with one attachment is one delivery keyed by its mid (one
// without a mid by its event's content, withoutMIDKey). A
// message with several attachments becomes one delivery per attachment, so
// that each keeps its {url, type}: the first keyed "meta:mid:<mid>" and
// carrying the message's text, the n-th "meta:mid:<mid>:<n>"; all have the
// mid as their external id. A postback is a delivery of type postback whose
// text is the button's title.
//
// The time of every delivery is Meta's timestamp (milliseconds); the
// messaging window counts from it. receivedAt stands in for a missing one.
// Replies go to the sender: the PSID (Messenger) or IGSID (Instagram).
func (m Messaging) Deliveries(pageID string, receivedAt time.Time) []Delivery {
	sender := m.Sender.ID
	if sender == "" || sender == pageID {
		return nil
	}
	sentAt := receivedAt.UTC()
	if m.Timestamp > 0 {
		sentAt = time.UnixMilli(m.Timestamp).UTC()
	}
	base := conversation.Inbound{SenderID: sender, ReplyTo: sender, SentAt: sentAt}

	switch {
	case m.Message != nil:
		key := MessageKey(m.Message.MID)
		if m.Message.MID == "" {
			key = withoutMIDKey("message", m)
		}
		return m.Message.deliveries(base, key)
	case m.Postback != nil:
		in := base
		in.Type = conversation.TypePostback
		in.Text = m.Postback.Title
		in.ExternalID = m.Postback.MID
		in.Postback = &conversation.Postback{Payload: m.Postback.Payload}
		key := MessageKey(m.Postback.MID)
		if m.Postback.MID == "" {
			key = withoutMIDKey("postback", m)
		}
		return []Delivery{{Key: key, Inbound: in}}
	}
	return nil
}

func (msg *Message) deliveries(base conversation.Inbound, key string) []Delivery {
	if msg.IsEcho || msg.IsDeleted || (msg.Text == "" && len(msg.Attachments) == 0) {
		return nil
	}
	base.ExternalID = msg.MID
	if len(msg.Attachments) == 0 {
		in := base
		in.Type = conversation.TypeText
		in.Text = msg.Text
		if msg.QuickReply != nil {
			in.Metadata = map[string]any{MetadataQuickReplyPayload: msg.QuickReply.Payload}
		}
		return []Delivery{{Key: key, Inbound: in}}
	}
	out := make([]Delivery, 0, len(msg.Attachments))
	for n, a := range msg.Attachments {
		in := base
		in.Type = a.Type
		if in.Type == "" {
			in.Type = "file"
		}
		if n == 0 {
			in.Text = msg.Text
		}
		in.Attachment = &conversation.Attachment{URL: a.Payload.URL, Type: in.Type}
		if len(msg.Attachments) > 1 {
			in.Metadata = map[string]any{MetadataAttachmentIndex: n, MetadataAttachmentCount: len(msg.Attachments)}
		}
		out = append(out, Delivery{Key: attachmentKey(key, n), Inbound: in})
	}
	return out
}
