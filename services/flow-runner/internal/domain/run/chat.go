package run

import "time"

// A chat run answers a conversation's customer on a channel whose built-in
// AI is on (docs/chat.md). It runs the same nodes as a headless run, and
// also the chat-only ones; what it does to the conversation (a message to
// the customer, a handover, tags, an assignee) the engine does not do
// itself: it lists it, in order, as the call's Actions, which the caller
// carries out once the call ends.

// Chat is what a chat run knows of its conversation. It becomes vars
// (vars.contact, vars.conversation_id, vars.channel) when the run starts.
type Chat struct {
	ConversationID string
	ChannelID      string
	// ChannelKind is messenger, instagram, telegram or webchat.
	ChannelKind string
	ContactID   string
	ContactName string
	// WorkspaceName is told to the LLM in ai_response's system prompt.
	WorkspaceName string
}

// CustomerMessage is a customer's message in a conversation: vars.message
// of the call it starts or continues.
type CustomerMessage struct {
	ID string
	// Text is the message's text; for a tap on a button, the button's
	// title.
	Text string
	// Type is the message's type (text, image, postback, …).
	Type string
	// Postback is the tapped button's payload, "" for a typed message.
	Postback string
}

// ActionKind is what an Action does to the conversation.
type ActionKind string

// Action kinds.
const (
	// ActionSend sends Message to the customer (or, on a suggest channel,
	// drafts it).
	ActionSend ActionKind = "send"
	// ActionHandover stops the AI in the conversation (Reason says why).
	ActionHandover ActionKind = "handover"
	// ActionResumeAI turns it back on.
	ActionResumeAI ActionKind = "resume_ai"
	// ActionTag adds Tags.
	ActionTag ActionKind = "tag"
	// ActionAssign assigns the conversation to Operator (an email).
	ActionAssign ActionKind = "assign"
)

// Action is one thing a chat run's call does to its conversation, in the
// order its nodes did it.
type Action struct {
	Kind ActionKind
	// NodeID is the node that did it.
	NodeID   string
	Message  *Message
	Reason   string
	Tags     []string
	Operator string
}

// ChatInvocation is set on an Invocation that starts a chat run.
type ChatInvocation struct {
	Chat    Chat
	Message CustomerMessage
}

// Wake is when a chat run waiting at a delay node goes on: its WakeAt.
// A nil run waits for nothing.
func (r *Run) Wake() (time.Time, bool) {
	if r == nil || r.WakeAt == nil || r.Status != StatusWaiting {
		return time.Time{}, false
	}
	return *r.WakeAt, true
}
