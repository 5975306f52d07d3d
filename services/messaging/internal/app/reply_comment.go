package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/comment"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	"github.com/parleyhq/parley/services/messaging/internal/domain/receipt"
)

// GetComment returns the workspace's comment whose platform id is id;
// comment.ErrNotFound for unknown ids and other workspaces' comments.
func (a *App) GetComment(ctx context.Context, workspaceID, id string) (comment.Comment, error) {
	if a.comments.Store == nil {
		return comment.Comment{}, errors.New("no comment store configured")
	}
	return a.comments.Store.Get(ctx, workspaceID, id)
}

// PublicReply is a sent public reply: the comment as it stands after it,
// and the reply's platform id.
type PublicReply struct {
	Comment    comment.Comment
	ExternalID string
}

// ReplyToComment posts text publicly under the comment and records it,
// with the receipt of the answer when the reply carries an idempotency key
// (rr). An error is a refusal, nothing posted, unless it is a
// *DeliveredError.
func (a *App) ReplyToComment(ctx context.Context, workspaceID, id, text string, rr *ReceiptRequest[PublicReply]) (PublicReply, error) {
	// The text's bound depends on the comment's platform; its presence is
	// checked before the lookup, as every send validates first.
	if err := comment.RequireText(text); err != nil {
		return PublicReply{}, err
	}
	c, ch, err := a.commentAndChannel(ctx, workspaceID, id)
	if err != nil {
		return PublicReply{}, err
	}
	if err := comment.ValidatePublicReply(c.Platform, text); err != nil {
		return PublicReply{}, err
	}
	replyID, err := a.comments.Replier.ReplyPublic(ctx, ch, c.ExternalID, text)
	if err := a.observeCommentReply(c, err); err != nil {
		return PublicReply{}, err
	}
	// The reply is posted: it is recorded even when the caller has gone.
	now := a.timestamp()
	var out PublicReply
	err = a.comments.Store.Receive(context.WithoutCancel(ctx), func(tx comment.Tx) error {
		updated, err := tx.Update(ctx, c.ID, func(c *comment.Comment) error {
			c.RecordPublicReply(now, replyID)
			return nil
		})
		if err != nil {
			return err
		}
		out = PublicReply{Comment: updated, ExternalID: replyID}
		return addReceipt(ctx, tx, rr.receipt(a.observer, workspaceID, c.ExternalID, out, nil))
	})
	if err != nil {
		a.observer.PublicReplyNotRecorded(c.ExternalID, replyID, err)
		return PublicReply{}, &DeliveredError{Err: fmt.Errorf("record public reply: %w", err)}
	}
	return out, nil
}

// addReceipt stores rec in tx; nil stores nothing.
func addReceipt(ctx context.Context, tx comment.Tx, rec *receipt.Receipt) error {
	if rec == nil {
		return nil
	}
	return tx.AddReceipt(ctx, *rec)
}

// PrivateReply is a sent private reply.
type PrivateReply struct {
	Comment comment.Comment
	// RecipientID is the commenter's messaging id (PSID / IGSID).
	RecipientID string
	// ExternalID is the platform's id of the DM.
	ExternalID string
	// Message is the DM as stored in the commenter's conversation.
	Message conversation.Message
}

// SendPrivateReply sends text to the commenter as a DM, once per comment,
// within the window of the comment, once per commenter per window, and
// within the page's daily cap; the DM is stored in the commenter's inbox
// conversation as sent by a user.
//
// Every rule is claimed before anything is sent, atomically, so that two
// simultaneous private replies cannot both go out: the comment's claim is
// a conditional update of its locked row, the commenter's a Redis key set
// if absent for the window, the day's a reservation on the shared daily
// counter. A refusal, or a platform that does not take the DM, releases
// what was claimed; nothing is sent after a refusal. The receipt of the
// answer, when the reply carries an idempotency key (rr), is stored with
// the DM. An error is a refusal, nothing sent, unless it is a
// *DeliveredError.
func (a *App) SendPrivateReply(ctx context.Context, workspaceID, id, text string, rr *ReceiptRequest[PrivateReply]) (PrivateReply, error) {
	if err := comment.ValidatePrivateReply(text); err != nil {
		return PrivateReply{}, err
	}
	c, ch, err := a.commentAndChannel(ctx, workspaceID, id)
	if err != nil {
		return PrivateReply{}, err
	}
	window := a.comments.window()
	now := a.timestamp()

	// The releases run even when the caller has gone: a claim left behind
	// would refuse the next attempt for the whole window.
	var releases []comment.Release
	release := func() {
		rctx := context.WithoutCancel(ctx)
		for i := len(releases) - 1; i >= 0; i-- {
			if err := releases[i](rctx); err != nil {
				a.observer.PrivateReplyClaimNotReleased(c.ExternalID, err)
			}
		}
	}

	c, err = a.comments.Store.Update(ctx, c.ID, func(c *comment.Comment) error {
		return c.ClaimPrivateReply(now, window)
	})
	if err != nil {
		return PrivateReply{}, err
	}
	releases = append(releases, func(ctx context.Context) error {
		_, err := a.comments.Store.Update(ctx, c.ID, func(c *comment.Comment) error {
			c.ReleasePrivateReply()
			return nil
		})
		return err
	})

	// A commenter without an id (Meta omits from when the app may not see
	// the author) cannot be tracked across comments; only the comment's
	// own rule applies to them.
	if c.FromID != "" {
		recent, err := a.comments.Store.CommenterRepliedSince(ctx, c.ChannelID, c.FromID, now.Add(-window))
		if err != nil {
			release()
			return PrivateReply{}, err
		}
		if recent {
			release()
			return PrivateReply{}, comment.ErrCommenterWindow
		}
		free, ok, err := a.comments.Commenters.Claim(ctx, ch.ExternalID, c.FromID, window)
		if err != nil {
			release()
			return PrivateReply{}, err
		}
		if !ok {
			release()
			return PrivateReply{}, comment.ErrCommenterWindow
		}
		releases = append(releases, free)
	}

	free, ok, err := a.comments.DailyCap.Reserve(ctx, ch.ExternalID, a.comments.dailyCap())
	if err != nil {
		release()
		return PrivateReply{}, err
	}
	if !ok {
		release()
		return PrivateReply{}, comment.ErrDailyCap
	}
	releases = append(releases, free)

	sent, err := a.comments.Replier.ReplyPrivate(ctx, ch, c.ExternalID, text)
	if err := a.observeCommentReply(c, err); err != nil {
		release()
		return PrivateReply{}, err
	}
	// The commenter has the DM: it is stored even when the caller has gone.
	out, err := a.storePrivateReply(context.WithoutCancel(ctx), ch, c, text, sent, rr)
	if err != nil {
		// The claims stay taken, so no second DM follows; only our copy is
		// missing.
		a.observer.PrivateReplyNotStored(c.ExternalID, sent.RecipientID, sent.MessageID, err)
		return PrivateReply{}, &DeliveredError{Err: fmt.Errorf("store private reply: %w", err)}
	}
	return out, nil
}

// storePrivateReply puts the DM in the commenter's conversation (the
// contact is the recipient id Meta answered) and records the comment's new
// status, and the receipt of a keyed reply, in one transaction. The DM
// does not open the messaging window: only the customer's own messages do.
func (a *App) storePrivateReply(ctx context.Context, ch channel.Channel, c comment.Comment, text string, sent comment.PrivateSent, rr *ReceiptRequest[PrivateReply]) (PrivateReply, error) {
	now := a.timestamp()
	// A customer the page already knows keeps the name their profile gave;
	// a new one is named as they signed the comment.
	name := c.FromName
	if _, err := a.inbox.FindContact(ctx, ch.ID, sent.RecipientID); err == nil {
		name = ""
	}
	var out PrivateReply
	err := a.comments.Store.Receive(ctx, func(tx comment.Tx) error {
		conv, err := tx.UpsertConversation(ctx, conversation.Conversation{
			ID: a.newID(), WorkspaceID: ch.WorkspaceID, ChannelID: ch.ID, Platform: ch.Kind,
			Contact: conversation.Contact{
				ID: a.newID(), WorkspaceID: ch.WorkspaceID, ChannelID: ch.ID,
				SenderID: sent.RecipientID, Name: name,
			},
			ReplyTo: sent.RecipientID, LastMessageAt: now,
		})
		if err != nil {
			return err
		}
		msg := conversation.Message{
			ID: a.newID(), WorkspaceID: ch.WorkspaceID, ConversationID: conv.ID,
			Sender: conversation.SenderUser, Type: conversation.TypeText, Content: text,
			Metadata:   map[string]any{"private_reply": map[string]any{"comment_id": c.ExternalID, "post_id": c.PostID}},
			ExternalID: sent.MessageID, CreatedAt: now,
		}
		if err := tx.AddMessage(ctx, msg, nil); err != nil {
			return err
		}
		updated, err := tx.Update(ctx, c.ID, func(c *comment.Comment) error {
			c.RecordPrivateReply(now, sent.RecipientID, sent.MessageID, conv.ID)
			return nil
		})
		if err != nil {
			return err
		}
		out = PrivateReply{Comment: updated, RecipientID: sent.RecipientID, ExternalID: sent.MessageID, Message: msg}
		return addReceipt(ctx, tx, rr.receipt(a.observer, ch.WorkspaceID, c.ExternalID, out, nil))
	})
	if err != nil {
		a.observer.Send(string(ch.Kind), SendError)
		return PrivateReply{}, err
	}
	return out, nil
}

// commentAndChannel loads the workspace's comment and its channel.
func (a *App) commentAndChannel(ctx context.Context, workspaceID, id string) (comment.Comment, channel.Channel, error) {
	if a.comments.Store == nil || a.comments.Replier == nil || a.comments.DailyCap == nil || a.comments.Commenters == nil {
		return comment.Comment{}, channel.Channel{}, errors.New("comment use cases are not configured")
	}
	c, err := a.comments.Store.Get(ctx, workspaceID, id)
	if err != nil {
		return comment.Comment{}, channel.Channel{}, err
	}
	ch, err := a.channels.Get(ctx, c.ChannelID)
	if err != nil {
		return comment.Comment{}, channel.Channel{}, fmt.Errorf("load channel of comment %s: %w", c.ExternalID, err)
	}
	return c, ch, nil
}

// observeCommentReply counts a platform call's outcome and passes its
// error on.
func (a *App) observeCommentReply(c comment.Comment, err error) error {
	var pe *conversation.PlatformError
	platform := string(c.Platform)
	switch {
	case err == nil:
		a.observer.Send(platform, SendSent)
		return nil
	case errors.Is(err, comment.ErrPrivateReplyExpired):
		a.observer.Send(platform, SendOutsideWindow)
	case errors.As(err, &pe):
		a.observer.Send(platform, SendRefused)
	default:
		a.observer.Send(platform, SendError)
	}
	return err
}
