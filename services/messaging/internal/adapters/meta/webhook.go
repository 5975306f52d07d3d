package meta

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// SignatureHeader carries Meta's signature of a webhook post:
// "sha256=" + hex(HMAC-SHA256(app secret, raw body)).
const SignatureHeader = "X-Hub-Signature-256"

// VerifySignature reports whether header signs body with appSecret,
// compared in constant time. An empty secret verifies nothing.
func VerifySignature(appSecret string, body []byte, header string) bool {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok || appSecret == "" {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, []byte(appSecret))
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// Sign returns the X-Hub-Signature-256 value of body, as Meta computes it.
func Sign(appSecret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(appSecret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Objects of a webhook post: which product the entries are about.
const (
	ObjectPage      = "page"      // Messenger and Facebook page feed
	ObjectInstagram = "instagram" // Instagram messaging and comments
)

// Notification is the body of a webhook post. Each entry is kept raw and
// read by ParseEntry, so that one entry that cannot be read does not make
// the whole post unreadable.
type Notification struct {
	Object string            `json:"object"`
	Entry  []json.RawMessage `json:"entry"`
}

// Entry is one page's (or Instagram account's) batch of events; ID is the
// page or account id, the channel's external_id. Each messaging event and
// each change is kept raw and read by ParseMessaging and ParseChange, so
// that one event that cannot be read does not make the whole batch
// unreadable.
type Entry struct {
	ID        string            `json:"id"`
	Time      int64             `json:"time"`
	Messaging []json.RawMessage `json:"messaging"`
	Changes   []json.RawMessage `json:"changes"`
}

// ErrMalformedEntry is an entry that is not an object with the fields of
// the types Meta documents (an id that is not a string, messaging or
// changes that are not arrays).
var ErrMalformedEntry = errors.New("malformed entry")

// ParseEntry reads one entry of a notification; an error wraps
// ErrMalformedEntry. A null entry is an empty one.
func ParseEntry(raw json.RawMessage) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(raw, &e); err != nil {
		return Entry{}, fmt.Errorf("%w: %v", ErrMalformedEntry, err)
	}
	return e, nil
}

// ErrMalformedMessaging is a messaging event whose fields do not have the
// types Meta documents (a payload that is not an object, a text that is
// not a string).
var ErrMalformedMessaging = errors.New("malformed messaging event")

// ParseMessaging reads one messaging event of an entry; an error wraps
// ErrMalformedMessaging.
func ParseMessaging(raw json.RawMessage) (Messaging, error) {
	var m Messaging
	if err := json.Unmarshal(raw, &m); err != nil {
		return Messaging{}, fmt.Errorf("%w: %v", ErrMalformedMessaging, err)
	}
	m.raw = raw
	return m, nil
}

// contentDigest names the event by what it says, whatever its JSON's key
// order and spacing: hex SHA-256 of the event re-encoded with its object
// keys sorted and its numbers as written. A redelivery of the event has
// the same digest; two events that differ in any field have different ones.
func (m Messaging) contentDigest() string {
	dec := json.NewDecoder(bytes.NewReader(m.raw))
	dec.UseNumber()
	var v any
	canonical := m.raw
	if dec.Decode(&v) == nil {
		if b, err := json.Marshal(v); err == nil {
			canonical = b
		}
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// Messaging is one messaging event: a message, an echo of the page's own
// message, or a postback.
type Messaging struct {
	Sender    Party     `json:"sender"`
	Recipient Party     `json:"recipient"`
	Timestamp int64     `json:"timestamp"` // milliseconds since the epoch
	Message   *Message  `json:"message,omitempty"`
	Postback  *Postback `json:"postback,omitempty"`

	raw json.RawMessage // the event as Meta sent it (ParseMessaging)
}

// Party is a sender or recipient: a PSID / IGSID or the page's id.
type Party struct {
	ID string `json:"id"`
}

// Message is a messaging event's message.
type Message struct {
	MID    string `json:"mid"`
	Text   string `json:"text"`
	IsEcho bool   `json:"is_echo"`
	// IsDeleted is Instagram's notice that the customer unsent a message;
	// IsUnsupported a message of a kind the API does not deliver.
	IsDeleted     bool         `json:"is_deleted,omitempty"`
	IsUnsupported bool         `json:"is_unsupported,omitempty"`
	QuickReply    *QuickReply  `json:"quick_reply,omitempty"`
	Attachments   []Attachment `json:"attachments,omitempty"`
}

// QuickReply is the payload of the quick reply the customer tapped.
type QuickReply struct {
	Payload string `json:"payload"`
}

// Attachment is a file in a message.
type Attachment struct {
	Type    string `json:"type"` // image, video, audio, file, ...
	Payload struct {
		URL string `json:"url"`
	} `json:"payload"`
}

// Postback is a tapped postback button.
type Postback struct {
	MID     string `json:"mid"`
	Title   string `json:"title"`
	Payload string `json:"payload"`
}

// Change is one change of a subscribed field: Facebook's "feed" (posts,
// comments) or Instagram's "comments". Value's shape depends on Field.
type Change struct {
	Field string          `json:"field"`
	Value json.RawMessage `json:"value"`
}

// ParseChange reads one change of an entry; an error wraps
// ErrMalformedChange.
func ParseChange(raw json.RawMessage) (Change, error) {
	var c Change
	if err := json.Unmarshal(raw, &c); err != nil {
		return Change{}, fmt.Errorf("%w: %v", ErrMalformedChange, err)
	}
	return c, nil
}
