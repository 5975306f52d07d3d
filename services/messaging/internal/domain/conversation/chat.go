package conversation

import (
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/outbox"
)

// Bounds of a conversation's chat state (docs/limits-and-errors.md
// "Conversations' chat state").
const (
	MaxTags               = 20
	MaxTagLength          = 50
	MaxAssigneeLength     = 254
	MaxHandoverReason     = 500
	MaxSuggestionMessages = 10
)

// Why a customer message was left unanswered (Chat.Unanswered): the plan's
// AI replies were used up, or the AI could not answer.
const (
	UnansweredAILimitReached = "ai_limit_reached"
	UnansweredAIUnavailable  = "ai_unavailable"
)

// Chat is a conversation's chat state: whether the built-in AI answers it,
// and what the inbox shows of it.
type Chat struct {
	// HandedOver: the AI stays silent in this conversation until an
	// operator resumes it; HandoverReason says who or what handed it
	// over, and why.
	HandedOver     bool
	HandoverReason string
	// Unanswered is why the last customer message got no answer
	// (UnansweredAILimitReached, UnansweredAIUnavailable); "" when it was
	// answered or waits for one. Any message sent to the customer (by the
	// AI, an operator or the API) clears it: see Message.Answers.
	Unanswered string
	// Tags are the conversation's labels, each once whatever its case, in
	// the order they were added.
	Tags []string
	// Assignee is the operator (an email) the conversation is assigned
	// to; "" when none.
	Assignee string
	// Turns counts the conversation's chat turns: the next one is numbered
	// Turns+1.
	Turns int64
}

// ErrHandedOver is an AI send or draft for a conversation handed over to
// operators: the AI stays silent there.
var ErrHandedOver = errors.New("the conversation is handed over to operators; the AI does not answer it until they resume it")

// ErrChannelExternal is an AI send to a conversation whose channel is in
// ai_mode external: the developer answers there, the AI sends nothing,
// also for a turn that came in before the switch (docs/channels.md "Who
// answers a channel: its mode").
var ErrChannelExternal = errors.New("the channel is in ai_mode external; the built-in AI does not answer on it")

// NextTurn says whether a customer message of c, received on ch, is a chat
// turn, and its number: the channel's AI answers (auto or suggest) and the
// conversation is not handed over.
func (c Conversation) NextTurn(ch channel.Channel) (seq int64, ok bool) {
	if !ch.AIAnswers() || c.Chat.HandedOver {
		return 0, false
	}
	return c.Chat.Turns + 1, true
}

// Turn is a customer message the built-in AI answers: its number among the
// conversation's turns, and the outbox row of its events.v1.ChatTurn.
type Turn struct {
	Seq   int64
	Event outbox.Event
}

// HandOver stops the AI in the conversation until ResumeAI; reason (who or
// what handed it over, and why) is kept with it.
func (c *Chat) HandOver(reason string) error {
	reason = strings.TrimSpace(reason)
	if n := utf8.RuneCountInString(reason); n > MaxHandoverReason {
		return &FieldError{"reason", fmt.Sprintf("must be at most %d characters (got %d)", MaxHandoverReason, n)}
	}
	c.HandedOver, c.HandoverReason = true, reason
	return nil
}

// ResumeAI lets the AI answer the conversation again, from its next
// customer message.
func (c *Chat) ResumeAI() {
	c.HandedOver, c.HandoverReason = false, ""
}

// AddTags adds tags, trimmed, that the conversation does not have yet in
// any case; the conversation keeps at most MaxTags, each 1 to MaxTagLength
// characters without control characters. Nothing is added when one breaks
// a rule.
func (c *Chat) AddTags(tags []string) error {
	if len(tags) == 0 {
		return &FieldError{"tags", "must have at least one tag"}
	}
	out := append([]string(nil), c.Tags...)
	for i, raw := range tags {
		tag := strings.TrimSpace(raw)
		field := fmt.Sprintf("tags[%d]", i)
		switch n := utf8.RuneCountInString(tag); {
		case n == 0:
			return &FieldError{field, "must not be empty"}
		case n > MaxTagLength:
			return &FieldError{field, fmt.Sprintf("must be at most %d characters (got %d)", MaxTagLength, n)}
		case strings.ContainsFunc(tag, unicode.IsControl):
			return &FieldError{field, "must not contain control characters"}
		}
		if !containsFold(out, tag) {
			out = append(out, tag)
		}
	}
	if len(out) > MaxTags {
		return &FieldError{"tags", fmt.Sprintf("would make %d tags; a conversation has at most %d", len(out), MaxTags)}
	}
	c.Tags = out
	return nil
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// Assign gives the conversation to the operator whose email is assignee,
// kept in lower case as operators are compared; "" unassigns it.
func (c *Chat) Assign(assignee string) error {
	email := strings.ToLower(strings.TrimSpace(assignee))
	if email != "" {
		if err := CheckEmail("assignee", email); err != nil {
			return err
		}
	}
	c.Assignee = email
	return nil
}

// CheckEmail returns a *FieldError naming field unless email is one plain
// address (no display name, no list) whose domain has a dot, of at most
// MaxAssigneeLength characters.
func CheckEmail(field, email string) error {
	at := strings.LastIndexByte(email, '@')
	addr, err := mail.ParseAddress(email)
	if len(email) > MaxAssigneeLength || err != nil || addr.Name != "" || addr.Address != email || !strings.Contains(email[at+1:], ".") {
		return &FieldError{field, fmt.Sprintf("must be an email address of at most %d characters", MaxAssigneeLength)}
	}
	return nil
}

// MarkUnanswered records why the last customer message got no answer.
func (c *Chat) MarkUnanswered(reason string) error {
	switch reason {
	case UnansweredAILimitReached, UnansweredAIUnavailable:
		c.Unanswered = reason
		return nil
	case "":
		return &FieldError{"reason", reasonRequired + " (" + UnansweredAILimitReached + " or " + UnansweredAIUnavailable + ")"}
	}
	return &FieldError{"reason", "must be " + UnansweredAILimitReached + " or " + UnansweredAIUnavailable}
}

// Answers reports whether m answers the customer, and so clears the
// conversation's unanswered mark: every message sent to them does,
// whoever sent it.
func (m Message) Answers() bool { return m.Sender != SenderContact }

// Author is who sends a message to the customer: an operator or the
// developer's API key (SenderUser), or the built-in AI (SenderAI).
type Author struct {
	Sender Sender
	// RunID is the chat run an AI message comes from.
	RunID string
	// Operator is the operator (an email) who sent a suggestion.
	Operator string
}

// ByAPI is the author of the Developer API's sends: the developer, or an
// operator through it.
var ByAPI = Author{Sender: SenderUser}

// CheckSend refuses what a does not send to c: the AI sends nothing to a
// conversation handed over (ErrHandedOver); operators and the API always
// may.
func (a Author) CheckSend(c Conversation) error {
	if a.Sender == SenderAI && c.Chat.HandedOver {
		return ErrHandedOver
	}
	return nil
}

// CheckChannel refuses an AI send on a channel in ai_mode external
// (ErrChannelExternal), whatever mode its turn came in under; operators
// and the API always may.
func (a Author) CheckChannel(ch channel.Channel) error {
	if a.Sender == SenderAI && ch.ForwardsEvents() {
		return ErrChannelExternal
	}
	return nil
}

// Metadata adds what is kept of a to a sent message's metadata md: the
// chat run of an AI message, the operator who sent a suggestion.
func (a Author) Metadata(md map[string]any) map[string]any {
	if a.RunID != "" {
		md["run_id"] = a.RunID
	}
	if a.Operator != "" {
		md["operator"] = a.Operator
	}
	return md
}

// Outbound is one message to send that a chat run emitted or a suggestion
// holds: a text (with quick replies or buttons) or a carousel; exactly one
// is set.
type Outbound struct {
	Text     *OutboundText
	Carousel *OutboundCarousel
}

// Validate checks the rules every platform shares, and fills a carousel's
// default ratio.
func (o Outbound) Validate() error {
	switch {
	case o.Text != nil && o.Carousel == nil:
		return o.Text.Validate()
	case o.Carousel != nil && o.Text == nil:
		return o.Carousel.Validate()
	}
	return &FieldError{"type", "must be text or carousel"}
}

// Suggestion is a conversation's waiting suggestion: what a chat run on a
// suggest channel drafted in answer to the customer, for an operator to
// send, edit or discard. A newer draft replaces it.
type Suggestion struct {
	ConversationID string
	WorkspaceID    string
	RunID          string
	Messages       []Outbound
	CreatedAt      time.Time
}

// ErrNoSuggestion is a suggestion to send when none waits.
var ErrNoSuggestion = errors.New("no suggestion waits in this conversation")

// SuggestionMark names one draft, as an operator read it: its run and
// when it was drafted (a run that waits at a question and drafts again
// keeps its id). A send or discard given a mark acts on that draft only.
type SuggestionMark struct {
	RunID     string
	CreatedAt time.Time
}

// Is reports whether s is the draft m names.
func (s Suggestion) Is(m SuggestionMark) bool {
	return s.RunID == m.RunID && s.CreatedAt.Equal(m.CreatedAt)
}

// ErrSuggestionReplaced is a send or discard of a draft that no longer
// waits because a newer one replaced it: nothing is done, so that no
// operator sends or drops a draft they did not read.
var ErrSuggestionReplaced = errors.New("a newer suggestion replaced the one named")

// CheckMessages validates the messages of a suggestion, drafted or as an
// operator edited them: 1 to MaxSuggestionMessages, each sendable.
func CheckMessages(msgs []Outbound) error {
	switch {
	case len(msgs) == 0:
		return &FieldError{"messages", "must have at least one message"}
	case len(msgs) > MaxSuggestionMessages:
		return &FieldError{"messages", fmt.Sprintf("must have at most %d messages (got %d)", MaxSuggestionMessages, len(msgs))}
	}
	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				return &FieldError{fmt.Sprintf("messages[%d].%s", i, fe.Field), fe.Reason}
			}
			return err
		}
	}
	return nil
}
