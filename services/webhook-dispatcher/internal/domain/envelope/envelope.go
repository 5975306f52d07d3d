// Package envelope renders customer events as the webhook body that
// docs/webhooks.md ("The envelope", "Events") and the OpenAPI document's
// webhooks define: {"id","event","created_at","data":{...}} with the data
// fields named exactly as documented and timestamps in ISO 8601 UTC. The
// input is the event contract of proto/parley/events/v1.
package envelope

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/ids"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
)

// TimeFormat is how timestamps inside webhook envelopes are written: ISO
// 8601 in UTC with milliseconds ("2026-11-22T10:00:00.123Z"). The envelope
// is signed and stored, so its form is fixed; REST bodies use httpx.Timestamp.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// FormatTime writes t in TimeFormat.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

type envelope struct {
	ID        string `json:"id"`
	Event     string `json:"event"`
	CreatedAt string `json:"created_at"`
	Data      any    `json:"data"`
}

type channel struct {
	Kind       string `json:"kind"`
	ExternalID string `json:"external_id"`
}

type contact struct {
	ID         string `json:"id"`
	SenderID   string `json:"sender_id"`
	Name       string `json:"name"`
	ProfilePic string `json:"profile_pic"`
}

type attachment struct {
	URL  string `json:"url"`
	Type string `json:"type"`
}

type message struct {
	ID         string      `json:"id"`
	Text       string      `json:"text"`
	Type       string      `json:"type"`
	ExternalID string      `json:"external_id"`
	CreatedAt  *string     `json:"created_at"`
	Attachment *attachment `json:"attachment,omitempty"`
}

type postback struct {
	Payload    string  `json:"payload"`
	ReceivedAt *string `json:"received_at"`
}

// messageData is data of message.received and, with Postback, of
// postback.received.
type messageData struct {
	WorkspaceID    string    `json:"workspace_id"`
	ConversationID string    `json:"conversation_id"`
	Platform       string    `json:"platform"`
	Channel        channel   `json:"channel"`
	Contact        contact   `json:"contact"`
	Message        message   `json:"message"`
	Postback       *postback `json:"postback,omitempty"`
}

type author struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type comment struct {
	ID         string  `json:"id"`
	PostID     string  `json:"post_id"`
	Text       string  `json:"text"`
	From       author  `json:"from"`
	ReceivedAt *string `json:"received_at"`
}

type commentData struct {
	WorkspaceID string  `json:"workspace_id"`
	Platform    string  `json:"platform"`
	Channel     channel `json:"channel"`
	Comment     comment `json:"comment"`
}

type testData struct {
	WorkspaceID string `json:"workspace_id"`
	SentAt      string `json:"sent_at"`
}

// Render returns the webhook body of ev. An event that cannot be rendered
// (no valid id or workspace, an unknown kind, data that does not match its
// kind) is an error wrapping delivery.ErrMalformedEvent.
func Render(ev *eventsv1.Event) ([]byte, error) {
	if !ids.Valid(ev.GetId()) {
		return nil, malformed("id %q is not a UUID", ev.GetId())
	}
	if !ids.Valid(ev.GetWorkspaceId()) {
		return nil, malformed("workspace_id %q is not a UUID", ev.GetWorkspaceId())
	}
	if ev.GetCreatedAt() == nil {
		return nil, malformed("created_at missing")
	}
	var data any
	switch ev.GetType() {
	case delivery.EventMessageReceived:
		d := ev.GetMessageReceived()
		if d == nil {
			return nil, malformed("%s without message_received data", ev.GetType())
		}
		md, err := renderMessage(ev.GetWorkspaceId(), d.GetWorkspaceId(), d.GetConversationId(), d.GetPlatform(), d.GetChannel(), d.GetContact(), d.GetMessage())
		if err != nil {
			return nil, err
		}
		data = md
	case delivery.EventPostbackReceived:
		d := ev.GetPostbackReceived()
		if d == nil || d.GetPostback() == nil {
			return nil, malformed("%s without postback_received data", ev.GetType())
		}
		md, err := renderMessage(ev.GetWorkspaceId(), d.GetWorkspaceId(), d.GetConversationId(), d.GetPlatform(), d.GetChannel(), d.GetContact(), d.GetMessage())
		if err != nil {
			return nil, err
		}
		md.Postback = &postback{Payload: d.GetPostback().GetPayload(), ReceivedAt: timestamp(d.GetPostback().GetReceivedAt())}
		data = md
	case delivery.EventCommentReceived:
		d := ev.GetCommentReceived()
		if d == nil || d.GetComment() == nil {
			return nil, malformed("%s without comment_received data", ev.GetType())
		}
		if err := sameWorkspace(ev.GetWorkspaceId(), d.GetWorkspaceId()); err != nil {
			return nil, err
		}
		c := d.GetComment()
		data = commentData{
			WorkspaceID: ev.GetWorkspaceId(),
			Platform:    d.GetPlatform(),
			Channel:     renderChannel(d.GetChannel()),
			Comment: comment{
				ID:         c.GetId(),
				PostID:     c.GetPostId(),
				Text:       c.GetText(),
				From:       author{ID: c.GetFrom().GetId(), Name: c.GetFrom().GetName()},
				ReceivedAt: timestamp(c.GetReceivedAt()),
			},
		}
	default:
		return nil, malformed("unknown event type %q", ev.GetType())
	}
	return encode(envelope{ID: ev.GetId(), Event: ev.GetType(), CreatedAt: FormatTime(ev.GetCreatedAt().AsTime()), Data: data})
}

// CreatedAt reads the created_at of a rendered envelope (a stored
// delivery's payload): when the event was made.
func CreatedAt(body []byte) (time.Time, error) {
	var e struct {
		CreatedAt string `json:"created_at"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return time.Time{}, fmt.Errorf("read envelope: %w", err)
	}
	t, err := time.Parse(time.RFC3339Nano, e.CreatedAt)
	if err != nil {
		return time.Time{}, fmt.Errorf("read envelope created_at %q: %w", e.CreatedAt, err)
	}
	return t.UTC(), nil
}

// RenderTest returns the body of a test event (the dashboard's test button,
// POST /v1/webhook/test).
func RenderTest(id, workspaceID string, now time.Time) ([]byte, error) {
	return encode(envelope{
		ID:        id,
		Event:     delivery.EventTest,
		CreatedAt: FormatTime(now),
		Data:      testData{WorkspaceID: workspaceID, SentAt: FormatTime(now)},
	})
}

func renderMessage(eventWorkspace, dataWorkspace, conversationID, platform string, ch *eventsv1.Channel, ct *eventsv1.Contact, m *eventsv1.Message) (*messageData, error) {
	if err := sameWorkspace(eventWorkspace, dataWorkspace); err != nil {
		return nil, err
	}
	if conversationID == "" {
		return nil, malformed("conversation_id missing")
	}
	if m == nil {
		return nil, malformed("message missing")
	}
	out := &messageData{
		WorkspaceID:    eventWorkspace,
		ConversationID: conversationID,
		Platform:       platform,
		Channel:        renderChannel(ch),
		Contact: contact{
			ID:         ct.GetId(),
			SenderID:   ct.GetSenderId(),
			Name:       ct.GetName(),
			ProfilePic: ct.GetProfilePic(),
		},
		Message: message{
			ID:         m.GetId(),
			Text:       m.GetText(),
			Type:       m.GetType(),
			ExternalID: m.GetExternalId(),
			CreatedAt:  timestamp(m.GetCreatedAt()),
		},
	}
	if a := m.GetAttachment(); a != nil {
		out.Message.Attachment = &attachment{URL: a.GetUrl(), Type: a.GetType()}
	}
	return out, nil
}

func renderChannel(ch *eventsv1.Channel) channel {
	return channel{Kind: ch.GetKind(), ExternalID: ch.GetExternalId()}
}

// sameWorkspace refuses data that names another workspace than its event,
// so an event can never reach a different workspace's webhook. Data that
// leaves workspace_id empty inherits the event's.
func sameWorkspace(eventWorkspace, dataWorkspace string) error {
	if dataWorkspace != "" && dataWorkspace != eventWorkspace {
		return malformed("data.workspace_id %q differs from the event's %q", dataWorkspace, eventWorkspace)
	}
	return nil
}

func timestamp(ts *timestamppb.Timestamp) *string {
	if ts == nil {
		return nil
	}
	s := FormatTime(ts.AsTime())
	return &s
}

// encode writes JSON without escaping <, > and &, so customers' text
// arrives as they wrote it.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode envelope: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", delivery.ErrMalformedEvent, fmt.Sprintf(format, args...))
}
