package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/pkg/adminclient"
	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
	"github.com/parleyhq/parley/services/console/internal/domain/operator"
)

// Webhooks reaches a workspace's webhook, its delivery log and replays in
// the webhook dispatcher; *adminclient.Client implements it.
type Webhooks interface {
	WebhookStatus(ctx context.Context, workspaceID string) (dispatcherapi.WebhookStatus, error)
	SaveWebhook(ctx context.Context, workspaceID, webhookURL string) (dispatcherapi.SavedWebhook, error)
	SendTestEvent(ctx context.Context, workspaceID string) (dispatcherapi.Delivery, error)
	ResaveWebhook(ctx context.Context, workspaceID string) (dispatcherapi.SavedWebhook, error)
	ListDeliveries(ctx context.Context, workspaceID string, f adminclient.DeliveryFilter) (dispatcherapi.DeliveryPage, error)
	GetDelivery(ctx context.Context, workspaceID, deliveryID string) (dispatcherapi.DeliveryDetail, error)
	Replay(ctx context.Context, r dispatcherapi.ReplayRequest) (dispatcherapi.Replay, error)
}

// ErrDeliveryNotFound is a delivery the workspace's log does not hold (any
// more: the log is purged after its retention).
var ErrDeliveryNotFound = errors.New("no such delivery in the log")

// WebhookState is a workspace's webhook as the webhook page shows it.
type WebhookState struct {
	// Webhook is nil when none is saved.
	Webhook *dispatcherapi.WebhookStatus
	// LastFailure is the newest failed customer delivery of a paused
	// webhook, the reason it paused; nil when the log no longer has one.
	LastFailure *dispatcherapi.Delivery
}

// Paused reports whether the webhook is saved and paused.
func (s WebhookState) Paused() bool {
	return s.Webhook != nil && s.Webhook.Status == webhookPaused
}

const (
	webhookPaused = "paused"
	codeNoWebhook = "webhook_not_found"
	// codeNoDelivery is the dispatcher's answer for a delivery its log
	// does not hold.
	codeNoDelivery = "delivery_not_found"
	// failuresScanned bounds how many failed deliveries the page reads
	// looking for the newest one that was not a test event.
	failuresScanned = 20
)

// Webhook returns the workspace's webhook and, when it is paused, why.
func (a *App) Webhook(ctx context.Context, op operator.Operator, workspaceID string) (WebhookState, error) {
	if err := visible(op, workspaceID); err != nil {
		return WebhookState{}, err
	}
	w, err := a.webhooks.WebhookStatus(ctx, workspaceID)
	if e, ok := adminclient.AsError(err); ok && e.Code == codeNoWebhook {
		return WebhookState{}, nil
	}
	if err != nil {
		return WebhookState{}, fmt.Errorf("get webhook of %s: %w", workspaceID, err)
	}
	state := WebhookState{Webhook: &w}
	if !state.Paused() {
		return state, nil
	}
	// Test events neither pause nor count, so the reason is the newest
	// failed customer event.
	page, err := a.webhooks.ListDeliveries(ctx, workspaceID, adminclient.DeliveryFilter{Status: dispatcherapi.DeliveryFailed, Limit: failuresScanned})
	if err != nil {
		return WebhookState{}, fmt.Errorf("read failed deliveries of %s: %w", workspaceID, err)
	}
	for _, d := range page.Deliveries {
		if d.Event != dispatcherapi.EventTest {
			state.LastFailure = &d
			break
		}
	}
	return state, nil
}

// SaveWebhook saves the workspace's webhook URL; the answer carries the new
// secret, shown once. Every save issues a new secret, so formID, the save
// form's, makes a post of it again save nothing (once): a secret shown is
// never replaced behind the operator's back.
func (a *App) SaveWebhook(ctx context.Context, op operator.Operator, workspaceID, formID, webhookURL string) (dispatcherapi.SavedWebhook, error) {
	if err := visible(op, workspaceID); err != nil {
		return dispatcherapi.SavedWebhook{}, err
	}
	return once(ctx, a, workspaceID, formID, FormSaveWebhook, webhookURL, func() (dispatcherapi.SavedWebhook, error) {
		return written(a.webhooks.SaveWebhook(ctx, workspaceID, webhookURL))
	}, func(s dispatcherapi.SavedWebhook) string { return s.Webhook.ID })
}

// TestResult is a test event's delivery and how long the console waited
// for it: the one attempt, its signing and recording, and the call.
type TestResult struct {
	Delivery dispatcherapi.Delivery
	Took     time.Duration
}

// SendTestEvent sends a test event to the workspace's webhook and returns
// how its one attempt ended. formID is the test form's: posted again, it
// sends nothing (once), and the repeat names the test's delivery.
func (a *App) SendTestEvent(ctx context.Context, op operator.Operator, workspaceID, formID string) (TestResult, error) {
	if err := visible(op, workspaceID); err != nil {
		return TestResult{}, err
	}
	return once(ctx, a, workspaceID, formID, FormTestEvent, nil, func() (TestResult, error) {
		start := a.now()
		d, err := written(a.webhooks.SendTestEvent(ctx, workspaceID))
		if err != nil {
			return TestResult{}, err
		}
		return TestResult{Delivery: d, Took: a.now().Sub(start)}, nil
	}, func(r TestResult) string { return r.Delivery.ID })
}

// Resaved is an operator's re-save: the webhook with its new secret and,
// when it had been paused, the period its events were skipped, which the
// page offers to replay.
type Resaved struct {
	Saved dispatcherapi.SavedWebhook
	// PausedAt and ResumedAt bound the skipped period; PausedAt is empty
	// when the webhook was not paused.
	PausedAt  string
	ResumedAt string
}

// ResaveWebhook saves the workspace's webhook again as an operator: a new
// secret, and a paused webhook active again. The pause's time is read
// first, since the re-save moves it; with no webhook saved, the re-save
// itself answers so. formID is the re-save form's: posted again, it saves
// nothing (once), as SaveWebhook.
func (a *App) ResaveWebhook(ctx context.Context, op operator.Operator, workspaceID, formID string) (Resaved, error) {
	if err := visible(op, workspaceID); err != nil {
		return Resaved{}, err
	}
	return once(ctx, a, workspaceID, formID, FormResaveWebhook, nil, func() (Resaved, error) {
		return a.resaveWebhook(ctx, workspaceID)
	}, func(r Resaved) string { return r.Saved.Webhook.ID })
}

// resaveWebhook is ResaveWebhook's calls to the dispatcher. Only the
// re-save writes (written): the read before it failing frees the form.
func (a *App) resaveWebhook(ctx context.Context, workspaceID string) (Resaved, error) {
	before, err := a.webhooks.WebhookStatus(ctx, workspaceID)
	if e, ok := adminclient.AsError(err); err != nil && (!ok || e.Code != codeNoWebhook) {
		return Resaved{}, fmt.Errorf("get webhook of %s: %w", workspaceID, err)
	}
	saved, err := written(a.webhooks.ResaveWebhook(ctx, workspaceID))
	if err != nil {
		return Resaved{}, err
	}
	out := Resaved{Saved: saved}
	if before.Status == webhookPaused {
		if before.PausedAt != nil {
			out.PausedAt = *before.PausedAt
		}
		out.ResumedAt = saved.Webhook.UpdatedAt
	}
	return out, nil
}

// DeliveryQuery selects a page of the delivery log: Status and Event as
// the dispatcher filters them, deliveries created from From (inclusive)
// to To (exclusive), the page starting at Before (the older link's
// cursor). Zero fields do not filter.
type DeliveryQuery struct {
	Status string
	Event  string
	From   time.Time
	To     time.Time
	Before string
}

// DeliveryList is a page of the log and the cursor of the older page,
// empty on the last.
type DeliveryList struct {
	Deliveries []dispatcherapi.Delivery
	Older      string
}

// Deliveries returns a page of the workspace's delivery log. The
// dispatcher pages by a "before" cursor only, so To is the first page's
// cursor and From ends the walk: deliveries older than From are cut
// from the page and there is no older page.
func (a *App) Deliveries(ctx context.Context, op operator.Operator, workspaceID string, q DeliveryQuery) (DeliveryList, error) {
	if err := visible(op, workspaceID); err != nil {
		return DeliveryList{}, err
	}
	f := adminclient.DeliveryFilter{Status: q.Status, Event: q.Event, Before: q.Before}
	if f.Before == "" && !q.To.IsZero() {
		f.Before = q.To.UTC().Format(time.RFC3339Nano)
	}
	page, err := a.webhooks.ListDeliveries(ctx, workspaceID, f)
	if err != nil {
		return DeliveryList{}, err
	}
	out := DeliveryList{Deliveries: page.Deliveries}
	if page.NextBefore != nil {
		out.Older = *page.NextBefore
	}
	if q.From.IsZero() {
		return out, nil
	}
	for i, d := range page.Deliveries {
		created, err := time.Parse(time.RFC3339Nano, d.CreatedAt)
		if err == nil && created.Before(q.From) {
			out.Deliveries, out.Older = page.Deliveries[:i], ""
			break
		}
	}
	return out, nil
}

// Delivery returns one delivery of the workspace's log with its attempts;
// ErrDeliveryNotFound when the log does not hold it.
func (a *App) Delivery(ctx context.Context, op operator.Operator, workspaceID, id string) (dispatcherapi.DeliveryDetail, error) {
	if err := visible(op, workspaceID); err != nil {
		return dispatcherapi.DeliveryDetail{}, err
	}
	if !IsID(id) {
		return dispatcherapi.DeliveryDetail{}, ErrDeliveryNotFound // no delivery has such an id
	}
	d, err := a.webhooks.GetDelivery(ctx, workspaceID, id)
	if e, ok := adminclient.AsError(err); ok && e.Code == codeNoDelivery {
		return dispatcherapi.DeliveryDetail{}, ErrDeliveryNotFound
	}
	return d, err
}

// ReplayRange queues the workspace's events stored in [since, until) (until
// zero: up to the last), of kind event ("" for all), for delivery again.
// formID is the replay form's: posted again, it queues nothing (once).
func (a *App) ReplayRange(ctx context.Context, op operator.Operator, workspaceID, formID string, since, until time.Time, event string) (dispatcherapi.Replay, error) {
	if err := visible(op, workspaceID); err != nil {
		return dispatcherapi.Replay{}, err
	}
	req := dispatcherapi.ReplayRequest{WorkspaceID: workspaceID, Since: since.UTC().Format(time.RFC3339Nano)}
	if event != "" {
		req.Event = &event
	}
	if !until.IsZero() {
		req.Until = new(until.UTC().Format(time.RFC3339Nano))
	}
	return a.replay(ctx, formID, FormReplayRange, req)
}

// replay queues req once for form formID's action (once).
func (a *App) replay(ctx context.Context, formID, action string, req dispatcherapi.ReplayRequest) (dispatcherapi.Replay, error) {
	return once(ctx, a, req.WorkspaceID, formID, action, req, func() (dispatcherapi.Replay, error) {
		return written(a.webhooks.Replay(ctx, req))
	}, func(r dispatcherapi.Replay) string { return r.ID })
}

// ReplayDelivery queues one delivery's event, and only it, for delivery
// again under its id. The dispatcher refuses, in its words, a delivery the
// log does not hold, a test event's (never in the event stream) and one
// whose event the stream no longer keeps. formID is the replay form's:
// posted again, it queues nothing (once).
func (a *App) ReplayDelivery(ctx context.Context, op operator.Operator, workspaceID, formID, id string) (dispatcherapi.Replay, error) {
	if err := visible(op, workspaceID); err != nil {
		return dispatcherapi.Replay{}, err
	}
	if !IsID(id) {
		return dispatcherapi.Replay{}, ErrDeliveryNotFound
	}
	r, err := a.replay(ctx, formID, FormReplayDelivery, dispatcherapi.ReplayRequest{WorkspaceID: workspaceID, DeliveryID: &id})
	if e, ok := adminclient.AsError(err); ok && e.Code == codeNoDelivery {
		return dispatcherapi.Replay{}, ErrDeliveryNotFound
	}
	return r, err
}
