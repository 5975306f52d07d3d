package parley

import (
	"context"
	"fmt"
	"iter"
	"time"
)

// Conversations returns every conversation from p on, page after page (each
// page one request, made as the loop reaches it), until the last page or
// the loop's break. An error ends the sequence after it is yielded.
//
//	for conv, err := range c.Conversations(ctx, parley.ConversationsParams{}) {
//		if err != nil { return err }
//		…
//	}
func (c *Client) Conversations(ctx context.Context, p ConversationsParams) iter.Seq2[Conversation, error] {
	return pages(func(before time.Time) ([]Conversation, *time.Time, error) {
		p := p // each loop its own, as loops may run at once
		p.Before = before
		pg, err := c.ListConversations(ctx, p)
		if err != nil {
			return nil, nil, err
		}
		return pg.Conversations, pg.NextBefore, nil
	}, p.Before)
}

// Messages returns every message of a conversation from p on, newest
// first, page after page, as Conversations does.
func (c *Client) Messages(ctx context.Context, conversationID string, p MessagesParams) iter.Seq2[Message, error] {
	return pages(func(before time.Time) ([]Message, *time.Time, error) {
		p := p // each loop its own, as loops may run at once
		p.Before = before
		pg, err := c.ListMessages(ctx, conversationID, p)
		if err != nil {
			return nil, nil, err
		}
		return pg.Messages, pg.NextBefore, nil
	}, p.Before)
}

// Deliveries returns every delivery of the log from p on, newest first,
// page after page, as Conversations does.
func (c *Client) Deliveries(ctx context.Context, p DeliveriesParams) iter.Seq2[Delivery, error] {
	return pages(func(before time.Time) ([]Delivery, *time.Time, error) {
		p := p // each loop its own, as loops may run at once
		p.Before = before
		pg, err := c.ListDeliveries(ctx, p)
		if err != nil {
			return nil, nil, err
		}
		return pg.Deliveries, pg.NextBefore, nil
	}, p.Before)
}

// pages yields the rows of each page, following next_before until it is
// null. A next_before that does not go back in time, or one on an empty
// page, is yielded as an error wrapping ErrMalformedAnswer.
func pages[T any](fetch func(before time.Time) ([]T, *time.Time, error), first time.Time) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		// Each loop over the sequence starts at the first page.
		before := first
		for {
			rows, next, err := fetch(before)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, row := range rows {
				if !yield(row, nil) {
					return
				}
			}
			if next == nil {
				return
			}
			// A next page that does not go back in time would repeat this
			// one, and one after an empty page could go on without end:
			// the API sends neither (docs/api.md "Paging").
			if next.IsZero() || (!before.IsZero() && !next.Before(before)) || len(rows) == 0 {
				var zero T
				yield(zero, fmt.Errorf("%w: a page of %d rows before %s names the next page before %s",
					ErrMalformedAnswer, len(rows), before.Format(time.RFC3339Nano), next.Format(time.RFC3339Nano)))
				return
			}
			before = *next
		}
	}
}
