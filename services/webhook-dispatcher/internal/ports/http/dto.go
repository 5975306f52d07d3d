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
