package app

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/comment"
	"github.com/parleyhq/parley/services/messaging/internal/domain/outbox"
)

// ReceiveComment stores a comment on one of the channel's posts once (a
// redelivery does nothing) and, for channels in external mode, writes
// comment.received to the outbox in the same transaction. in is nil for a
// change that is not a new comment. The page's own comments are neither
// stored nor forwarded: they are the page answering, and forwarding them
// would loop. It returns the ingress outcome.
func (a *App) ReceiveComment(ctx context.Context, ch channel.Channel, in *comment.Inbound) (string, error) {
	if in == nil || (in.FromID != "" && in.FromID == ch.ExternalID) {
		a.observer.Ingress(string(ch.Kind), IngressIgnored)
		return IngressIgnored, nil
	}
	if a.comments.Store == nil {
		return "", errors.New("no comment store configured")
	}
	c := comment.Comment{
		ID: a.newID(), WorkspaceID: ch.WorkspaceID, ChannelID: ch.ID, Platform: ch.Kind,
		ExternalID: in.ExternalID, PostID: in.PostID, ParentID: in.ParentID, Text: in.Text,
		FromID: in.FromID, FromName: in.FromName, CreatedAt: a.platformTime(in.CreatedAt.UTC()), Status: comment.StatusReceived,
	}
	outcome := IngressStored
	var written []outbox.Event
	err := a.comments.Store.Receive(ctx, func(tx comment.Tx) error {
		// Only what the committing run of fn wrote is published.
		written = nil
		fresh, err := tx.Claim(ctx, ch.ID, dedupeKeyComment(in.ExternalID))
		if err != nil {
			return err
		}
		if fresh {
			fresh, err = tx.AddComment(ctx, c)
			if err != nil {
				return err
			}
		}
		if !fresh {
			outcome = IngressDuplicate
			return nil
		}
		// The mode is read with the channel for this delivery, so a change
		// applies from the next comment.
		if !ch.ForwardsEvents() {
			return nil
		}
		ev, err := a.outboxEvent(&eventsv1.Event{
			Id: a.newID(), Type: EventCommentReceived, WorkspaceId: ch.WorkspaceID,
			Data: &eventsv1.Event_CommentReceived{CommentReceived: &eventsv1.CommentReceived{
				WorkspaceId: ch.WorkspaceID,
				Platform:    string(ch.Kind),
				Channel:     &eventsv1.Channel{Kind: string(ch.Kind), ExternalId: ch.ExternalID},
				Comment: &eventsv1.Comment{
					Id: c.ExternalID, PostId: c.PostID, Text: c.Text,
					From:       &eventsv1.CommentAuthor{Id: c.FromID, Name: c.FromName},
					ReceivedAt: timestamppb.New(c.CreatedAt),
				},
			}},
		})
		if err != nil {
			return err
		}
		if err := tx.AddEvent(ctx, ev); err != nil {
			return err
		}
		written = []outbox.Event{ev}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("receive comment %s on channel %s: %w", in.ExternalID, ch.ID, err)
	}
	return a.received(ch, outcome, written, err)
}
