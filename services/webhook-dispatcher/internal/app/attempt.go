package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// storeTimeout bounds writing an outcome. Outcomes are written on a context
// that shutdown does not cancel: once the receiver has answered, recording
// it beats sending the event again after a restart.
const storeTimeout = 10 * time.Second

// attempt sends d to hook up to maxAttempts times, waiting the configured delays
// between attempts, and records every attempt in d. keepAlive, when set, is
// called before each attempt (the consumer extends its ack deadline). The
// attempts so far are stored after each failure that will be retried, so
// the log shows a pending delivery's progress. attempt returns early when
// an attempt succeeds, and with ctx's error when ctx ends first (between
// attempts, or with an attempt that failed).
func (a *App) attempt(ctx context.Context, hook *webhook.Webhook, d *delivery.Delivery, maxAttempts int, keepAlive func()) error {
	for i := 0; i < maxAttempts; i++ {
		if i > 0 {
			if err := sleep(ctx, a.cfg.RetryDelays[i-1]); err != nil {
				return err
			}
		}
		if keepAlive != nil {
			keepAlive()
		}
		at := a.attemptOnce(ctx, hook, d)
		d.Record(at)
		a.obs.AttemptFinished(at)
		a.logAttempt(d, at)
		if at.Succeeded() {
			return nil
		}
		if i < maxAttempts-1 || ctx.Err() != nil {
			a.progress(ctx, d)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// progress stores the attempts so far, also when ctx has ended (so a
// redelivery continues the numbering). A failure only leaves the log's
// in-between view behind: the outcome is stored at the end anyway.
func (a *App) progress(ctx context.Context, d *delivery.Delivery) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := a.deliveries.Progress(sctx, d); err != nil {
		a.log.Warn("store delivery progress", zap.String("delivery_id", d.ID), zap.Error(err))
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

func (a *App) logAttempt(d *delivery.Delivery, at delivery.Attempt) {
	fields := []zap.Field{
		zap.String("delivery_id", d.ID),
		zap.String("workspace_id", d.WorkspaceID),
		zap.String("event", d.Event),
		zap.Int("attempt", at.Number),
		zap.Int("status", at.ResponseStatus),
		zap.Duration("duration", at.Duration),
	}
	if at.Succeeded() {
		a.log.Info("webhook attempt delivered", fields...)
		return
	}
	a.log.Info("webhook attempt failed", append(fields, zap.String("error", at.Error))...)
}

// finish stores d's outcome on a context shutdown does not cancel.
// deliverRound sends d with the full retry schedule, then stores the outcome
// and, in the same transaction, counts it towards the webhook's pause —
// unless the webhook was saved again since the round began, when the
// outcome belongs to the old setup and must not count. Live deliveries and
// replays settle the same way.
func (a *App) deliverRound(ctx context.Context, hook *webhook.Webhook, d *delivery.Delivery, keepAlive func()) error {
	if err := a.attempt(ctx, hook, d, a.cfg.MaxAttempts(), keepAlive); err != nil {
		return err
	}
	d.Finish()
	delivered := d.Status == delivery.StatusDelivered
	now := a.now()
	paused := false
	err := a.finish(ctx, d, func(w *webhook.Webhook) bool {
		if w.ID != hook.ID || w.Secret != hook.Secret {
			return false
		}
		var changed bool
		changed, paused = w.RecordDelivery(delivered, a.cfg.PauseAfter, now)
		return changed
	})
	if err != nil {
		return err
	}
	if paused {
		a.log.Warn("webhook paused after consecutive failures",
			zap.String("workspace_id", d.WorkspaceID), zap.Int("pause_after", a.cfg.PauseAfter))
	}
	return nil
}

func (a *App) finish(ctx context.Context, d *delivery.Delivery, count func(*webhook.Webhook) bool) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := a.deliveries.Finish(sctx, d, count); err != nil {
		return fmt.Errorf("store outcome of delivery %s: %w", d.ID, err)
	}
	a.obs.DeliveryFinished(d.Event, d.Status)
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
