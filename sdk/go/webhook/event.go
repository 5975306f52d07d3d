package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	parley "github.com/parleyhq/parley/sdk/go"
)

// Kind is an event's kind: the envelope's event and X-Service-Event. It
// is the client's parley.EventKind, the kind the delivery log shows.
type Kind = parley.EventKind

// The kinds of event Parley delivers (pkg/openapi/openapi.yaml, webhooks).
const (
	// KindMessageReceived: a customer sent a message; Data is
	// *MessageReceived.
	KindMessageReceived = parley.EventMessageReceived
	// KindPostbackReceived: a customer tapped a postback button; Data is
	// *PostbackReceived.
	KindPostbackReceived = parley.EventPostbackReceived
	// KindCommentReceived: someone commented on a page's post; Data is
	// *CommentReceived.
	KindCommentReceived = parley.EventCommentReceived
	// KindTest: the test event of POST /v1/webhook/test; Data is *Test.
	KindTest = parley.EventTest
)

// Event is a delivery's body, the envelope {id, event, created_at, data};
// json.Marshal writes it back in that shape.
type Event struct {
	// ID is the delivery's id, the same as X-Service-Delivery: one event
	// keeps it over every attempt and replay.
	ID string `json:"id"`
	// Kind says what Data is.
	Kind Kind `json:"event"`
	// CreatedAt is when the event happened, to order events that arrive
	// out of order.
	CreatedAt time.Time `json:"created_at"`
	// Data is *MessageReceived, *PostbackReceived, *CommentReceived or
	// *Test, as Kind says. For a kind this package does not know (one
	// added to Parley after it), Data is the data's raw JSON, a
	// json.RawMessage, so a receiver built today keeps working.
	Data any `json:"data"`
}

// Channel is the channel an event arrived on.
type Channel struct {
	Kind parley.Platform `json:"kind"`
	// ExternalID is the channel's id on the platform (a page id, a bot's
	// user name, …).
	ExternalID string `json:"external_id"`
}

// Message is the customer's message.
type Message struct {
	ID string `json:"id"`
	// Text is the customer's text, a postback's button title, or empty for
	// an attachment.
	Text string `json:"text"`
	// Type is text, postback, or an attachment's kind (image, video,
	// audio, file, …).
	Type string `json:"type"`
	// ExternalID is the message's id on the platform.
	ExternalID string `json:"external_id"`
	// CreatedAt is the platform's time of the message; nil when the
	// platform gave none.
	CreatedAt *time.Time `json:"created_at"`
	// Attachment is the file the customer sent; nil when none.
	Attachment *Attachment `json:"attachment,omitempty"`
}

// Attachment is a file a customer sent.
type Attachment struct {
	URL  string `json:"url"`
	Type string `json:"type"`
}

// MessageReceived is the data of KindMessageReceived: a customer's message
// on a channel in external mode. A message with several attachments comes
// as one event per attachment; a tapped quick reply is a message whose text
// is the reply chosen.
type MessageReceived struct {
	WorkspaceID    string          `json:"workspace_id"`
	ConversationID string          `json:"conversation_id"`
	Platform       parley.Platform `json:"platform"`
	Channel        Channel         `json:"channel"`
	// Contact is the customer who wrote, as GET /v1/conversations shows
	// them.
	Contact parley.Contact `json:"contact"`
	Message Message        `json:"message"`
}

// PostbackReceived is the data of KindPostbackReceived: a message event
// (Message.Text is the button's title) and the postback.
type PostbackReceived struct {
	MessageReceived
	Postback Postback `json:"postback"`
}

// Postback is a tapped postback button.
type Postback struct {
	// Payload is the payload of the button the developer sent.
	Payload string `json:"payload"`
	// ReceivedAt is the tap's time; on Telegram, which gives none, its
	// arrival.
	ReceivedAt *time.Time `json:"received_at"`
}

// CommentReceived is the data of KindCommentReceived: a comment on a
// Facebook page's or Instagram account's post.
type CommentReceived struct {
	WorkspaceID string `json:"workspace_id"`
	// Platform is messenger (a Facebook page) or instagram.
	Platform parley.Platform `json:"platform"`
	Channel  Channel         `json:"channel"`
	Comment  Comment         `json:"comment"`
}

// Comment is a comment on a post.
type Comment struct {
	// ID is the comment's id on the platform: the {id} of the client's
	// comment calls (/v1/comments/{id}).
	ID     string               `json:"id"`
	PostID string               `json:"post_id"`
	Text   string               `json:"text"`
	From   parley.CommentAuthor `json:"from"`
	// ReceivedAt is the platform's time of the comment, nil when it gave
	// none.
	ReceivedAt *time.Time `json:"received_at"`
}

// Test is the data of KindTest.
type Test struct {
	WorkspaceID string    `json:"workspace_id"`
	SentAt      time.Time `json:"sent_at"`
}

// ErrMalformed is wrapped by Parse's errors: the body is not an envelope,
// or its data does not match its kind.
var ErrMalformed = errors.New("webhook: malformed event")

// Parse decodes a delivery's body (verify it first) into an Event with
// typed Data. An unknown kind is not an error: its Data is the raw JSON.
func Parse(body []byte) (*Event, error) {
	var env struct {
		ID        *string         `json:"id"`
		Event     *string         `json:"event"`
		CreatedAt *time.Time      `json:"created_at"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	switch {
	case env.ID == nil || *env.ID == "":
		return nil, fmt.Errorf("%w: no id", ErrMalformed)
	case env.Event == nil || *env.Event == "":
		return nil, fmt.Errorf("%w: no event", ErrMalformed)
	case env.CreatedAt == nil:
		return nil, fmt.Errorf("%w: no created_at", ErrMalformed)
	case len(env.Data) == 0 || string(env.Data) == "null":
		return nil, fmt.Errorf("%w: no data", ErrMalformed)
	}
	ev := &Event{ID: *env.ID, Kind: Kind(*env.Event), CreatedAt: *env.CreatedAt}
	var data any
	switch ev.Kind {
	case KindMessageReceived:
		data = new(MessageReceived)
	case KindPostbackReceived:
		data = new(PostbackReceived)
	case KindCommentReceived:
		data = new(CommentReceived)
	case KindTest:
		data = new(Test)
	default:
		ev.Data = env.Data
		return ev, nil
	}
	if err := json.Unmarshal(env.Data, data); err != nil {
		return nil, fmt.Errorf("%w: %s data: %v", ErrMalformed, ev.Kind, err)
	}
	ev.Data = data
	return ev, nil
}
