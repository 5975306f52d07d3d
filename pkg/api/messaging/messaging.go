// Package messaging is the messaging service's API (docs/architecture.md
// "Wire types"): the bodies of its admin routes (channels, for parleyctl
// and the console), of the public /v1 routes the gateway forwards to its
// rpc "api" endpoint (channels, conversations, messages, sends, comments;
// GET /v1/channels is also the channel directory the gateway reads for
// /v1/me), and of the website widget's routes on its own listener.
//
// Times are RFC 3339 strings as the service writes them (UTC, with the
// fraction of a second it has). A request body's optional fields are
// omitted when empty, so a body a Go caller writes is the one a user's
// client would.
package messaging

// Channel kinds (the platforms) and AI modes.
const (
	KindTelegram  = "telegram"
	KindMessenger = "messenger"
	KindInstagram = "instagram"
	KindWebchat   = "webchat"

	AIModeAuto     = "auto"
	AIModeSuggest  = "suggest"
	AIModeExternal = "external"
)

// Channel is a workspace's channel as the Developer API shows it: in GET
// /v1/channels and in the gateway's GET /v1/me.
type Channel struct {
	ID         string `json:"id"`
	Kind       string `json:"kind"`
	ExternalID string `json:"external_id"`
	AIMode     string `json:"ai_mode"`
	Status     string `json:"status"`
}

// ChannelList is GET /v1/channels: the workspace's channels, oldest first.
type ChannelList struct {
	Channels []Channel `json:"channels"`
}

// AdminChannel is a channel as operators see it: the Developer API's
// channel, with its workspace, its ingress secret (to configure the
// platform's webhook) and when it was created; never with its token.
type AdminChannel struct {
	Channel
	WorkspaceID string `json:"workspace_id"`
	Secret      string `json:"secret"`
	CreatedAt   string `json:"created_at"`
}

// NewChannel is POST /admin/channels: a channel to create, in mode auto.
// Empty fields are absent: Secret is generated when empty; Token is the
// platform's access token (a Telegram bot's, whose id becomes the
// external_id when none is given). Messaging does not know workspaces: it
// stores the channel under whatever workspace id it is given.
type NewChannel struct {
	WorkspaceID string `json:"workspace_id"`
	Kind        string `json:"kind"`
	ExternalID  string `json:"external_id"`
	Token       string `json:"token"`
	Secret      string `json:"secret"`
}

// SetChannelAIMode is PATCH /admin/channels/:id: the channel's new mode,
// required (auto, suggest or external).
type SetChannelAIMode struct {
	AIMode *string `json:"ai_mode"`
}

// AdminChannelAnswer is a channel created (201) or changed (200) by the
// admin routes.
type AdminChannelAnswer struct {
	Channel AdminChannel `json:"channel"`
}

// AdminChannelList is GET /admin/channels?workspace_id=: the workspace's
// channels, oldest first.
type AdminChannelList struct {
	Channels []AdminChannel `json:"channels"`
}

// Contact is the customer of a conversation.
type Contact struct {
	ID         string `json:"id"`
	SenderID   string `json:"sender_id"`
	Name       string `json:"name"`
	ProfilePic string `json:"profile_pic"`
}

// Conversation is one customer's conversation on one channel.
type Conversation struct {
	ID            string  `json:"id"`
	Platform      string  `json:"platform"`
	ChannelID     string  `json:"channel_id"`
	Contact       Contact `json:"contact"`
	LastMessageAt string  `json:"last_message_at"`
	CreatedAt     string  `json:"created_at"`
}

// ConversationPage is GET /v1/conversations: most recent message first,
// and the cursor to the next page (null on the last).
type ConversationPage struct {
	Conversations []Conversation `json:"conversations"`
	NextBefore    *string        `json:"next_before"`
}

// Message is a stored message, the customer's or a sent one.
type Message struct {
	ID             string         `json:"id"`
	ConversationID string         `json:"conversation_id"`
	Sender         string         `json:"sender"`
	Type           string         `json:"type"`
	Content        string         `json:"content"`
	Metadata       map[string]any `json:"metadata"`
	ExternalID     string         `json:"external_id"`
	CreatedAt      string         `json:"created_at"`
}

// MessagePage is GET /v1/conversations/:id/messages: newest first, and
// the cursor to the next page (null on the last).
type MessagePage struct {
	Messages   []Message `json:"messages"`
	NextBefore *string   `json:"next_before"`
}

// Button is a button under a text or on a card: a link (web_url, with
// URL) or a postback (postback, with Payload). The widget shows sent
// messages' buttons in the same shape.
type Button struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	URL     string `json:"url,omitempty"`
	Payload string `json:"payload,omitempty"`
}

// Card is one card of a carousel, sent and as the widget shows it.
type Card struct {
	Title    string   `json:"title"`
	Subtitle string   `json:"subtitle,omitempty"`
	ImageURL string   `json:"image_url,omitempty"`
	Buttons  []Button `json:"buttons,omitempty"`
}

// SendMessage is POST /v1/messages: a text, with quick replies or
// buttons. Text is required (nil: absent).
type SendMessage struct {
	ConversationID string   `json:"conversation_id"`
	Text           *string  `json:"text"`
	QuickReplies   []string `json:"quick_replies,omitempty"`
	Buttons        []Button `json:"buttons,omitempty"`
}

// SendImage is POST /v1/image: the image, then Text, when there is one,
// as a message of its own.
type SendImage struct {
	ConversationID string `json:"conversation_id"`
	ImageURL       string `json:"image_url"`
	Text           string `json:"text,omitempty"`
}

// SendCarousel is POST /v1/carousel.
type SendCarousel struct {
	ConversationID string `json:"conversation_id"`
	Elements       []Card `json:"elements"`
	Ratio          string `json:"ratio,omitempty"`
}

// SendTyping is POST /v1/typing.
type SendTyping struct {
	ConversationID string `json:"conversation_id"`
}

// MessageSent is the 201 of POST /v1/messages and /v1/carousel: the
// message as stored.
type MessageSent struct {
	Message Message `json:"message"`
}

// ImageSent is the 201 of POST /v1/image: Message is the image, Messages
// every message sent, the image first.
type ImageSent struct {
	Message  Message   `json:"message"`
	Messages []Message `json:"messages"`
}

// OK is the answer of a call that has nothing else to say (POST
// /v1/typing).
type OK struct {
	OK bool `json:"ok"`
}

// CommentAuthor is who wrote a comment.
type CommentAuthor struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Comment is a comment on one of a channel's posts, as the
// comment.received event carries it, with where it came from and its
// reply status. ID is the platform's comment id.
type Comment struct {
	ID         string        `json:"id"`
	PostID     string        `json:"post_id"`
	ParentID   string        `json:"parent_id,omitempty"`
	Text       string        `json:"text"`
	From       CommentAuthor `json:"from"`
	ReceivedAt string        `json:"received_at"`
	Platform   string        `json:"platform"`
	ChannelID  string        `json:"channel_id"`
	Status     string        `json:"status"`
}

// CommentAnswer is GET /v1/comments/:id.
type CommentAnswer struct {
	Comment Comment `json:"comment"`
}

// CommentReply is POST /v1/comments/:id/reply and /private-reply: the
// text, required (nil: absent).
type CommentReply struct {
	Text *string `json:"text"`
}

// PublicReplySent is the 200 of POST /v1/comments/:id/reply: the reply's
// platform id and the comment as it stands after it.
type PublicReplySent struct {
	OK         bool    `json:"ok"`
	ExternalID string  `json:"external_id"`
	Comment    Comment `json:"comment"`
}

// PrivateReplySent is the 200 of POST /v1/comments/:id/private-reply: the
// commenter's messaging id, the DM's platform id, the commenter's
// conversation (where the DM is stored) and the comment after it.
type PrivateReplySent struct {
	OK             bool    `json:"ok"`
	RecipientID    string  `json:"recipient_id"`
	ExternalID     string  `json:"external_id"`
	ConversationID string  `json:"conversation_id"`
	Comment        Comment `json:"comment"`
}
