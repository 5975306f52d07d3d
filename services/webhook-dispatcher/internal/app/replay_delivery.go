package app

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/envelope"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/replay"
)

// ReplayDelivery queues the event of one delivery of the workspace's log
// for delivery again, under its original id, and nothing else: the stream
// is read in the window around the delivery (replay.DeliveryScan) and only
// the event with the delivery's id is queued. It is delivered as
// ReplayEvent delivers any replayed event.
//
// Errors: delivery.ErrNotFound for a delivery the log does not hold (or
// another workspace's); replay.ErrTestEventNotReplayable for a test
// event's; webhook.ErrNotFound and replay.ErrWebhookPaused as StartReplay;
// replay.ErrEventNotInStream when the stream no longer holds the event.
func (r *Replays) ReplayDelivery(ctx context.Context, workspaceID, deliveryID string) (*replay.Replay, error) {
	d, err := r.app.deliveries.Get(ctx, workspaceID, deliveryID)
	if err != nil {
		return nil, err
	}
	madeAt, err := envelope.CreatedAt(d.Payload)
	if err != nil {
		madeAt = d.CreatedAt // a body without its time: the log's alone
	}
	scan, err := replay.DeliveryScan(d, madeAt)
	if err != nil {
		return nil, err
	}
	if err := r.requireActiveWebhook(ctx, workspaceID); err != nil {
		return nil, err
	}
	if scan.End, err = r.source.LastSeq(ctx); err != nil {
		return nil, err
	}

	out := &replay.Replay{ID: uuid.NewString(), Request: scan.Request, DeliveryID: d.ID}
	var found *replay.Event
	// An empty stream (End 0) yields nothing: Events never reads past End.
	for ev, err := range r.source.Events(ctx, scan) {
		if err != nil {
			return nil, fmt.Errorf("read events for replay %s: %w", out.ID, err)
		}
		if ev.Is(d.ID) {
			found = &ev
			break
		}
	}
	if found == nil {
		return nil, replay.ErrEventNotInStream
	}
	if err := r.queue.Put(ctx, out.ID, workspaceID, []replay.Event{*found}); err != nil {
		return nil, fmt.Errorf("queue replay %s: %w", out.ID, err)
	}
	out.Queued = 1
	r.app.obs.DeliveryReplayQueued(out, found.Seq)
	return out, nil
}
