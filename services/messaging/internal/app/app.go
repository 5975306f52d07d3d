// Package app holds the messaging use cases: receiving customer messages
// (and making the built-in AI's chat turns of them), sending replies,
// reading the inbox, keeping conversations' chat state and suggestions,
// and managing channels. It decides; the domain holds the rules and the
// adapters do the I/O.
package app

import (
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	"github.com/parleyhq/parley/services/messaging/internal/domain/outbox"
)

// Deps are what the use cases need.
type Deps struct {
	Channels channel.Store
	// RecentChannels reads the channels of platform deliveries, perhaps a
	// moment old; Channels when nil.
	RecentChannels channel.Lookup
	Inbox          conversation.Store
	// Suggestions keep the conversations' waiting suggestions.
	Suggestions conversation.Suggestions
	// Transports send on each platform; a platform missing here cannot be
	// sent to yet.
	Transports map[channel.Kind]conversation.Transport
	// Window is how long after the customer's last message Messenger and
	// Instagram take replies (MESSAGING_WINDOW).
	Window time.Duration
	// Comments are the comment use cases' stores, platform and limits.
	Comments CommentDeps
	// EventSubject names the stream subject of an event of a workspace.
	EventSubject func(workspaceID, eventType string) string
	// ChatSubject names the chat stream subject of a conversation's
	// turns.
	ChatSubject func(workspaceID, conversationID string) string
	// EventsCommitted is called after a commit that wrote outbox rows
	// (events or chat turns) with their events, for the relay to publish
	// at once and then forget (Relay.Publish); a batch of receipts calls it
	// once. Nil publishes nothing: the rows wait for the relay's sweep.
	EventsCommitted func(events []outbox.Event)
	// InboxChanged is called after a conversation changed as the inbox
	// shows it: a message stored or sent, its chat state changed, a
	// suggestion drafted, sent or discarded. The console's inbox redraws
	// on it (docs/console.md "The inbox"); nil tells no one.
	InboxChanged func(workspaceID, conversationID string)
	// Observer is told what operators watch (nil: nothing is).
	Observer Observer
	// Clock dates what the use cases store and checks the windows;
	// time.Now when nil. NewID makes ids; UUIDv7 when nil.
	Clock func() time.Time
	NewID func() string
}

// App is the messaging use cases.
type App struct {
	channels     channel.Store
	recent       channel.Lookup
	inbox        conversation.Store
	suggestions  conversation.Suggestions
	transports   map[channel.Kind]conversation.Transport
	window       time.Duration
	comments     CommentDeps
	eventSubject func(workspaceID, eventType string) string
	chatSubject  func(workspaceID, conversationID string) string
	publish      func(committed []outbox.Event)
	inboxChanged func(workspaceID, conversationID string)
	observer     Observer
	now          func() time.Time
	newID        func() string
}

// New returns the use cases over d.
func New(d Deps) *App {
	a := &App{
		channels:     d.Channels,
		recent:       d.RecentChannels,
		inbox:        d.Inbox,
		suggestions:  d.Suggestions,
		transports:   d.Transports,
		window:       d.Window,
		comments:     d.Comments,
		eventSubject: d.EventSubject,
		chatSubject:  d.ChatSubject,
		publish:      d.EventsCommitted,
		inboxChanged: d.InboxChanged,
		observer:     observerOr(d.Observer),
		now:          d.Clock,
		newID:        d.NewID,
	}
	if a.window == 0 {
		a.window = 24 * time.Hour
	}
	if a.recent == nil {
		a.recent = d.Channels
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.newID == nil {
		a.newID = NewID
	}
	if a.publish == nil {
		a.publish = func([]outbox.Event) {}
	}
	if a.inboxChanged == nil {
		a.inboxChanged = func(string, string) {}
	}
	return a
}

// NewID returns a UUIDv7: time-ordered, so new rows land at the end of
// their indexes.
func NewID() string {
	return uuid.Must(uuid.NewV7()).String()
}

// timestamp is the clock at the store's precision, so what a use case
// returns equals what is read back later.
func (a *App) timestamp() time.Time {
	return a.now().UTC().Truncate(time.Microsecond)
}

// platformTime is the time a platform gave what a customer sent, or its
// arrival when that is later: a platform clock running ahead, or a value
// no clock gives, which the database could not hold and the messaging
// window would count from (docs/channels.md "Messenger and Instagram").
func (a *App) platformTime(sent time.Time) time.Time {
	if now := a.timestamp(); sent.After(now) {
		return now
	}
	return sent
}
