package parley

import "time"

// Platform is a channel kind. Facebook page comments come from messenger
// channels.
type Platform string

// The platforms Parley connects.
const (
	PlatformMessenger Platform = "messenger"
	PlatformInstagram Platform = "instagram"
	PlatformTelegram  Platform = "telegram"
	PlatformWebchat   Platform = "webchat"
)

// Me is the workspace the API key belongs to: its plan, channels and
// per-minute request limit.
type Me struct {
	Workspace Workspace `json:"workspace"`
	Plan      Plan      `json:"plan"`
	Channels  []Channel `json:"channels"`
	RateLimit RateLimit `json:"rate_limit"`
	// APIVersion is "v1".
	APIVersion string `json:"api_version"`
}

// Workspace names the workspace of an API key.
type Workspace struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Slug string `json:"slug"`
}

// Plan is the workspace's plan and its AI units.
type Plan struct {
	Name string `json:"name"`
	// AIUsed is the AI units used (the built-in AI's replies and drafts,
	// and successful llm, intent, extract and ai_response flow nodes).
	AIUsed int `json:"ai_used"`
	// AILimit is the AI units the plan allows.
	AILimit int `json:"ai_limit"`
}

// RateLimit is the workspace's request limit.
type RateLimit struct {
	// PerMinute is the requests the workspace may make each minute.
	PerMinute int `json:"per_minute"`
}

// Channel is a connected channel of the workspace.
type Channel struct {
	ID   string   `json:"id"`
	Kind Platform `json:"kind"`
	// ExternalID is the channel's id on the platform (a page id, a bot's
	// username, …).
	ExternalID string `json:"external_id"`
	// AIMode is "auto" (the built-in AI answers), "suggest" (it suggests
	// replies to operators) or "external" (events go to the webhook and the
	// developer answers).
	AIMode string `json:"ai_mode"`
	// Status is "active".
	Status string `json:"status"`
}

// Contact is a customer.
type Contact struct {
	ID string `json:"id"`
	// SenderID is the customer's id on the platform.
	SenderID string `json:"sender_id"`
	// Name is empty when the platform did not say.
	Name string `json:"name"`
	// ProfilePic is a URL, or empty.
	ProfilePic string `json:"profile_pic"`
}

// Conversation is a conversation with one customer on one channel.
type Conversation struct {
	ID            string    `json:"id"`
	Platform      Platform  `json:"platform"`
	ChannelID     string    `json:"channel_id"`
	Contact       Contact   `json:"contact"`
	LastMessageAt time.Time `json:"last_message_at"`
	CreatedAt     time.Time `json:"created_at"`
}

// ConversationPage is one page of conversations, the one with the most
// recent message first.
type ConversationPage struct {
	Conversations []Conversation `json:"conversations"`
	// NextBefore is the Before of the next page; nil on the last page.
	NextBefore *time.Time `json:"next_before"`
}

// Message is a message of a conversation.
type Message struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	// Sender is "contact" (the customer), "user" (an operator, or the
	// developer through the API) or "ai" (the built-in AI).
	Sender string `json:"sender"`
	// Type is "text", "image", "carousel" or "postback", or for a
	// customer's attachment the platform's kind ("video", "audio", …).
	Type string `json:"type"`
	// Content is the text, an image's URL or a postback's button title.
	Content string `json:"content"`
	// Metadata is what the content alone does not say: for sent messages
	// the buttons and quick replies (and on Telegram carousels
	// "external_ids"), for a tapped quick reply its payload. Empty when
	// there is nothing.
	Metadata map[string]any `json:"metadata"`
	// ExternalID is the message's id on the platform.
	ExternalID string `json:"external_id"`
	// CreatedAt is the platform's time for a customer's message, the time
	// Parley stored it for the others.
	CreatedAt time.Time `json:"created_at"`
}

// MessagePage is one page of a conversation's messages, newest first.
type MessagePage struct {
	Messages []Message `json:"messages"`
	// NextBefore is the Before of the next page; nil on the last page.
	NextBefore *time.Time `json:"next_before"`
}

// Button is a link (Type "web_url" with an https URL) or a postback (Type
// "postback" with a Payload, which comes back in a postback.received event
// when tapped).
type Button struct {
	Type  string `json:"type"`
	Title string `json:"title"`
	// URL is required for web_url; https.
	URL string `json:"url,omitempty"`
	// Payload is required for postback; on Telegram at most 64 bytes.
	Payload string `json:"payload,omitempty"`
}

// The button types.
const (
	ButtonWebURL   = "web_url"
	ButtonPostback = "postback"
)

// SendMessageRequest is a text to send, with quick replies or buttons
// (never both).
type SendMessageRequest struct {
	ConversationID string `json:"conversation_id"`
	// Text is 1–4096 characters, not only whitespace; platforms have their
	// own limits too (Messenger 2000, or 640 with buttons; Instagram 1000
	// bytes).
	Text string `json:"text"`
	// QuickReplies are at most 13, each 1–20 characters.
	QuickReplies []string `json:"quick_replies,omitempty"`
	// Buttons are at most 3; refused on Instagram.
	Buttons []Button `json:"buttons,omitempty"`
}

// SendImageRequest is an image to send, then an optional text.
type SendImageRequest struct {
	ConversationID string `json:"conversation_id"`
	// ImageURL is an https URL; on Instagram a JPEG or PNG.
	ImageURL string `json:"image_url"`
	// Text, when set, is sent as its own message after the image.
	Text string `json:"text,omitempty"`
}

// SendImageResult is what an image send stored: Message is the image,
// Messages every message sent, the image first.
type SendImageResult struct {
	Message  Message   `json:"message"`
	Messages []Message `json:"messages"`
}

// CarouselElement is one card of a carousel.
type CarouselElement struct {
	// Title is 1–80 characters.
	Title string `json:"title"`
	// Subtitle is at most 80 characters.
	Subtitle string `json:"subtitle,omitempty"`
	// ImageURL is an https URL.
	ImageURL string   `json:"image_url,omitempty"`
	Buttons  []Button `json:"buttons,omitempty"`
}

// SendCarouselRequest is a carousel of 1–10 cards to send.
type SendCarouselRequest struct {
	ConversationID string            `json:"conversation_id"`
	Elements       []CarouselElement `json:"elements"`
	// Ratio is the cards' image ratio: "horizontal" (the default) or
	// "square".
	Ratio string `json:"ratio,omitempty"`
}

// TypingRequest is the body of SendTyping; the method builds it.
type TypingRequest struct {
	ConversationID string `json:"conversation_id"`
}

// Comment is a Facebook or Instagram comment and its reply status.
type Comment struct {
	// ID is the comment's id on the platform.
	ID     string `json:"id"`
	PostID string `json:"post_id"`
	// ParentID is the comment this one answers; empty when it is not a
	// reply.
	ParentID   string        `json:"parent_id,omitempty"`
	Text       string        `json:"text"`
	From       CommentAuthor `json:"from"`
	ReceivedAt time.Time     `json:"received_at"`
	Platform   Platform      `json:"platform"`
	ChannelID  string        `json:"channel_id"`
	// Status is "received", "replied" (public reply), "dm_sent" (private
	// reply, no public reply before) or "both_sent".
	Status string `json:"status"`
}

// CommentAuthor is who wrote a comment, as the platform names them.
type CommentAuthor struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// CommentReplyRequest is the body of ReplyToComment and PrivateReply; the
// methods build it.
type CommentReplyRequest struct {
	// Text is not only whitespace; a public reply is at most 8000
	// characters on Facebook and 2200 on Instagram, a private reply at most
	// 2000.
	Text string `json:"text"`
}

// CommentReply is the answer to a public reply.
type CommentReply struct {
	// OK is true.
	OK bool `json:"ok"`
	// ExternalID is the public reply's id on the platform.
	ExternalID string  `json:"external_id"`
	Comment    Comment `json:"comment"`
}

// PrivateReply is the answer to a private reply (a direct message to the
// commenter).
type PrivateReply struct {
	// OK is true.
	OK bool `json:"ok"`
	// RecipientID is the commenter's id on the platform.
	RecipientID string `json:"recipient_id"`
	// ExternalID is the direct message's id on the platform.
	ExternalID string `json:"external_id"`
	// ConversationID is the commenter's inbox conversation, which holds the
	// message.
	ConversationID string  `json:"conversation_id"`
	Comment        Comment `json:"comment"`
}

// SaveWebhookRequest is the body of SaveWebhook; the method builds it.
type SaveWebhookRequest struct {
	// URL is an absolute https URL to a public address, at most 2048
	// characters.
	URL string `json:"url"`
}

// Webhook is the workspace's webhook, never with its secret.
type Webhook struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// Status is "active", or "paused" after 20 consecutive failed
	// deliveries; saving it again makes it active.
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SavedWebhook is a saved webhook with its new signing secret.
type SavedWebhook struct {
	Webhook Webhook `json:"webhook"`
	// Secret is the signing secret ("whsec_…"), the key of
	// X-Service-Signature's HMAC. It is shown only here: keep it.
	Secret string `json:"secret"`
}

// EventKind is a webhook event's kind.
type EventKind string

// The webhook event kinds.
const (
	EventMessageReceived  EventKind = "message.received"
	EventPostbackReceived EventKind = "postback.received"
	EventCommentReceived  EventKind = "comment.received"
	EventTest             EventKind = "test"
)

// DeliveryStatus is where a delivery stands.
type DeliveryStatus string

// The delivery statuses.
const (
	// DeliveryPending: attempts are under way.
	DeliveryPending DeliveryStatus = "pending"
	// DeliveryDelivered: the receiver answered 2xx.
	DeliveryDelivered DeliveryStatus = "delivered"
	// DeliveryFailed: every attempt failed.
	DeliveryFailed DeliveryStatus = "failed"
	// DeliverySkipped: the event came while the webhook was paused.
	DeliverySkipped DeliveryStatus = "skipped"
)

// Delivery is one event sent (or not) to the webhook.
type Delivery struct {
	// ID is the envelope's id and X-Service-Delivery.
	ID    string    `json:"id"`
	Event EventKind `json:"event"`
	// Payload is the envelope exactly as sent (the signed bytes); the
	// webhook subpackage decodes it.
	Payload  string         `json:"payload"`
	Status   DeliveryStatus `json:"status"`
	Attempts int            `json:"attempts"`
	// ResponseStatus is the receiver's HTTP status on the last attempt; nil
	// when it gave none.
	ResponseStatus *int `json:"response_status"`
	// LastError is why the last attempt failed; nil when it did not.
	LastError   *string    `json:"last_error"`
	DeliveredAt *time.Time `json:"delivered_at"`
	CreatedAt   time.Time  `json:"created_at"`
}

// DeliveryPage is one page of the delivery log, newest first.
type DeliveryPage struct {
	Deliveries []Delivery `json:"deliveries"`
	// NextBefore is the Before of the next page; nil on the last page.
	NextBefore *time.Time `json:"next_before"`
}

// Flow is a flow with an api trigger, one the key may invoke.
type Flow struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	// Status is "active".
	Status           string    `json:"status"`
	PublishedVersion int       `json:"published_version"`
	UpdatedAt        time.Time `json:"updated_at"`
}

// InvokeRequest is the body of Invoke, Continue and their streams; the
// methods build it.
type InvokeRequest struct {
	// Input is the run's input, a JSON object (at most 16 KB and 5 levels);
	// on a continue only input.text is read.
	Input any `json:"input"`
	// SessionID continues the waiting run of this session.
	SessionID string `json:"session_id,omitempty"`
	// Stream asks for the event stream.
	Stream bool `json:"stream,omitempty"`
}

// RunStatus is how a run stands after a call.
type RunStatus string

// The run statuses.
const (
	// RunCompleted: the run reached its end.
	RunCompleted RunStatus = "completed"
	// RunWaiting: the run stopped at a question; continue it with its
	// session id.
	RunWaiting RunStatus = "waiting"
	// RunFailed: the run stopped on an error.
	RunFailed RunStatus = "failed"
)

// RunError is why a run failed (an answer of 200 with status failed): Code
// is node_failed, run_budget_exceeded, quota_exceeded, module_inactive or
// internal_error.
type RunError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Usage is what a call's AI nodes consumed.
type Usage struct {
	Tokens  int     `json:"tokens"`
	CostUSD float64 `json:"cost_usd"`
	// BillableUnits is the plan's AI units billed: one per successful llm,
	// intent or extract node.
	BillableUnits int `json:"billable_units"`
}

// FlowButton is a button of a flow message.
type FlowButton struct {
	// Type is "web_url" or "postback".
	Type    string `json:"type"`
	Title   string `json:"title"`
	URL     string `json:"url,omitempty"`
	Payload string `json:"payload,omitempty"`
}

// FlowCard is a card of a flow message's carousel.
type FlowCard struct {
	Title    string       `json:"title"`
	Subtitle string       `json:"subtitle,omitempty"`
	ImageURL string       `json:"image_url,omitempty"`
	Buttons  []FlowButton `json:"buttons,omitempty"`
}

// FlowMessage is what a flow "sent": returned to the developer, never sent
// to a customer.
type FlowMessage struct {
	// Type is "text", "quick_replies", "buttons" or "carousel".
	Type         string       `json:"type"`
	Text         string       `json:"text,omitempty"`
	QuickReplies []string     `json:"quick_replies,omitempty"`
	Buttons      []FlowButton `json:"buttons,omitempty"`
	Cards        []FlowCard   `json:"cards,omitempty"`
	// GuardBlocked is true when the safety guard caught the AI's text and
	// replaced it with safe fallback text.
	GuardBlocked bool `json:"guard_blocked,omitempty"`
}

// InvokeResult is the outcome of Invoke or Continue.
type InvokeResult struct {
	Status RunStatus `json:"status"`
	// SessionID is set only while the run waits; continue with it.
	SessionID string `json:"session_id,omitempty"`
	// RunID is the run; Client.Run reads its trace.
	RunID string `json:"run_id"`
	// Output is the run's output variables; empty when none.
	Output   map[string]any `json:"output"`
	Messages []FlowMessage  `json:"messages"`
	Usage    Usage          `json:"usage"`
	// Error is set only when the run failed.
	Error *RunError `json:"error,omitempty"`
}

// RunTrace is a run and every node run with its input, output and timing.
type RunTrace struct {
	Run      Run       `json:"run"`
	NodeRuns []NodeRun `json:"node_runs"`
}

// Run is a flow run as its trace shows it.
type Run struct {
	ID     string `json:"id"`
	FlowID string `json:"flow_id"`
	// Status is completed, waiting or failed: a run is stored when its
	// call ends.
	Status RunStatus `json:"status"`
	// CurrentNodeID is the node being run, the question a waiting run waits
	// at, or the node the run ended at.
	CurrentNodeID string `json:"current_node_id"`
	// NodesExecuted counts node runs over the whole run, every call
	// included.
	NodesExecuted int `json:"nodes_executed"`
	// Vars are the flow's variables; vars["input"] is the first call's
	// input.
	Vars   map[string]any `json:"vars"`
	Output map[string]any `json:"output"`
	Error  *RunError      `json:"error,omitempty"`
	// StartedAt is when the run's first call started.
	StartedAt time.Time `json:"started_at"`
	// CompletedAt is nil until the run completed or failed.
	CompletedAt *time.Time `json:"completed_at,omitempty"`
}

// NodeRun is one node's run within a run.
type NodeRun struct {
	NodeID     string    `json:"node_id"`
	NodeType   string    `json:"node_type"`
	StartedAt  time.Time `json:"started_at"`
	DurationMS int       `json:"duration_ms"`
	// Input is what the node was given, any JSON value; nil when nothing,
	// {"truncated": true, "bytes": n} past the trace's budget.
	Input any `json:"input"`
	// Output is what the node produced, as Input.
	Output any `json:"output"`
	// Error is empty when the node succeeded.
	Error   string  `json:"error,omitempty"`
	Tokens  int     `json:"tokens"`
	CostUSD float64 `json:"cost_usd"`
}
