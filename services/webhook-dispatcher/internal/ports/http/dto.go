package http

import (
	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/replay"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// toAPIWebhook is the public webhook object, without the secret.
func toAPIWebhook(w *webhook.Webhook) dispatcherapi.Webhook {
	return dispatcherapi.Webhook{
		ID:        w.ID,
		URL:       w.URL,
		Status:    string(w.Status),
		CreatedAt: httpx.Timestamp(w.CreatedAt),
		UpdatedAt: httpx.Timestamp(w.UpdatedAt),
	}
}

// toAPISaved is w with its secret, the answer of a save or re-save.
func toAPISaved(w *webhook.Webhook) dispatcherapi.SavedWebhook {
	return dispatcherapi.SavedWebhook{Webhook: toAPIWebhook(w), Secret: w.Secret}
}

// toAPIWebhookStatus is the webhook as operators see it, with the pause
// rule's state, without the secret.
func toAPIWebhookStatus(w *webhook.Webhook) dispatcherapi.WebhookStatus {
	return dispatcherapi.WebhookStatus{
		Webhook:             toAPIWebhook(w),
		ConsecutiveFailures: w.ConsecutiveFailures,
		PausedAt:            httpx.OptionalTimestamp(w.PausedAt),
	}
}

// toAPIDelivery is the public delivery object: every field always present,
// null where it does not apply (no response, no error, not delivered).
func toAPIDelivery(d *delivery.Delivery) dispatcherapi.Delivery {
	return dispatcherapi.Delivery{
		ID:             d.ID,
		Event:          d.Event,
		Payload:        string(d.Payload),
		Status:         string(d.Status),
		Attempts:       d.Attempts,
		ResponseStatus: d.ResponseStatus,
		LastError:      d.LastError,
		DeliveredAt:    httpx.OptionalTimestamp(d.DeliveredAt),
		CreatedAt:      httpx.Timestamp(d.CreatedAt),
	}
}

// toAPIDeliveryDetail is a delivery with every attempt, oldest first, as
// attempt_history stores them.
func toAPIDeliveryDetail(d *delivery.Delivery) dispatcherapi.DeliveryDetail {
	out := dispatcherapi.DeliveryDetail{Delivery: toAPIDelivery(d), AttemptHistory: make([]dispatcherapi.Attempt, 0, len(d.History))}
	for _, a := range d.History {
		out.AttemptHistory = append(out.AttemptHistory, dispatcherapi.Attempt{
			Number:         a.Number,
			StartedAt:      httpx.Timestamp(a.StartedAt),
			DurationMS:     a.DurationMS(),
			ResponseStatus: a.OptionalStatus(),
			Error:          a.OptionalError(),
		})
	}
	return out
}

// toAPIReplay is what a replay queued, and where it goes on when one call
// could not queue it whole.
func toAPIReplay(out *replay.Replay) dispatcherapi.ReplayResponse {
	resp := dispatcherapi.ReplayResponse{Replay: dispatcherapi.Replay{
		ID:          out.ID,
		WorkspaceID: out.WorkspaceID,
		Since:       httpx.Timestamp(out.Since),
		Until:       httpx.OptionalTimestamp(out.Until),
		Queued:      out.Queued,
	}}
	if out.Event != "" {
		resp.Replay.Event = &out.Event
	}
	if out.DeliveryID != "" {
		resp.Replay.DeliveryID = &out.DeliveryID
	}
	if out.Next != nil {
		resp.Next = &dispatcherapi.ReplayCursor{ReplayID: out.Next.ReplayID, FromSeq: out.Next.From, EndSeq: out.Next.End}
	}
	return resp
}
