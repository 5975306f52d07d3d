// Package comment holds comments on a page's posts (Facebook feed,
// Instagram media) and the rules of answering them: a public reply under
// the comment, and one private reply (a DM to the commenter) per comment,
// within the private-reply window of the comment, at most one per commenter
// per window, and within the page's daily cap (docs/comments.md).
package comment

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	"github.com/parleyhq/parley/services/messaging/internal/domain/receipt"
)

// Status is where a comment stands in being answered (docs/comments.md
// "A comment's status").
type Status string

// Statuses: no answer yet, a public reply only, a private reply only, or
// both.
const (
	// StatusReceived is a comment nobody has answered yet.
	StatusReceived Status = "received"
	// StatusReplied is a comment with a public reply and no private reply.
	StatusReplied Status = "replied"
	// StatusDMSent is a comment whose commenter got a private reply, with no
	// public reply before it.
	StatusDMSent Status = "dm_sent"
	// StatusBothSent is a comment with both a public and a private reply.
	StatusBothSent Status = "both_sent"
)

// Comment is one comment on one of a channel's posts.
type Comment struct {
	// ID is Parley's id of the stored comment.
	ID          string
	WorkspaceID string
	ChannelID   string
	Platform    channel.Kind
	// ExternalID is the platform's comment id: the comment.id of the
	// webhook event and the :id of the reply routes.
	ExternalID string
	PostID     string
	// ParentID is the comment this one answers, if it is a reply.
	ParentID string
	Text     string
	FromID   string
	FromName string
	// CreatedAt is the platform's time of the comment; the private-reply
	// window runs from it.
	CreatedAt time.Time
	Status    Status

	PublicReplyID   string
	PublicRepliedAt time.Time
	// PrivateReplyClaimedAt is set while a private reply is being sent: it
	// keeps a second one from starting. It is cleared if the send fails.
	PrivateReplyClaimedAt      time.Time
	PrivateReplyRecipientID    string
	PrivateReplyMessageID      string
	PrivateRepliedAt           time.Time
	PrivateReplyConversationID string
}

// Inbound is a comment as the platform delivered it.
type Inbound struct {
	ExternalID string
	PostID     string
	ParentID   string
	Text       string
	FromID     string
	FromName   string
	CreatedAt  time.Time
}

// Errors of the rules. Each is answered with its own code.
var (
	// ErrNotFound is a comment that does not exist in the asking workspace.
	ErrNotFound = errors.New("comment not found")
	// ErrPrivateReplyUsed is a second private reply on one comment.
	ErrPrivateReplyUsed = errors.New("this comment already has its private reply")
	// ErrPrivateReplyExpired is a private reply to a comment older than the
	// private-reply window.
	ErrPrivateReplyExpired = errors.New("the comment is older than the private-reply window")
	// ErrCommenterWindow is a commenter who already got a private reply
	// from this page within the window.
	ErrCommenterWindow = errors.New("the commenter already got a private reply from this page within the private-reply window")
	// ErrDailyCap is a page that reached its private replies for the day.
	ErrDailyCap = errors.New("the page reached its daily private-reply cap")
)

// Limits of reply texts. A private reply is a message (Messenger's Send
// API takes at most 2000 characters); a public reply is a comment, whose
// bound is the platform's.
const (
	MaxPrivateReplyLength         = 2000
	MaxPublicReplyLengthFacebook  = 8000
	MaxPublicReplyLengthInstagram = 2200
)

// ValidatePublicReply checks a public reply's text for the platform.
func ValidatePublicReply(platform channel.Kind, text string) error {
	limit := MaxPublicReplyLengthFacebook
	if platform == channel.KindInstagram {
		limit = MaxPublicReplyLengthInstagram
	}
	return validateText(text, limit)
}

// ValidatePrivateReply checks a private reply's text.
func ValidatePrivateReply(text string) error {
	return validateText(text, MaxPrivateReplyLength)
}

// RequireText checks that a reply has a text, whatever its platform.
func RequireText(text string) error {
	if strings.TrimSpace(text) == "" {
		return &conversation.FieldError{Field: "text", Reason: "is required"}
	}
	return nil
}

func validateText(text string, limit int) error {
	if err := RequireText(text); err != nil {
		return err
	}
	if n := utf8.RuneCountInString(text); n > limit {
		return &conversation.FieldError{Field: "text", Reason: fmt.Sprintf("must be at most %d characters (got %d)", limit, n)}
	}
	return nil
}

// ClaimPrivateReply reserves the comment's one private reply at now: it
// refuses a comment that has had or is having one, and one older than
// window.
func (c *Comment) ClaimPrivateReply(now time.Time, window time.Duration) error {
	if !c.PrivateRepliedAt.IsZero() || !c.PrivateReplyClaimedAt.IsZero() {
		return ErrPrivateReplyUsed
	}
	if now.Sub(c.CreatedAt) > window {
		return ErrPrivateReplyExpired
	}
	c.PrivateReplyClaimedAt = now
	return nil
}

// ReleasePrivateReply gives the claim back after a send that did not
// happen.
func (c *Comment) ReleasePrivateReply() {
	if c.PrivateRepliedAt.IsZero() {
		c.PrivateReplyClaimedAt = time.Time{}
	}
}

// RecordPrivateReply marks the private reply sent: dm_sent, or both_sent
// when a public reply was sent before.
func (c *Comment) RecordPrivateReply(at time.Time, recipientID, messageID, conversationID string) {
	c.PrivateRepliedAt = at
	c.PrivateReplyRecipientID = recipientID
	c.PrivateReplyMessageID = messageID
	c.PrivateReplyConversationID = conversationID
	c.Status = c.status()
}

// RecordPublicReply marks a public reply sent. The latest reply's id is
// kept; the first reply's time decides the order against a private reply.
func (c *Comment) RecordPublicReply(at time.Time, replyID string) {
	c.PublicReplyID = replyID
	if c.PublicRepliedAt.IsZero() {
		c.PublicRepliedAt = at
	}
	c.Status = c.status()
}

// status derives the status from what was sent. A public reply after the
// private one also makes it both_sent: both went out.
func (c *Comment) status() Status {
	dm, public := !c.PrivateRepliedAt.IsZero(), !c.PublicRepliedAt.IsZero()
	switch {
	case dm && public:
		return StatusBothSent
	case dm:
		return StatusDMSent
	case public:
		return StatusReplied
	}
	return StatusReceived
}

// PrivateSent is the platform's receipt for a private reply.
type PrivateSent struct {
	// RecipientID is the commenter's id for messaging (a PSID / IGSID): the
	// contact the DM's conversation is with.
	RecipientID string
	// MessageID is the platform's id of the DM.
	MessageID string
}

// Replier answers comments on the platform. Refusals are
// *conversation.PlatformError; ErrPrivateReplyExpired when the platform
// itself says the comment is too old for a private reply. Nothing was sent
// in either case.
type Replier interface {
	// ReplyPublic posts text under the comment and returns the reply's id.
	ReplyPublic(ctx context.Context, ch channel.Channel, commentID, text string) (string, error)
	// ReplyPrivate sends text to the commenter as a DM.
	ReplyPrivate(ctx context.Context, ch channel.Channel, commentID, text string) (PrivateSent, error)
}

// Release gives back a claim or reservation whose send did not happen.
type Release func(context.Context) error

// DailyCap counts a page's private replies of the day, shared with every
// other producer of private replies of the page.
type DailyCap interface {
	// Reserve takes one private reply of pageID's day under limit; ok is
	// false when the cap is reached, and nothing was taken.
	Reserve(ctx context.Context, pageID string, limit int) (release Release, ok bool, err error)
}

// CommenterClaims keeps a commenter from getting two private replies from
// one page within the window, also when two are sent at once.
type CommenterClaims interface {
	// Claim takes the commenter's private reply of the window; ok is false
	// when it is already taken.
	Claim(ctx context.Context, pageID, commenterID string, window time.Duration) (release Release, ok bool, err error)
}

// Store keeps comments.
type Store interface {
	// Receive runs fn in one transaction; an error from fn rolls it all
	// back.
	Receive(ctx context.Context, fn func(Tx) error) error
	// Get returns the comment of workspaceID whose platform id is
	// externalID; ErrNotFound when there is none.
	Get(ctx context.Context, workspaceID, externalID string) (Comment, error)
	// Update loads the comment, lets fn change it and saves it, atomically
	// (the row is locked meanwhile); an error from fn changes nothing.
	Update(ctx context.Context, id string, fn func(*Comment) error) (Comment, error)
	// CommenterRepliedSince reports whether the commenter fromID got a
	// private reply on channelID at or after since.
	CommenterRepliedSince(ctx context.Context, channelID, fromID string, since time.Time) (bool, error)
}

// Tx is what storing a comment or a private reply may do in one
// transaction: the inbox's receive operations (dedupe claim, contact,
// conversation, message, outbox event) and the comment's own.
type Tx interface {
	conversation.ReceiveTx
	// AddComment stores c; false when the channel already has a comment
	// with its ExternalID.
	AddComment(ctx context.Context, c Comment) (bool, error)
	// Update is Store.Update inside this transaction.
	Update(ctx context.Context, id string, fn func(*Comment) error) (Comment, error)
	// AddReceipt stores the idempotency receipt of the reply this
	// transaction records.
	AddReceipt(ctx context.Context, r receipt.Receipt) error
}
