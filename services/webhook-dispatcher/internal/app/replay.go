package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/envelope"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/replay"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// ReplayLimits bound the work of one StartReplay call, so that it always
// answers well within an rpc call's timeout; a replay with more events is
// continued by further calls (replay.Replay.Next).
type ReplayLimits struct {
	// MaxPerCall is the most events one call queues.
	MaxPerCall int
	// Budget is how long one call keeps queueing; it always queues at
	// least one event.
	Budget time.Duration
}

// DefaultReplayLimits queue up to 100,000 events or 10 seconds' worth
// per call, well inside the 25-second rpc handler timeout.
var DefaultReplayLimits = ReplayLimits{MaxPerCall: 100_000, Budget: 10 * time.Second}

// putBatch is how many replay requests are queued (and confirmed by the
// stream) together.
const putBatch = 256

// busyMargin is added to the longest gap between two writes of a delivery
// round in progress; a pending delivery not written for longer is taken to
// be abandoned (its round's process died) and a replay takes it over.
const busyMargin = 15 * time.Second

// Replays runs SRE replays: StartReplay queues the events a request selects
// and ReplayEvent delivers one queued event. Deliveries go through the
// same attempt and record path as live events, the same per-webhook
// places and the same circuits, in a lane of their own.
type Replays struct {
	app        *App
	cfg        ReplayLimits
	source     replay.Source
	queue      replay.Queue
	deliveries replay.Deliveries
}

// ReplaysDeps are what the replay use cases work with.
type ReplaysDeps struct {
	// App is the delivery use cases replays share their stores, policy,
	// places, circuits and observer with.
	App *App
	// Limits bound one StartReplay call; a zero field is
	// DefaultReplayLimits'.
	Limits ReplayLimits
	// Source reads the event stream, Queue is the replay work queue,
	// Deliveries records replayed deliveries.
	Source     replay.Source
	Queue      replay.Queue
	Deliveries replay.Deliveries
}

// NewReplays returns the replay use cases over deps.
func NewReplays(deps ReplaysDeps) *Replays {
	cfg := deps.Limits
	if cfg.MaxPerCall < 1 {
		cfg.MaxPerCall = DefaultReplayLimits.MaxPerCall
	}
	if cfg.Budget <= 0 {
		cfg.Budget = DefaultReplayLimits.Budget
	}
	return &Replays{app: deps.App, cfg: cfg, source: deps.Source, queue: deps.Queue, deliveries: deps.Deliveries}
}

// StartReplay queues one replay request per event that req selects, up to
// the stream's last sequence when the replay started, and returns what it
// queued. resume, when not nil, continues an earlier call's replay (its
// Next). The workspace's webhook must exist (webhook.ErrNotFound) and be
// active (replay.ErrWebhookPaused); an invalid request is a
// *replay.FieldError.
//
// Queued requests are delivered by every dispatcher instance
// (ReplayEvent), with retries, whether or not the caller is still there.
// When queueing fails midway, what was queued is still delivered; running
// the replay again sends those events once more, under the same delivery
// ids, which receivers deduplicate.
func (r *Replays) StartReplay(ctx context.Context, req replay.Request, resume *replay.Cursor) (*replay.Replay, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := r.requireActiveWebhook(ctx, req.WorkspaceID); err != nil {
		return nil, err
	}

	out := &replay.Replay{Request: req}
	scan := replay.Scan{Request: req}
	if resume != nil {
		out.ID, scan.From, scan.End = resume.ReplayID, resume.From, resume.End
	} else {
		out.ID = uuid.NewString()
		var err error
		if scan.End, err = r.source.LastSeq(ctx); err != nil {
			return nil, err
		}
	}
	if scan.End == 0 || scan.From > scan.End {
		return out, nil
	}

	deadline := time.Now().Add(r.cfg.Budget)
	batch := make([]replay.Event, 0, putBatch)
	put := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := r.queue.Put(ctx, out.ID, req.WorkspaceID, batch); err != nil {
			return fmt.Errorf("queue replay %s: %w", out.ID, err)
		}
		out.Queued += len(batch)
		batch = batch[:0]
		return nil
	}
	for ev, err := range r.source.Events(ctx, scan) {
		if err != nil {
			return nil, fmt.Errorf("read events for replay %s: %w", out.ID, err)
		}
		if n := out.Queued + len(batch); n > 0 && (n >= r.cfg.MaxPerCall || time.Now().After(deadline)) {
			out.Next = &replay.Cursor{ReplayID: out.ID, From: ev.Seq, End: scan.End}
			break
		}
		batch = append(batch, ev)
		if len(batch) == putBatch {
			if err := put(); err != nil {
				return nil, err
			}
		}
	}
	if err := put(); err != nil {
		return nil, err
	}
	r.app.obs.ReplayQueued(out)
	return out, nil
}

// requireActiveWebhook is what any replay asks first: that the workspace
// has a webhook (webhook.ErrNotFound) and that it is active
// (replay.ErrWebhookPaused), since a paused one would only record the
// events as skipped again.
func (r *Replays) requireActiveWebhook(ctx context.Context, workspaceID string) error {
	hook, err := r.app.webhooks.Get(ctx, workspaceID)
	if err != nil {
		return err
	}
	if !hook.Active() {
		return replay.ErrWebhookPaused
	}
	return nil
}

// ReplayEvent delivers one queued replay of ev to the workspace's webhook
// as it is now (its URL, its current secret, a fresh timestamp per
// attempt), under the original delivery id, with the full retry schedule.
// The attempts are appended to the delivery's history and its status,
// attempts, response_status, last_error and delivered_at follow them; the
// body is the one stored when the delivery was first recorded (rendered
// now when there is none). Outcomes count towards pausing like any
// delivery.
//
// A workspace without a webhook has nothing to replay to: the request is
// dropped. A webhook paused since the replay was queued is not sent to: an
// event never recorded is recorded as skipped, a recorded one is left as
// it is. A delivery under way elsewhere gives replay.ErrBusy (try later).
// Errors mean what DeliverEvent's mean.
func (r *Replays) ReplayEvent(ctx context.Context, ev *eventsv1.Event, keepAlive func()) error {
	a := r.app
	// Read before the shared webhook lookup, as DeliverEvent does, so
	// replayed events picked up together keep their order in the log.
	pickedUp := a.now()
	payload, err := envelope.Render(ev)
	if err != nil {
		return err
	}
	hook, err := a.webhooks.Get(ctx, ev.GetWorkspaceId())
	if errors.Is(err, webhook.ErrNotFound) {
		a.obs.ReplayDropped(ev.GetId(), ev.GetWorkspaceId())
		return nil
	}
	if err != nil {
		return fmt.Errorf("load webhook of %s: %w", ev.GetWorkspaceId(), err)
	}
	d := delivery.New(ev.GetId(), ev.GetWorkspaceId(), ev.GetType(), payload, pickedUp)
	if !hook.Active() {
		d.Skip()
		if err := r.deliveries.CreateSkipped(ctx, d); err != nil {
			return fmt.Errorf("record delivery %s: %w", d.ID, err)
		}
		a.obs.ReplayNotSent(d)
		return nil
	}
	d, err = r.deliveries.Claim(ctx, d, r.busyFor())
	if err != nil {
		return fmt.Errorf("claim delivery %s: %w", ev.GetId(), err)
	}

	return a.deliverRound(ctx, a.replay, hook, storedRound(d), keepAlive)
}

// busyFor is the longest a round in progress goes without writing its
// delivery, and a margin: attempts the circuit refuses are stored with
// the round's next write (see attempt), so it may wait out every delay
// and then one attempt sent.
func (r *Replays) busyFor() time.Duration {
	var delays time.Duration
	for _, d := range r.app.cfg.RetryDelays {
		delays += d
	}
	return r.app.cfg.AttemptTimeout + delays + busyMargin
}
