package app

import (
	"context"
	"errors"
	"fmt"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/envelope"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/replay"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// DeliverEvent delivers one customer event to its workspace's webhook and
// records the outcome:
//
//   - no webhook: nothing is sent or recorded;
//   - paused webhook: the delivery is recorded as skipped, not sent;
//   - active webhook: the envelope is rendered once and sent with
//     retries; the outcome and the webhook's failure count are stored
//     together (enough consecutive failures pause the webhook).
//
// An event the stream hands out for the first time is sent before anything
// is written: a delivery settled within Policy.PendingAfter is written
// once, with its outcome; a longer one is written pending on the way (see
// round). A redelivered event (redelivered set: an earlier round may have
// sent it, and recorded it or not) is read first, by its delivery id,
// which is the event id: settled, it is not sent again; still pending (an
// earlier round never finished), it gets a new round with the stored body
// byte for byte; not stored (the earlier round died between its POST and
// its write), it is sent again under the same id, as at-least-once allows.
//
// DeliverEvent returns nil once the event is settled and may be
// acknowledged; an error wrapping delivery.ErrMalformedEvent when it can
// never be delivered; any other error (ctx ended, storage failed) when it
// must be handled again later. keepAlive, when set, is called before each
// attempt and every Policy.KeepAliveEvery while an attempt waits for its
// place.
func (a *App) DeliverEvent(ctx context.Context, ev *eventsv1.Event, redelivered bool, keepAlive func()) error {
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
	switch {
	case !hook.Active():
		return a.skip(ctx, d)
	case !redelivered:
		return a.deliverRound(ctx, a.live, hook, a.newRound(d), keepAlive)
	}
	d, _, err = a.deliveries.Create(ctx, d)
	if err != nil {
		return fmt.Errorf("record delivery %s: %w", ev.GetId(), err)
	}
	if d.WorkspaceID != ev.GetWorkspaceId() {
		return replay.ForeignError(d.ID)
	}
	if d.Status.Final() {
		// Settled by an earlier delivery of the same message.
		return nil
	}
	return a.deliverRound(ctx, a.live, hook, storedRound(d), keepAlive)
}

// skip records d, whose webhook is paused, as skipped, not sent: a new row
// in one write; a stored pending one (a round that never finished) becomes
// skipped; a settled one is left as it is.
func (a *App) skip(ctx context.Context, d *delivery.Delivery) error {
	d.Skip()
	existing, err := a.deliveries.Insert(ctx, d, nil)
	if err != nil {
		return fmt.Errorf("record delivery %s: %w", d.ID, err)
	}
	if existing == nil {
		a.obs.DeliveryFinished(d.Event, d.Status)
		a.obs.DeliverySkipped(d)
		return nil
	}
	if existing.WorkspaceID != d.WorkspaceID {
		return replay.ForeignError(d.ID)
	}
	if existing.Status.Final() {
		return nil
	}
	existing.Skip()
	return a.finish(ctx, storedRound(existing), nil)
}
