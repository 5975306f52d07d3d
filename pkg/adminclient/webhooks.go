package adminclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
	"github.com/parleyhq/parley/pkg/rpc"
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

// GetWebhook returns the workspace's webhook; 404 webhook_not_found when
// none is saved.
func (c *Client) GetWebhook(ctx context.Context, workspaceID string) (dispatcherapi.Webhook, error) {
	var out dispatcherapi.WebhookResponse
	err := c.asWorkspace(ctx, rpc.ServiceDispatcher, workspaceID, http.MethodGet, "/v1/webhook", nil, &out)
	return out.Webhook, err
}

// SaveWebhook saves the workspace's webhook URL (checked by the dispatcher:
// https, a public address) and returns it with a new secret.
func (c *Client) SaveWebhook(ctx context.Context, workspaceID, webhookURL string) (dispatcherapi.SavedWebhook, error) {
	var out dispatcherapi.SavedWebhook
	err := c.asWorkspace(ctx, rpc.ServiceDispatcher, workspaceID, http.MethodPut, "/v1/webhook", dispatcherapi.SaveWebhookRequest{URL: webhookURL}, &out)
	return out, err
}

// DeleteWebhook removes the workspace's webhook.
func (c *Client) DeleteWebhook(ctx context.Context, workspaceID string) error {
	return c.asWorkspace(ctx, rpc.ServiceDispatcher, workspaceID, http.MethodDelete, "/v1/webhook", nil, nil)
}

// SendTestEvent sends a webhook.test event to the workspace's webhook and
// returns its delivery as it ended.
func (c *Client) SendTestEvent(ctx context.Context, workspaceID string) (dispatcherapi.Delivery, error) {
	var out dispatcherapi.DeliveryResponse
	err := c.asWorkspace(ctx, rpc.ServiceDispatcher, workspaceID, http.MethodPost, "/v1/webhook/test", nil, &out)
	return out.Delivery, err
}

// ResaveWebhook saves a workspace's webhook again as an operator, which
// resumes a paused one, and returns it with a new secret.
func (c *Client) ResaveWebhook(ctx context.Context, workspaceID string) (dispatcherapi.SavedWebhook, error) {
	var out dispatcherapi.SavedWebhook
	err := c.admin(ctx, rpc.ServiceDispatcher, http.MethodPost, "/admin/webhooks/"+segment(workspaceID)+"/resave", nil, &out)
	return out, err
}

// WebhookStatus returns the workspace's webhook as operators see it, with
// its failure count and when it paused; 404 webhook_not_found when none is
// saved.
func (c *Client) WebhookStatus(ctx context.Context, workspaceID string) (dispatcherapi.WebhookStatus, error) {
	var out dispatcherapi.WebhookStatusResponse
	err := c.admin(ctx, rpc.ServiceDispatcher, http.MethodGet, "/admin/webhooks/"+segment(workspaceID), nil, &out)
	return out.Webhook, err
}

// GetDelivery returns one delivery of the workspace's log with its
// attempts; 404 delivery_not_found when the log does not hold it (purged
// after its retention, or another workspace's).
func (c *Client) GetDelivery(ctx context.Context, workspaceID, deliveryID string) (dispatcherapi.DeliveryDetail, error) {
	var out dispatcherapi.DeliveryDetailResponse
	err := c.admin(ctx, rpc.ServiceDispatcher, http.MethodGet,
		"/admin/webhooks/"+segment(workspaceID)+"/deliveries/"+segment(deliveryID), nil, &out)
	return out.Delivery, err
}

// ListDeliveries returns a page of the workspace's delivery log.
func (c *Client) ListDeliveries(ctx context.Context, workspaceID string, f DeliveryFilter) (dispatcherapi.DeliveryPage, error) {
	query := pageQuery(map[string]string{"status": f.Status, "event": f.Event, "before": f.Before}, f.Limit)
	var out dispatcherapi.DeliveryPage
	err := c.asWorkspace(ctx, rpc.ServiceDispatcher, workspaceID, http.MethodGet, withQuery("/v1/webhook/deliveries", query), nil, &out)
	return out, err
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
func (c *Client) Replay(ctx context.Context, r dispatcherapi.ReplayRequest) (dispatcherapi.Replay, error) {
	r.Resume = nil
	var result dispatcherapi.Replay
	queued := 0
	for call := range maxReplayCalls {
		var out dispatcherapi.ReplayResponse
		if err := c.admin(ctx, rpc.ServiceDispatcher, http.MethodPost, "/admin/replays", r, &out); err != nil {
			return dispatcherapi.Replay{}, err
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
	return dispatcherapi.Replay{}, fmt.Errorf("%w after %d calls", ErrReplayUnfinished, maxReplayCalls)
}
