// Package dispatcher declares the webhook-dispatcher's JSON bodies
// (docs/architecture.md "Wire types"): the /v1 webhook and delivery-log
// routes it serves on its rpc "api" endpoint, which the gateway forwards
// (APIRoutes), and the operator routes on its rpc "admin" endpoint, which
// parleyctl and the console call through pkg/adminclient (AdminRoutes).
//
// Times are RFC 3339 strings in UTC (httpx.Timestamp). In an answer, a
// field that does not apply is null, never left out; in a request, an
// optional field is left out.
//
// The envelope the dispatcher signs and POSTs to a webhook is not here: it
// is the public webhook format, specified by the OpenAPI document's
// webhooks and checked against them (apicheck.CheckWebhook), and no Parley
// process decodes it.
package dispatcher

import (
	"net/http"

	"github.com/parleyhq/parley/pkg/api"
)

// Delivery statuses, the values of Delivery.Status and of the delivery
// log's status filter.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
	DeliverySkipped   = "skipped"
)

// Event kinds, the values of Delivery.Event and of the delivery log's
// event filter; EventTest is the test button's, which is never replayed.
const (
	EventMessageReceived  = "message.received"
	EventPostbackReceived = "postback.received"
	EventCommentReceived  = "comment.received"
	EventTest             = "test"
)

// Webhook is a workspace's webhook. It never carries the secret.
type Webhook struct {
	ID     string `json:"id"`
	URL    string `json:"url"`
	Status string `json:"status"`
	// CreatedAt and UpdatedAt are RFC 3339; every save moves UpdatedAt.
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

// WebhookStatus is a workspace's webhook as operators see it: the webhook
// and the pause rule's state. It never carries the secret.
type WebhookStatus struct {
	Webhook
	// ConsecutiveFailures counts failed deliveries since the last success
	// or save; the webhook pauses when it reaches the dispatcher's limit.
	ConsecutiveFailures int `json:"consecutive_failures"`
	// PausedAt is when the pause rule paused the webhook; nil unless it is
	// paused.
	PausedAt *string `json:"paused_at"`
}

// SaveWebhookRequest is PUT /v1/webhook's body: the URL events are POSTed
// to (https, a public address).
type SaveWebhookRequest struct {
	URL string `json:"url"`
}

// SavedWebhook is a saved webhook with its new signing secret: the only
// answer that carries the secret (a save, or an operator's re-save).
type SavedWebhook struct {
	Webhook Webhook `json:"webhook"`
	Secret  string  `json:"secret"`
}

// WebhookResponse is GET /v1/webhook's answer.
type WebhookResponse struct {
	Webhook Webhook `json:"webhook"`
}

// WebhookStatusResponse is GET /admin/webhooks/:workspace_id's answer.
type WebhookStatusResponse struct {
	Webhook WebhookStatus `json:"webhook"`
}

// Delivery is one event's delivery to a webhook, as the delivery log
// keeps it: ResponseStatus nil when the receiver gave no answer,
// LastError nil without an error, DeliveredAt nil until delivered.
type Delivery struct {
	ID    string `json:"id"`
	Event string `json:"event"`
	// Payload is the envelope as it was signed and sent.
	Payload        string  `json:"payload"`
	Status         string  `json:"status"`
	Attempts       int     `json:"attempts"`
	ResponseStatus *int    `json:"response_status"`
	LastError      *string `json:"last_error"`
	DeliveredAt    *string `json:"delivered_at"`
	CreatedAt      string  `json:"created_at"`
}

// DeliveryResponse is POST /v1/webhook/test's answer: the test event's
// delivery as its one attempt ended.
type DeliveryResponse struct {
	Delivery Delivery `json:"delivery"`
}

// DeliveryPage is GET /v1/webhook/deliveries's answer, a page of the log,
// newest first. NextBefore, passed as before, returns the next page; nil
// on the last page. Deliveries sharing a created_at are never split
// across pages, so a walk meets each exactly once; a page carries more
// than limit deliveries only when one such group alone is larger.
type DeliveryPage struct {
	Deliveries []Delivery `json:"deliveries"`
	NextBefore *string    `json:"next_before"`
}

// Attempt is one POST of a delivery to the webhook: ResponseStatus nil
// when the receiver gave no answer, Error nil when the attempt succeeded.
type Attempt struct {
	Number         int     `json:"number"`
	StartedAt      string  `json:"started_at"`
	DurationMS     float64 `json:"duration_ms"`
	ResponseStatus *int    `json:"response_status"`
	Error          *string `json:"error"`
}

// DeliveryDetail is a delivery as operators see it: the log's delivery
// and every attempt, oldest first (Attempts is their count).
type DeliveryDetail struct {
	Delivery
	AttemptHistory []Attempt `json:"attempt_history"`
}

// DeliveryDetailResponse is GET
// /admin/webhooks/:workspace_id/deliveries/:id's answer.
type DeliveryDetailResponse struct {
	Delivery DeliveryDetail `json:"delivery"`
}

// ReplayRequest is POST /admin/replays's body. A replay of a period
// delivers again the workspace's events the event stream stored from
// Since up to Until (RFC 3339 times; Until exclusive, nil for up to the
// last event), of kind Event (nil for all); Resume continues a replay one
// call could not queue whole (ReplayResponse.Next). A replay of one
// delivery gives DeliveryID alone, without Since, Until, Event or Resume.
type ReplayRequest struct {
	WorkspaceID string        `json:"workspace_id"`
	Since       string        `json:"since,omitempty"`
	Until       *string       `json:"until,omitempty"`
	Event       *string       `json:"event,omitempty"`
	Resume      *ReplayCursor `json:"resume,omitempty"`
	DeliveryID  *string       `json:"delivery_id,omitempty"`
}

// ReplayCursor is where a replay goes on: the dispatcher gives it and
// takes it back as it is.
type ReplayCursor struct {
	ReplayID string `json:"replay_id"`
	FromSeq  uint64 `json:"from_seq"`
	EndSeq   uint64 `json:"end_seq"`
}

// Replay is a replay as the dispatcher queued it: Queued is how many
// events it queued (by this call) for delivery under their original ids.
// A replay of one delivery carries its DeliveryID (nil otherwise), and
// Since and Until are the window of the stream searched for its event.
type Replay struct {
	ID          string  `json:"id"`
	WorkspaceID string  `json:"workspace_id"`
	Since       string  `json:"since"`
	Until       *string `json:"until"`
	Event       *string `json:"event"`
	DeliveryID  *string `json:"delivery_id"`
	Queued      int     `json:"queued"`
}

// ReplayResponse is POST /admin/replays's answer (202: the events are
// queued, not yet delivered). Next is set when the call could not queue
// every selected event: the same request with Resume: Next queues the
// rest of the same replay.
type ReplayResponse struct {
	Replay Replay        `json:"replay"`
	Next   *ReplayCursor `json:"next"`
}

// APIRoutes are the /v1 routes of the dispatcher's rpc "api" endpoint,
// each as the workspace the gateway authenticated. GET
// /v1/webhook/deliveries takes the query limit, before, status and event.
var APIRoutes = []api.Route{
	{Method: http.MethodPut, Path: "/v1/webhook", Request: SaveWebhookRequest{}, Response: SavedWebhook{}},
	{Method: http.MethodGet, Path: "/v1/webhook", Response: WebhookResponse{}},
	{Method: http.MethodDelete, Path: "/v1/webhook", Response: api.OK{}},
	{Method: http.MethodPost, Path: "/v1/webhook/test", Response: DeliveryResponse{}},
	{Method: http.MethodGet, Path: "/v1/webhook/deliveries", Response: DeliveryPage{}},
}

// AdminRoutes are the operator routes of the dispatcher's rpc "admin"
// endpoint.
var AdminRoutes = []api.Route{
	{Method: http.MethodGet, Path: "/admin/webhooks/:workspace_id", Response: WebhookStatusResponse{}},
	{Method: http.MethodGet, Path: "/admin/webhooks/:workspace_id/deliveries/:id", Response: DeliveryDetailResponse{}},
	{Method: http.MethodPost, Path: "/admin/webhooks/:workspace_id/resave", Response: SavedWebhook{}},
	{Method: http.MethodPost, Path: "/admin/replays", Request: ReplayRequest{}, Response: ReplayResponse{}},
}
