package messaging

// The conversation's chat state and the built-in AI's routes: the
// flow-runner's chat runs send and draft through them,
// and the console's inbox reads and changes a conversation through them.
// Every one is on messaging's rpc "admin" endpoint and names the workspace
// the conversation must belong to (another workspace's conversation is 404
// conversation_not_found).

// Conversation chat states, ConversationState.AI: the built-in AI answers
// the conversation's customer messages (on an auto or suggest channel), or
// it was handed over to operators and stays silent until they resume it.
const (
	ConversationAIOn       = "on"
	ConversationHandedOver = "handed_over"
)

// Why a customer message was left unanswered (ConversationState.Unanswered):
// the plan's AI replies were used up, or the AI could not answer (no
// provider or guard, a chat flow the plan may not run).
const (
	UnansweredAILimitReached = "ai_limit_reached"
	UnansweredAIUnavailable  = "ai_unavailable"
)

// Message senders (Message.Sender): the customer, an operator or the
// developer's API key, the built-in AI.
const (
	SenderContact = "contact"
	SenderUser    = "user"
	SenderAI      = "ai"
)

// OutboundMessage is one message a chat run sends or drafts, in the shape
// of a flow message: a text with quick replies or buttons, or a carousel
// (Type "carousel", Cards). Messaging applies the channel's rules to it as
// to the API's sends (docs/sending.md).
type OutboundMessage struct {
	Type         string   `json:"type"`
	Text         string   `json:"text,omitempty"`
	QuickReplies []string `json:"quick_replies,omitempty"`
	Buttons      []Button `json:"buttons,omitempty"`
	Cards        []Card   `json:"cards,omitempty"`
}

// SendAIMessage is POST /admin/conversations/:id/ai-messages: a chat run's
// message to the customer, stored with sender ai and never forwarded to
// the webhook. Key makes the send idempotent: a repeat with the same key
// (a chat run run again after its process died) is answered with the
// first send's message and sends nothing. RunID is the chat run that sent
// it, kept in the message's metadata.
type SendAIMessage struct {
	WorkspaceID string          `json:"workspace_id"`
	Key         string          `json:"key"`
	RunID       string          `json:"run_id"`
	Message     OutboundMessage `json:"message"`
}

// AIMessageSent is the 201 of SendAIMessage: the message as stored (a
// carousel is one message).
type AIMessageSent struct {
	Message Message `json:"message"`
}

// Suggestion is a conversation's waiting suggestion: what a chat run on a
// suggest channel drafted in answer to the customer, for an operator to
// send, edit or discard. A newer draft replaces it.
type Suggestion struct {
	RunID     string            `json:"run_id"`
	Messages  []OutboundMessage `json:"messages"`
	CreatedAt string            `json:"created_at"`
}

// DraftSuggestion is PUT /admin/conversations/:id/suggestion: a chat run's
// draft, replacing the waiting one. Key makes it idempotent, as for
// SendAIMessage.
type DraftSuggestion struct {
	WorkspaceID string            `json:"workspace_id"`
	Key         string            `json:"key"`
	RunID       string            `json:"run_id"`
	Messages    []OutboundMessage `json:"messages"`
}

// SuggestionAnswer is a conversation's waiting suggestion, null when none
// waits: GET /admin/conversations/:id/suggestion?workspace_id=, and the
// draft as stored in answer to DraftSuggestion.
type SuggestionAnswer struct {
	Suggestion *Suggestion `json:"suggestion"`
}

// SendSuggestion is POST /admin/conversations/:id/suggestion/send: an
// operator sends the waiting suggestion, as drafted or (Messages set) as
// edited; its messages go with sender user, as an operator's reply.
type SendSuggestion struct {
	WorkspaceID string `json:"workspace_id"`
	// Operator is who sent it (an email), kept in the messages' metadata.
	Operator string            `json:"operator,omitempty"`
	Messages []OutboundMessage `json:"messages,omitempty"`
	// Seen is the draft the operator read: only that one is sent, and
	// another waiting is 409 suggestion_replaced. Without it, whichever
	// waits is sent.
	Seen *SuggestionSeen `json:"seen,omitempty"`
}

// SuggestionSeen names one draft by its Suggestion's run_id and
// created_at, as the suggestion answered them (DiscardSuggestion takes
// them as the query's run_id and created_at).
type SuggestionSeen struct {
	RunID     string `json:"run_id"`
	CreatedAt string `json:"created_at"`
}

// SuggestionSent is the 201 of SendSuggestion: the messages as stored.
type SuggestionSent struct {
	Messages []Message `json:"messages"`
}

// ConversationState is a conversation as the inbox and the chat runs see
// it: the Developer API's conversation and its chat state.
type ConversationState struct {
	Conversation
	WorkspaceID string `json:"workspace_id"`
	// AI is ConversationAIOn or ConversationHandedOver.
	AI string `json:"ai"`
	// HandoverReason is the Reason of the handover, while handed over.
	HandoverReason string `json:"handover_reason"`
	// Unanswered is why the last customer message got no answer
	// (UnansweredAILimitReached, UnansweredAIUnavailable), "" when it was
	// answered or waits for one.
	Unanswered string   `json:"unanswered"`
	Tags       []string `json:"tags"`
	// Assignee is the operator (email) the conversation is assigned to.
	Assignee string `json:"assignee"`
	// SuggestionWaiting is whether a suggestion waits.
	SuggestionWaiting bool `json:"suggestion_waiting"`
	// ReplyWindowEndsAt is when the platform's messaging window closes
	// (Messenger, Instagram: the customer's last message plus 24 hours);
	// a send after it is refused outside_messaging_window. Null on
	// platforms without one.
	ReplyWindowEndsAt *string `json:"reply_window_ends_at"`
}

// ConversationStateAnswer is GET /admin/conversations/:id?workspace_id=
// and the answer of every route below that changes a conversation's chat
// state, and of DELETE /admin/conversations/:id/suggestion?workspace_id=,
// which discards the waiting suggestion.
type ConversationStateAnswer struct {
	Conversation ConversationState `json:"conversation"`
}

// ChangeConversation is the body of the routes that change a
// conversation's chat state:
//
//	POST /admin/conversations/:id/handover    the AI stops answering (Reason: who, why)
//	POST /admin/conversations/:id/resume-ai   the AI answers again
//	POST /admin/conversations/:id/tags        Tags are added
//	PUT  /admin/conversations/:id/assignee    Assignee is set ("" unassigns)
//	POST /admin/conversations/:id/unanswered  the last customer message is marked unanswered (Reason)
type ChangeConversation struct {
	WorkspaceID string   `json:"workspace_id"`
	Reason      string   `json:"reason,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	Assignee    *string  `json:"assignee,omitempty"`
}

// InboxConversation is one conversation of the inbox's list: its chat
// state and its newest message (null when it has none).
type InboxConversation struct {
	ConversationState
	LastMessage *Message `json:"last_message"`
}

// InboxPage is GET /admin/conversations?workspace_id=&before=&limit=
// &channel_id=&unanswered=&suggestion=&handed_over=&assignee=: the
// workspace's conversations as the console's inbox lists them, most recent
// message first, paged with the cursor of GET /v1/conversations
// (next_before, null on the last page). unanswered, suggestion and
// handed_over take true to keep only the conversations with that badge;
// assignee keeps those assigned to that operator (an email).
type InboxPage struct {
	Conversations []InboxConversation `json:"conversations"`
	NextBefore    *string             `json:"next_before"`
}

// SendOperatorMessage is POST /admin/conversations/:id/messages: an
// operator's reply typed in the console's inbox, sent through the one send
// path with every rule of the platform and stored with sender user, the
// operator (an email) in its metadata. Answered 201 with MessageSent. The
// conversation's messages, for the inbox, are GET
// /admin/conversations/:id/messages?workspace_id=&before=&limit=, answered
// with a MessagePage as the API's.
type SendOperatorMessage struct {
	WorkspaceID string          `json:"workspace_id"`
	Operator    string          `json:"operator,omitempty"`
	Message     OutboundMessage `json:"message"`
}

// InboxChange is what messaging publishes on core NATS, on
// InboxSubject(prefix, workspace), after a conversation changed as the
// inbox shows it: a message stored or sent, its chat state changed, a
// suggestion drafted, sent or discarded. Nothing keeps it: the console
// forwards it to the inbox pages open at that moment, which redraw.
type InboxChange struct {
	WorkspaceID    string `json:"workspace_id"`
	ConversationID string `json:"conversation_id"`
}

// InboxSubject is the core NATS subject of a workspace's InboxChange
// notifications: "<prefix>.inbox.<workspace_id>", prefix being
// RPC_SUBJECT_PREFIX, so test runs and deployments sharing a NATS server
// stay apart.
func InboxSubject(prefix, workspaceID string) string {
	return prefix + ".inbox." + workspaceID
}
