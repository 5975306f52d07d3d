package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/isolation"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// storeTimeout bounds writing an outcome. Outcomes are written on a context
// that shutdown does not cancel: once the receiver has answered, recording
// it beats sending the event again after a restart.
const storeTimeout = 10 * time.Second

// attempt sends r's delivery to hook up to maxAttempts times, waiting the
// configured delays between attempts, and records every attempt in it.
// Each attempt takes its place in lane first (see try); a nil lane sends
// at once, past the places and the circuit (the test button). keepAlive,
// when set, is called before each attempt and while an attempt waits for
// its place (the consumer extends its ack deadline). The attempts so far
// are stored after each failed attempt sent that will be retried, so the
// log shows a pending delivery's progress; a round still under way after
// Policy.PendingAfter (its first attempt in flight or waiting for a
// place, or its attempts refused by an open circuit) is shown pending by
// r's early write. An attempt the circuit refuses is recorded in r only,
// and stored with the round's next write (the next attempt sent, or the
// outcome): a hanging receiver's circuit refuses every delivery waiting
// for it at once, and a write each would make bursts of them
// (docs/benchmarks.md "Hanging webhooks' writes"). attempt returns
// early when an attempt succeeds, and with ctx's error when ctx ends first
// (between attempts, waiting for a place, or with an attempt that failed),
// having stored the attempts so far.
func (a *App) attempt(ctx context.Context, lane *isolation.Lane, hook *webhook.Webhook, r *round, maxAttempts int, keepAlive func()) error {
	for i := 0; i < maxAttempts; i++ {
		if i > 0 {
			// The wait between attempts holds no place: only in-hand.
			if err := sleep(ctx, a.cfg.RetryDelays[i-1]); err != nil {
				a.storeRefused(ctx, r)
				return err
			}
		}
		at, sent, err := a.try(ctx, lane, hook, r.d, keepAlive)
		if err != nil {
			a.storeRefused(ctx, r)
			return err
		}
		if sent {
			if err := a.endEarlyWrite(r); err != nil {
				return err
			}
		}
		// The early write may have found earlier attempts; one still to
		// end renumbers this one when it does (carryOn).
		at.Number = r.d.NextAttempt()
		r.record(at)
		if at.Succeeded() {
			return nil
		}
		r.refused = !sent
		if (sent && i < maxAttempts-1) || ctx.Err() != nil {
			a.progress(ctx, r)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// try makes d's next attempt: it asks hook's circuit, waits for a place
// of the webhook's and then a slot of lane, asks the circuit again (the
// circuit may have opened meanwhile, and a half-open one gives its one
// probe only now, to an attempt about to be sent), sends, and tells the
// circuit whether the receiver answered. An attempt the circuit refuses
// is not sent and comes back failed, with duration 0 and the refusal as
// its error, so the retry schedule and the pause rule go on as if the
// receiver had not answered, minus the wait; the bool says whether the
// attempt was sent. try fails only when ctx ends while it waits for a
// place; nothing is sent then.
func (a *App) try(ctx context.Context, lane *isolation.Lane, hook *webhook.Webhook, d *delivery.Delivery, keepAlive func()) (delivery.Attempt, bool, error) {
	if lane == nil {
		if keepAlive != nil {
			keepAlive()
		}
		at := a.attemptOnce(ctx, hook, d)
		a.obs.AttemptSent(d, at)
		return at, true, nil
	}
	key := circuitKey(hook)
	if refused := a.circuits.Check(key); refused != nil {
		return a.notSent(d, refused), false, nil
	}
	if keepAlive != nil {
		keepAlive()
	}
	release, err := lane.Acquire(ctx, hook.ID, isolation.KeepAlive{Func: keepAlive, Every: a.cfg.KeepAliveEvery()})
	if err != nil {
		return delivery.Attempt{}, false, err
	}
	defer release()
	permit, refused := a.circuits.Allow(key)
	if refused != nil {
		return a.notSent(d, refused), false, nil
	}
	at := a.attemptOnce(ctx, hook, d)
	a.obs.AttemptSent(d, at)
	// A status means the receiver answered, whatever it said; none means
	// a timeout or a transport error.
	if a.circuits.Record(key, permit, at.ResponseStatus != 0, at.Error) {
		a.obs.CircuitOpened(CircuitOpening{
			WorkspaceID: d.WorkspaceID, WebhookID: hook.ID,
			Probe: permit.Probe(), LastError: at.Error, CoolDown: a.cfg.Circuit.CoolDown,
		})
	}
	return at, true, nil
}

// circuitKey names the setup of hook a circuit belongs to. Every save
// issues a new secret, so a webhook saved again (maybe with a new URL)
// starts with a closed circuit, while the old setup's rounds still under
// way (deliverRound compares the same two fields) settle on the old one.
func circuitKey(hook *webhook.Webhook) string { return hook.ID + "\x00" + hook.Secret }

// notSent is d's next attempt, refused by an open circuit.
func (a *App) notSent(d *delivery.Delivery, refused *isolation.OpenError) delivery.Attempt {
	at := delivery.Attempt{Number: d.NextAttempt(), StartedAt: a.now(), Error: refused.Error()}
	a.obs.AttemptNotSent(d, at)
	return at
}

// progress stores the attempts so far, also when ctx has ended (so a
// redelivery continues the numbering). A failure only leaves the log's
// in-between view behind: the outcome is stored at the end anyway.
func (a *App) progress(ctx context.Context, r *round) {
	r.refused = false
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := a.save(sctx, r, nil); err != nil {
		a.obs.ProgressNotStored(r.d, err)
	}
}

// storeRefused stores the attempts so far when the last of them was
// refused by the circuit and is not stored yet: a round that ends
// without its outcome (shutdown) leaves the log what it did.
func (a *App) storeRefused(ctx context.Context, r *round) {
	if r.refused {
		a.progress(ctx, r)
	}
}

// attemptOnce makes one signed POST, cut at the attempt timeout. An
// attempt under way is not cut short by ctx (shutdown): it finishes within
// the timeout and its answer is recorded, rather than leaving the receiver
// with a request whose outcome nobody knows.
func (a *App) attemptOnce(ctx context.Context, hook *webhook.Webhook, d *delivery.Delivery) delivery.Attempt {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.AttemptTimeout)
	defer cancel()
	started := a.now()
	t0 := time.Now()
	res := a.sender.Send(actx, delivery.Request{
		URL:        hook.URL,
		Secret:     hook.Secret,
		Event:      d.Event,
		DeliveryID: d.ID,
		Body:       d.Payload,
	})
	at := delivery.Attempt{
		Number:         d.NextAttempt(),
		StartedAt:      started,
		Duration:       time.Since(t0),
		ResponseStatus: res.Status,
		Error:          res.Error,
	}
	switch {
	case errors.Is(actx.Err(), context.DeadlineExceeded) && !at.Succeeded():
		at.Error = fmt.Sprintf("no complete response within %s", a.cfg.AttemptTimeout)
	case at.Error == "" && !at.Succeeded():
		at.Error = fmt.Sprintf("receiver answered %d", res.Status)
	}
	return at
}

// deliverRound sends r's delivery with the full retry schedule, then stores
// the outcome and, in the same transaction, counts it towards the webhook's
// pause — unless the webhook was saved again since the round began, when
// the outcome belongs to the old setup and must not count. Live deliveries
// and replays settle the same way, each taking places in its own lane.
func (a *App) deliverRound(ctx context.Context, lane *isolation.Lane, hook *webhook.Webhook, r *round, keepAlive func()) error {
	if err := a.attempt(ctx, lane, hook, r, a.cfg.MaxAttempts(), keepAlive); err != nil {
		a.stopEarlyWrite(r)
		return err
	}
	now := a.now()
	paused := false
	err := a.finish(ctx, r, func(w *webhook.Webhook) bool {
		if w.ID != hook.ID || w.Secret != hook.Secret {
			return false
		}
		var changed bool
		changed, paused = w.RecordDelivery(r.d.Status == delivery.StatusDelivered, a.cfg.PauseAfter, now)
		return changed
	})
	if err != nil {
		return err
	}
	if paused {
		a.obs.WebhookPaused(r.d.WorkspaceID, a.cfg.PauseAfter)
	}
	return nil
}

// finish sets r's outcome from its attempts (a skipped delivery keeps its
// status) and stores it on a context shutdown does not cancel.
func (a *App) finish(ctx context.Context, r *round, count func(*webhook.Webhook) bool) error {
	if r.d.Status != delivery.StatusSkipped {
		r.d.Finish()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := a.save(sctx, r, count); err != nil {
		return fmt.Errorf("store outcome of delivery %s: %w", r.d.ID, err)
	}
	a.obs.DeliveryFinished(r.d.Event, r.d.Status)
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
