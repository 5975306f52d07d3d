package adminclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/parleyhq/parley/pkg/rpc"
)

// Webhook is a workspace's webhook as the dispatcher answers it; it never
// carries the secret.
type Webhook struct {
	ID        string `json:"id"`
	URL       string `json:"url"`
	Status    string `json:"status"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

// WebhookStatus is a workspace's webhook as operators see it: the webhook
// and the pause rule's state. It never carries the secret.
type WebhookStatus struct {
	ID     string `json:"id"`
	URL    string `json:"url"`
	Status string `json:"status"`
	// ConsecutiveFailures counts failed deliveries since the last success
	// or save; the webhook pauses when it reaches the dispatcher's limit.
	ConsecutiveFailures int `json:"consecutive_failures"`
	// PausedAt is when the webhook was paused; nil unless it is paused.
	PausedAt  *string `json:"paused_at"`
	CreatedAt string  `json:"created_at"`
	UpdatedAt string  `json:"updated_at"`
}

// SavedWebhook is a saved webhook with its signing secret, which only a
// save (or an operator's re-save) shows.
type SavedWebhook struct {
	Webhook Webhook `json:"webhook"`
	Secret  string  `json:"secret"`
}

// Delivery is one event's delivery to a webhook: every field present, null
// where it does not apply (no answer, no error, not delivered).
type Delivery struct {
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

// Attempt is one POST of a delivery to the webhook: ResponseStatus is nil
// when the receiver gave no answer, Error nil when the attempt succeeded.
type Attempt struct {
	Number         int     `json:"number"`
	StartedAt      string  `json:"started_at"`
	DurationMS     float64 `json:"duration_ms"`
	ResponseStatus *int    `json:"response_status"`
	Error          *string `json:"error"`
}

// DeliveryDetail is one delivery with every attempt, oldest first, in
// History (Attempts, of the Delivery, is their count).
type DeliveryDetail struct {
	Delivery
	History []Attempt `json:"attempt_history"`
}

// Delivery statuses and event kinds, the delivery log's filters.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
	DeliverySkipped   = "skipped"

	EventMessageReceived  = "message.received"
	EventPostbackReceived = "postback.received"
	EventCommentReceived  = "comment.received"
	EventTest             = "test"
)

// DeliveryFilter selects a page of the delivery log; zero fields do not
// filter. The log is newest first: Before (an RFC 3339 time, exclusive) is
// where the page starts, the NextBefore of the page before it; Limit is
// the page size (the dispatcher's default and maximum apply).
type DeliveryFilter struct {
	Status string
	Event  string
	Before string
	Limit  int
}

// DeliveryPage is a page of the delivery log. NextBefore, given as Before,
// returns the next page; nil on the last page.
type DeliveryPage struct {
	Deliveries []Delivery `json:"deliveries"`
	NextBefore *string    `json:"next_before"`
}

// GetWebhook returns the workspace's webhook; 404 webhook_not_found when
// none is saved.
func (c *Client) GetWebhook(ctx context.Context, workspaceID string) (Webhook, error) {
	var out struct {
		Webhook Webhook `json:"webhook"`
	}
	err := c.asWorkspace(ctx, rpc.ServiceDispatcher, workspaceID, http.MethodGet, "/v1/webhook", nil, &out)
	return out.Webhook, err
}

// SaveWebhook saves the workspace's webhook URL (checked by the dispatcher:
// https, a public address) and returns it with a new secret.
func (c *Client) SaveWebhook(ctx context.Context, workspaceID, webhookURL string) (SavedWebhook, error) {
	var out SavedWebhook
	err := c.asWorkspace(ctx, rpc.ServiceDispatcher, workspaceID, http.MethodPut, "/v1/webhook", map[string]string{"url": webhookURL}, &out)
	return out, err
}

// DeleteWebhook removes the workspace's webhook.
func (c *Client) DeleteWebhook(ctx context.Context, workspaceID string) error {
	return c.asWorkspace(ctx, rpc.ServiceDispatcher, workspaceID, http.MethodDelete, "/v1/webhook", nil, nil)
}

// SendTestEvent sends a webhook.test event to the workspace's webhook and
// returns its delivery as it ended.
func (c *Client) SendTestEvent(ctx context.Context, workspaceID string) (Delivery, error) {
	var out struct {
		Delivery Delivery `json:"delivery"`
	}
	err := c.asWorkspace(ctx, rpc.ServiceDispatcher, workspaceID, http.MethodPost, "/v1/webhook/test", nil, &out)
	return out.Delivery, err
}

// ResaveWebhook saves a workspace's webhook again as an operator, which
// resumes a paused one, and returns it with a new secret.
func (c *Client) ResaveWebhook(ctx context.Context, workspaceID string) (SavedWebhook, error) {
	var out SavedWebhook
	err := c.admin(ctx, rpc.ServiceDispatcher, http.MethodPost, "/admin/webhooks/"+segment(workspaceID)+"/resave", nil, &out)
	return out, err
}

// WebhookStatus returns the workspace's webhook as operators see it, with
// its failure count and when it paused; 404 webhook_not_found when none is
// saved.
func (c *Client) WebhookStatus(ctx context.Context, workspaceID string) (WebhookStatus, error) {
	var out struct {
		Webhook WebhookStatus `json:"webhook"`
	}
	err := c.admin(ctx, rpc.ServiceDispatcher, http.MethodGet, "/admin/webhooks/"+segment(workspaceID), nil, &out)
	return out.Webhook, err
}

// GetDelivery returns one delivery of the workspace's log with its
// attempts; 404 delivery_not_found when the log does not hold it (purged
// after its retention, or another workspace's).
func (c *Client) GetDelivery(ctx context.Context, workspaceID, deliveryID string) (DeliveryDetail, error) {
	var out struct {
		Delivery DeliveryDetail `json:"delivery"`
	}
	err := c.admin(ctx, rpc.ServiceDispatcher, http.MethodGet,
		"/admin/webhooks/"+segment(workspaceID)+"/deliveries/"+segment(deliveryID), nil, &out)
	return out.Delivery, err
}

// ListDeliveries returns a page of the workspace's delivery log.
func (c *Client) ListDeliveries(ctx context.Context, workspaceID string, f DeliveryFilter) (DeliveryPage, error) {
	query := pageQuery(map[string]string{"status": f.Status, "event": f.Event, "before": f.Before}, f.Limit)
	var out DeliveryPage
	err := c.asWorkspace(ctx, rpc.ServiceDispatcher, workspaceID, http.MethodGet, withQuery("/v1/webhook/deliveries", query), nil, &out)
	return out, err
}

// ReplayRequest asks for a workspace's events to be delivered again: those
// the event stream stored from Since up to Until (RFC 3339 times; Until
// exclusive, "" for up to the last event), of kind Event ("" for all).
// The times go as given. With DeliveryID instead (and no Since, Until or
// Event), only that delivery's event goes again.
type ReplayRequest struct {
	WorkspaceID string        `json:"workspace_id"`
	Since       string        `json:"since,omitempty"`
	Until       string        `json:"until,omitempty"`
	Event       string        `json:"event,omitempty"`
	DeliveryID  string        `json:"delivery_id,omitempty"`
	Resume      *ReplayCursor `json:"resume,omitempty"`
}

// ReplayCursor continues a replay one call could not queue whole; the
// dispatcher gives it and takes it back as it is.
type ReplayCursor struct {
	ReplayID string `json:"replay_id"`
	FromSeq  uint64 `json:"from_seq"`
	EndSeq   uint64 `json:"end_seq"`
}

// Replay is a replay as the dispatcher answers it: Queued is how many
// events it queued for delivery under their original ids. A replay of one
// delivery carries its DeliveryID, and Since and Until are the window of
// the stream searched for its event.
type Replay struct {
	ID          string  `json:"id"`
	WorkspaceID string  `json:"workspace_id"`
	Since       string  `json:"since"`
	Until       *string `json:"until"`
	Event       *string `json:"event"`
	DeliveryID  *string `json:"delivery_id,omitempty"`
	Queued      int     `json:"queued"`
}

// maxReplayCalls bounds the continuations of one replay; each call queues
// up to the dispatcher's per-call share, so this is far beyond the events
// the stream keeps.
const maxReplayCalls = 10_000

// ErrReplayUnfinished is a replay still queueing after maxReplayCalls.
var ErrReplayUnfinished = errors.New("still queueing")

// Replay queues the selected events for delivery again, continuing with the
// dispatcher's cursor until all are queued, and returns the replay with
// Queued the total. A paused webhook is refused (409 webhook_paused): save
// it again first (ResaveWebhook). A replay of one delivery is also refused
// for a delivery the log does not hold (404 delivery_not_found), a test
// event's (409 test_event_not_replayable) and one whose event the stream
// no longer keeps (404 event_not_in_stream). The dispatcher does not know workspaces;
// check the workspace first (GetWorkspace) to tell a typo from a workspace
// without a webhook.
func (c *Client) Replay(ctx context.Context, r ReplayRequest) (Replay, error) {
	r.Resume = nil
	var result Replay
	queued := 0
	for call := range maxReplayCalls {
		var out struct {
			Replay Replay        `json:"replay"`
			Next   *ReplayCursor `json:"next"`
		}
		if err := c.admin(ctx, rpc.ServiceDispatcher, http.MethodPost, "/admin/replays", r, &out); err != nil {
			return Replay{}, err
		}
		if call == 0 {
			result = out.Replay
		}
		queued += out.Replay.Queued
		if out.Next == nil {
			result.Queued = queued
			return result, nil
		}
		r.Resume = out.Next
	}
	return Replay{}, fmt.Errorf("%w after %d calls", ErrReplayUnfinished, maxReplayCalls)
}
