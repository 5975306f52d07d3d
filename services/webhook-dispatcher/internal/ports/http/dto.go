package http

import (
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// webhookDTO is the public webhook object. It never carries the secret.
type webhookDTO struct {
	ID        string `json:"id"`
	URL       string `json:"url"`
	Status    string `json:"status"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

func toWebhookDTO(w *webhook.Webhook) webhookDTO {
	return webhookDTO{
		ID:        w.ID,
		URL:       w.URL,
		Status:    string(w.Status),
		CreatedAt: httpx.Timestamp(w.CreatedAt),
		UpdatedAt: httpx.Timestamp(w.UpdatedAt),
	}
}

// adminWebhookDTO is the webhook as operators see it: the public object
// with the pause rule's state. It never carries the secret.
type adminWebhookDTO struct {
	ID                  string  `json:"id"`
	URL                 string  `json:"url"`
	Status              string  `json:"status"`
	ConsecutiveFailures int     `json:"consecutive_failures"`
	PausedAt            *string `json:"paused_at"`
	CreatedAt           string  `json:"created_at"`
	UpdatedAt           string  `json:"updated_at"`
}

func toAdminWebhookDTO(w *webhook.Webhook) adminWebhookDTO {
	pub := toWebhookDTO(w)
	return adminWebhookDTO{
		ID:                  pub.ID,
		URL:                 pub.URL,
		Status:              pub.Status,
		ConsecutiveFailures: w.ConsecutiveFailures,
		PausedAt:            httpx.OptionalTimestamp(w.PausedAt),
		CreatedAt:           pub.CreatedAt,
		UpdatedAt:           pub.UpdatedAt,
	}
}

// deliveryDTO is the specification's delivery object: every field always
// present, null where it does not apply (no response, no error, not
// delivered).
type deliveryDTO struct {
	ID             string  `json:"id"`
	Event          string  `json:"event"`
	Payload        string  `json:"payload"`
	Status         string  `json:"status"`
	Attempts       int     `json:"attempts"`
	ResponseStatus *int    `json:"response_status"`
	LastError      *string `json:"last_error"`
	DeliveredAt    *string `json:"delivered_at"`
	CreatedAt      string  `json:"created_at"`
}

func toDeliveryDTO(d *delivery.Delivery) deliveryDTO {
	return deliveryDTO{
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

// attemptDTO is one attempt of a delivery, as attempt_history stores it:
// response_status and error null when there were none.
type attemptDTO struct {
	Number         int     `json:"number"`
	StartedAt      string  `json:"started_at"`
	DurationMS     float64 `json:"duration_ms"`
	ResponseStatus *int    `json:"response_status"`
	Error          *string `json:"error"`
}

// deliveryDetailDTO is a delivery as operators see it: the public object
// and every attempt, oldest first.
type deliveryDetailDTO struct {
	deliveryDTO
	AttemptHistory []attemptDTO `json:"attempt_history"`
}

func toDeliveryDetailDTO(d *delivery.Delivery) deliveryDetailDTO {
	out := deliveryDetailDTO{deliveryDTO: toDeliveryDTO(d), AttemptHistory: make([]attemptDTO, 0, len(d.History))}
	for _, a := range d.History {
		out.AttemptHistory = append(out.AttemptHistory, attemptDTO{
			Number:         a.Number,
			StartedAt:      httpx.Timestamp(a.StartedAt),
			DurationMS:     a.DurationMS(),
			ResponseStatus: a.OptionalStatus(),
			Error:          a.OptionalError(),
		})
	}
	return out
}
