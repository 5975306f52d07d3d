// Package conversation is the inbox: contacts (the customers), their
// conversations with a channel, and the messages exchanged, plus the rules
// of what may be sent and the port through which each platform sends it.
package conversation

import (
	"context"
	"errors"
	"time"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/outbox"
	"github.com/parleyhq/parley/services/messaging/internal/domain/receipt"
)

// Contact is a customer as one channel knows them.
type Contact struct {
	ID          string
	WorkspaceID string
	ChannelID   string
	// SenderID is the customer's id on the platform (Telegram's from.id).
	SenderID   string
	Name       string
	ProfilePic string
}

// Conversation is the thread between a channel and one contact.
type Conversation struct {
	ID          string
	WorkspaceID string
	ChannelID   string
	Platform    channel.Kind
	Contact     Contact
	// ReplyTo is where the platform takes replies (Telegram's chat.id).
	ReplyTo       string
	LastMessageAt time.Time
	// LastCustomerMessageAt is the platform's timestamp of the customer's
	// latest message, from which Meta's 24-hour window runs.
	LastCustomerMessageAt time.Time
	CreatedAt             time.Time
	// Chat is the conversation's chat state (chat.go).
	Chat Chat
}

// Sender is who wrote a message.
type Sender string

// Senders: the customer, an operator or the developer
// through the API, and the built-in AI.
const (
	SenderContact Sender = "contact"
	SenderUser    Sender = "user"
	SenderAI      Sender = "ai"
)

// Message types. Customers send text, attachments (image, video, audio,
// file, as the platform names them) and postbacks (a button tapped); replies
// are text, image or carousel.
const (
	TypeText     = "text"
	TypeImage    = "image"
	TypeCarousel = "carousel"
	TypePostback = "postback"
)

// Message is one message of a conversation.
type Message struct {
	ID             string
	WorkspaceID    string
	ConversationID string
	Sender         Sender
	Type           string
	Content        string
	// Metadata holds what the content alone does not: for sent messages the
	// buttons and quick replies.
	Metadata   map[string]any
	ExternalID string
	// CreatedAt is the platform's timestamp for customer messages, the
	// moment Parley stored it for others.
	CreatedAt time.Time
}

// Inbound is a customer message as a platform delivered it.
type Inbound struct {
	SenderID   string
	SenderName string
	ProfilePic string
	// ReplyTo is where replies to this customer go.
	ReplyTo string
	// Type is TypeText, TypePostback or the attachment's type.
	Type       string
	Text       string
	ExternalID string
	// SentAt is the platform's timestamp; the messaging window runs from it.
	SentAt time.Time
	// Attachment is the file the customer sent, if any.
	Attachment *Attachment
	// Postback is the button the customer tapped, if this is a postback
	// (then Text is the button's title).
	Postback *Postback
	// Metadata is stored with the message (a quick reply's payload).
	Metadata map[string]any
}

// Attachment is a file a customer sent, at a URL the platform serves.
type Attachment struct {
	URL  string
	Type string
}

// Postback is the payload of a button the developer sent, as the customer
// tapped it.
type Postback struct {
	Payload string
}

// ErrNotFound is a conversation that does not exist in the workspace asking.
var ErrNotFound = errors.New("conversation not found")

// ErrContactNotFound is a customer a channel has not heard from yet.
var ErrContactNotFound = errors.New("contact not found")

// ConversationQuery selects a page of a workspace's conversations, most
// recent message first (last_message_at, then id, descending).
type ConversationQuery struct {
	WorkspaceID string
	// Platform, when set, keeps only that platform's conversations.
	Platform channel.Kind
	// Inbox narrows the page as the console's inbox filters it; its zero
	// value keeps every conversation.
	Inbox InboxFilter
	// Before, when set, keeps conversations whose last message is older.
	Before *time.Time
	// At, when set, selects every conversation whose last message is at
	// exactly this time, and Before and Limit are ignored.
	At    *time.Time
	Limit int
}

// InboxFilter is what the inbox's list filters by: each field set keeps
// only the conversations that have it.
type InboxFilter struct {
	ChannelID string
	// Unanswered keeps conversations whose last customer message got no
	// answer (Chat.Unanswered set).
	Unanswered bool
	// SuggestionWaiting keeps conversations with a waiting suggestion.
	SuggestionWaiting bool
	// HandedOver keeps conversations handed over to operators.
	HandedOver bool
	// Assignee keeps conversations assigned to this operator (an email,
	// compared in lower case).
	Assignee string
}

// MessageQuery selects a page of a conversation's messages, newest first.
type MessageQuery struct {
	ConversationID string
	Before         *time.Time
	At             *time.Time
	Limit          int
}

// Suggestions keep each conversation's waiting suggestion, one at most.
type Suggestions interface {
	// Get returns the conversation's waiting suggestion, ErrNoSuggestion
	// when none waits.
	Get(ctx context.Context, conversationID string) (Suggestion, error)
	// Draft stores s in place of the conversation's waiting suggestion,
	// with the idempotency receipt of the draft when rec is not nil,
	// together.
	Draft(ctx context.Context, s Suggestion, rec *receipt.Receipt) error
	// Take removes the conversation's waiting suggestion and returns it,
	// so that only one operator sends it; ErrNoSuggestion when none
	// waits. Given seen, only that draft is taken: another waiting is
	// ErrSuggestionReplaced, and stays.
	Take(ctx context.Context, conversationID string, seen *SuggestionMark) (Suggestion, error)
	// PutBack makes s, taken but not (all) sent, the waiting suggestion
	// again, unless a newer draft waits by now.
	PutBack(ctx context.Context, s Suggestion) error
	// Discard removes the conversation's waiting suggestion, if one
	// waits. Given seen, only that draft is removed: another waiting is
	// ErrSuggestionReplaced, and stays.
	Discard(ctx context.Context, conversationID string, seen *SuggestionMark) error
	// Waiting says which of the conversations have a waiting suggestion.
	Waiting(ctx context.Context, conversationIDs []string) (map[string]bool, error)
}

// Store keeps the inbox.
type Store interface {
	// Receive stores the platform delivery d once, durably, before it
	// returns (the platform gets its 2xx only then): its claim, and for a
	// customer message its contact, conversation, message and event or
	// chat turn, all or nothing. Concurrent calls may share one
	// transaction; a delivery that cannot be stored fails alone.
	Receive(ctx context.Context, d Delivery) (Received, error)
	// Get returns the conversation if it belongs to workspaceID, else
	// ErrNotFound: other workspaces' conversations do not exist for it.
	Get(ctx context.Context, workspaceID, id string) (Conversation, error)
	// GetWithChannel is Get with the conversation's channel, read
	// together: a send needs both.
	GetWithChannel(ctx context.Context, workspaceID, id string) (Conversation, channel.Channel, error)
	ListConversations(ctx context.Context, q ConversationQuery) ([]Conversation, error)
	ListMessages(ctx context.Context, q MessageQuery) ([]Message, error)
	// LastMessages returns the newest message of each of the
	// conversations, by conversation id; a conversation without messages
	// is left out.
	LastMessages(ctx context.Context, conversationIDs []string) (map[string]Message, error)
	// AddSent stores messages sent to the customer in one of its
	// conversations, moves the conversation's last_message_at and clears
	// its unanswered mark (Message.Answers), and, when rec is not nil,
	// stores the send's idempotency receipt, together. ErrNotFound when
	// the conversation does not exist; then nothing is stored.
	AddSent(ctx context.Context, msgs []Message, rec *receipt.Receipt) error
	// UpdateChat loads the workspace's conversation, lets fn change its
	// chat state and saves it, atomically (the row is locked meanwhile),
	// and returns the conversation as saved. Its turn counter is the
	// receive transaction's alone: fn's changes to Turns are not saved.
	// An error from fn changes nothing; ErrNotFound as Get.
	UpdateChat(ctx context.Context, workspaceID, id string, fn func(*Chat) error) (Conversation, error)
	// AddReceipt stores the idempotency receipt of a keyed send that
	// stored no message: it failed after part of it was delivered.
	AddReceipt(ctx context.Context, rec receipt.Receipt) error
	// FindContact returns the channel's contact whose platform id is
	// senderID, or ErrContactNotFound.
	FindContact(ctx context.Context, channelID, senderID string) (Contact, error)
}

// Delivery is one platform delivery for Store.Receive.
type Delivery struct {
	ChannelID string
	// Key names the delivery, unique per channel (a Telegram update_id, a
	// Meta mid): a key claimed before is a redelivery, stored once.
	Key string
	// Conversation is the customer message's contact and conversation:
	// the contact is stored, or the one of the same channel and sender id
	// updated with what it tells anew (a platform may send an empty name
	// or picture: what was known is kept); then the conversation of the
	// channel and contact is stored or moved forward, never back in time
	// (a retried, older delivery keeps the newer reply address). Its ids
	// are not read: NewID makes them when they are stored for the first
	// time. Nil for a delivery only recorded as seen.
	Conversation *Conversation
	NewID        func() string
	// Store says what the customer message stores once its conversation
	// is stored (locked until the commit, so its chat state cannot change
	// meanwhile); it may be called again if the first attempt is rolled
	// back.
	Store func(Conversation) (Stored, error)
}

// Stored is what a customer message stores: the message, and the event
// telling of it (channels in external mode) or the chat turn the built-in
// AI answers, at most one of the two.
type Stored struct {
	Message Message
	Event   *outbox.Event
	// Turn must be the one after the conversation's Chat.Turns as Store
	// was given it, or nothing is stored.
	Turn *Turn
}

// Events are the outbox events s writes: its chat turn's or its customer
// event, if any.
func (s Stored) Events() []outbox.Event {
	switch {
	case s.Turn != nil:
		return []outbox.Event{s.Turn.Event}
	case s.Event != nil:
		return []outbox.Event{*s.Event}
	}
	return nil
}

// Received is what became of a delivery: Fresh is false for a key
// claimed before, when nothing else was stored; Conversation and Stored
// are what a fresh customer message stored.
type Received struct {
	Fresh        bool
	Conversation Conversation
	Stored       Stored
}

// ReceiveTx is what one received delivery may do, all in one transaction
// (a comment, its private reply: see the comment package).
type ReceiveTx interface {
	// Claim records that the channel received the delivery named key (a
	// Telegram update_id, a Meta mid); false means it was received before
	// and must be ignored. Platforms redeliver until they get a 2xx.
	Claim(ctx context.Context, channelID, key string) (bool, error)
	// UpsertConversation stores c.Contact, or updates the contact with the
	// same channel and sender id, then stores c with it, or moves the
	// existing conversation of the same channel and contact forward; it
	// returns the stored conversation and contact. (One step, since a
	// customer's message always needs both.)
	UpsertConversation(ctx context.Context, c Conversation) (Conversation, error)
	// AddMessage stores m and, when ev is not nil, the outbox event that
	// tells of it. A message that answers the customer (Message.Answers)
	// clears the conversation's unanswered mark.
	AddMessage(ctx context.Context, m Message, ev *outbox.Event) error
	// AddTurn stores the customer message m, which is the chat turn t of
	// its conversation: the turn's event goes to the outbox and the
	// conversation's turn counter moves to t.Seq, which must be the one
	// after it (the conversation's row, locked by UpsertConversation,
	// says so), or nothing is stored.
	AddTurn(ctx context.Context, m Message, t Turn) error
	AddEvent(ctx context.Context, e outbox.Event) error
}
