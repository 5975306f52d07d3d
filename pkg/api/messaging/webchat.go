package messaging

// The website widget's bodies, on messaging's own listener under
// /webchat/:channel_id. Every route but the page, embed.js and session
// takes the visitor token in the X-Visitor-Token header.

// Webchat event names: the server-sent events of GET
// /webchat/:channel_id/events besides its "ready".
const (
	// WebchatEventMessage carries a WebchatMessage.
	WebchatEventMessage = "message"
	// WebchatEventTyping carries {}.
	WebchatEventTyping = "typing"
)

// WebchatMessage is a message as the widget shows it, the same pushed
// live and in the history, so the widget merges the two by ID: the
// widget's client_message_id for the visitor's messages, the id the
// service made for replies.
type WebchatMessage struct {
	ID           string   `json:"id"`
	Sender       string   `json:"sender"` // contact (the visitor), user, ai
	Type         string   `json:"type"`   // text, image, carousel, postback
	Text         string   `json:"text,omitempty"`
	ImageURL     string   `json:"image_url,omitempty"`
	QuickReplies []string `json:"quick_replies,omitempty"`
	Buttons      []Button `json:"buttons,omitempty"`
	Cards        []Card   `json:"cards,omitempty"`
	Ratio        string   `json:"ratio,omitempty"`
	CreatedAt    string   `json:"created_at"`
}

// WebchatSession is the 201 of POST /webchat/:channel_id/session: a new
// visitor's token, or a fresh token of the visitor whose good token came
// with the request.
type WebchatSession struct {
	VisitorToken string `json:"visitor_token"`
	VisitorID    string `json:"visitor_id"`
	ExpiresAt    string `json:"expires_at"`
}

// WebchatHistory is GET /webchat/:channel_id/history: the visitor's
// latest messages, oldest first.
type WebchatHistory struct {
	Messages []WebchatMessage `json:"messages"`
}

// VisitorMessage is POST /webchat/:channel_id/messages: what the visitor
// wrote, once per ClientMessageID (a retry of one stored is answered as a
// duplicate).
type VisitorMessage struct {
	Text              string `json:"text"`
	ClientMessageID   string `json:"client_message_id,omitempty"`
	Name              string `json:"name,omitempty"`
	QuickReplyPayload string `json:"quick_reply_payload,omitempty"`
}

// VisitorPostback is POST /webchat/:channel_id/postbacks: a tap on a
// postback button the conversation was sent.
type VisitorPostback struct {
	Payload         string `json:"payload"`
	ClientMessageID string `json:"client_message_id,omitempty"`
	Name            string `json:"name,omitempty"`
}

// WebchatReceived answers a visitor's message or tap: 201 when stored,
// 200 with Duplicate for a retry of one stored before.
type WebchatReceived struct {
	Message   WebchatMessage `json:"message"`
	Duplicate bool           `json:"duplicate"`
}
