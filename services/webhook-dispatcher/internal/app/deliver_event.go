package app

import (
	"context"
	"errors"
	"fmt"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/envelope"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// DeliverEvent delivers one customer event to its workspace's webhook and
// records the outcome:
//
//   - no webhook: nothing is sent or recorded;
//   - paused webhook: the delivery is recorded as skipped, not sent;
//   - active webhook: the envelope is rendered once and stored, then sent
//     with retries; the outcome and the webhook's failure count are stored
//     together (enough consecutive failures pause the webhook).
//
// The delivery id is the event id, so a redelivered event finds its row:
// settled, it is not sent again; still pending (an earlier round never
// finished), it gets a new round with the stored body byte for byte.
//
// DeliverEvent returns nil once the event is settled and may be
// acknowledged; an error wrapping delivery.ErrMalformedEvent when it can
// never be delivered; any other error (ctx ended, storage failed) when it
// must be handled again later. keepAlive, when set, is called before each
// attempt and every Policy.KeepAliveEvery while an attempt waits for its
// place.
func (a *App) DeliverEvent(ctx context.Context, ev *eventsv1.Event, keepAlive func()) error {
	// The delivery is created when the event is taken on, before any
	// wait: the webhook lookup is shared with other events (a group
	// read), so reading the clock after it would order events that
	// arrive together at random, and the log's newest-first order would
	// not follow their arrival.
	now := a.now()
	payload, err := envelope.Render(ev)
	if err != nil {
		return err
	}
	hook, err := a.webhooks.Get(ctx, ev.GetWorkspaceId())
	if errors.Is(err, webhook.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load webhook of %s: %w", ev.GetWorkspaceId(), err)
	}

	d := delivery.New(ev.GetId(), ev.GetWorkspaceId(), ev.GetType(), payload, now)
	if !hook.Active() {
		d = delivery.NewSkipped(ev.GetId(), ev.GetWorkspaceId(), ev.GetType(), payload, now)
	}
	d, created, err := a.deliveries.Create(ctx, d)
	if err != nil {
		return fmt.Errorf("record delivery %s: %w", ev.GetId(), err)
	}
	if d.WorkspaceID != ev.GetWorkspaceId() {
		return fmt.Errorf("%w: id %s already names a delivery of another workspace", delivery.ErrMalformedEvent, d.ID)
	}
	switch {
	case d.Status.Final() && created:
		// Recorded as skipped: the webhook is paused.
		a.obs.DeliveryFinished(d.Event, d.Status)
		a.obs.DeliverySkipped(d)
		return nil
	case d.Status.Final():
		// Settled by an earlier delivery of the same message.
		return nil
	case !hook.Active():
		// A round that never finished, and the webhook paused since.
		d.Skip()
		return a.finish(ctx, d, nil)
	}

	return a.deliverRound(ctx, a.live, hook, d, keepAlive)
}
