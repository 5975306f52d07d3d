package app

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/envelope"
)

// SendTestEvent delivers a test event to the workspace's webhook now, in
// one attempt, and returns the recorded delivery (POST /v1/webhook/test).
// It is the dashboard's button check: it is not retried, it does not count
// towards pausing (nor does a success clear the count), and it is sent even
// to a paused webhook so a developer can check the receiver before saving
// again. It appears in the delivery log like any delivery. It is sent at
// once, outside the webhook's places and circuit (a developer checking
// a receiver wants its answer now, not a refusal learnt from earlier
// attempts), and its outcome does not move the circuit.
func (a *App) SendTestEvent(ctx context.Context, workspaceID string) (*delivery.Delivery, error) {
	hook, err := a.webhooks.Get(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	now := a.now()
	// A UUIDv7, as event ids are: the log's purge finds old deliveries by
	// their ids' order.
	id := uuid.Must(uuid.NewV7()).String()
	payload, err := envelope.RenderTest(id, workspaceID, now)
	if err != nil {
		return nil, err
	}
	// Written once, with the outcome, unless the attempt runs long enough
	// for the log to show it pending first.
	r := a.newRound(delivery.New(id, workspaceID, delivery.EventTest, payload, now))
	// A cancelled request still gets its one attempt recorded, as failed.
	_ = a.attempt(ctx, nil, hook, r, 1, nil)
	if err := a.finish(ctx, r, nil); err != nil {
		return nil, fmt.Errorf("record test delivery: %w", err)
	}
	return r.d, nil
}
