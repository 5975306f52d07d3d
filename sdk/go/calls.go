package parley

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// OpenAPIDocument returns the API's OpenAPI 3.1 document as JSON, the
// contract this client is checked against. It needs no API key (none is
// sent) and counts against no rate limit.
func (c *Client) OpenAPIDocument(ctx context.Context) ([]byte, error) {
	r := &request{method: http.MethodGet, path: "/openapi.json", public: true}
	resp, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body) // in memory already (send reads it whole)
	if err == nil {
		// A proxy's page with 200, or no body, is not the document, as it
		// would be no other call's answer.
		_, err = identified(b, (*openAPIDocument)(nil))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: GET %s: decode the answer: %w", ErrMalformedAnswer, r.path, err)
	}
	return b, nil
}

// Me returns the workspace the API key belongs to, its plan, channels and
// rate limit.
func (c *Client) Me(ctx context.Context) (*Me, error) {
	return fetch[Me](ctx, c, c.plain(http.MethodGet, "/me", nil), "")
}

// Channels returns every channel of the workspace.
func (c *Client) Channels(ctx context.Context) ([]Channel, error) {
	out, err := fetch[[]Channel](ctx, c, c.plain(http.MethodGet, "/channels", nil), "channels")
	if err != nil {
		return nil, err
	}
	return *out, nil
}

// ConversationsParams selects a page of conversations; every field is
// optional.
type ConversationsParams struct {
	// Platform keeps only conversations on this platform.
	Platform Platform
	// Before keeps only conversations whose last message is strictly
	// before it; a page's NextBefore is the next page's Before.
	Before time.Time
	// Limit is how many a page holds at most (1–100; 0 means the server's
	// default, 50).
	Limit int
}

// ListConversations returns one page of the workspace's conversations, the
// one with the most recent message first. Conversations walks every page.
func (c *Client) ListConversations(ctx context.Context, p ConversationsParams) (*ConversationPage, error) {
	q := url.Values{}
	if p.Platform != "" {
		q.Set("platform", string(p.Platform))
	}
	page(q, p.Before, p.Limit)
	return fetch[ConversationPage](ctx, c, c.plain(http.MethodGet, withQuery("/conversations", q), nil), "")
}

// MessagesParams selects a page of a conversation's messages; every field
// is optional.
type MessagesParams struct {
	// Before keeps only messages stamped strictly before it.
	Before time.Time
	// Limit is how many a page holds at most (1–100; 0 means 50).
	Limit int
}

// ListMessages returns one page of a conversation's messages, newest
// first. Messages walks every page.
func (c *Client) ListMessages(ctx context.Context, conversationID string, p MessagesParams) (*MessagePage, error) {
	if err := checkID("conversation id", conversationID); err != nil {
		return nil, err
	}
	q := url.Values{}
	page(q, p.Before, p.Limit)
	path := withQuery("/conversations/"+pathEscape(conversationID)+"/messages", q)
	return fetch[MessagePage](ctx, c, c.plain(http.MethodGet, path, nil), "")
}

// SendMessage sends a text, with quick replies or buttons, to the
// conversation's customer and returns the stored message. It carries an
// Idempotency-Key (generated unless WithIdempotencyKey gives one), so its
// retries send the message once.
func (c *Client) SendMessage(ctx context.Context, req SendMessageRequest, opts ...CallOption) (*Message, error) {
	return fetch[Message](ctx, c, c.keyed("/messages", req, opts), "message")
}

// SendImage sends an image, then the optional text as its own message. It
// carries an Idempotency-Key as SendMessage does.
func (c *Client) SendImage(ctx context.Context, req SendImageRequest, opts ...CallOption) (*SendImageResult, error) {
	return fetch[SendImageResult](ctx, c, c.keyed("/image", req, opts), "")
}

// SendCarousel sends a carousel of 1–10 cards and returns the stored
// message. It carries an Idempotency-Key as SendMessage does.
func (c *Client) SendCarousel(ctx context.Context, req SendCarouselRequest, opts ...CallOption) (*Message, error) {
	return fetch[Message](ctx, c, c.keyed("/carousel", req, opts), "message")
}

// SendTyping shows the customer that a reply is being written. It takes no
// Idempotency-Key (a repeat is harmless) and so is not retried after a
// lost connection or a 503.
func (c *Client) SendTyping(ctx context.Context, conversationID string) error {
	return c.do(ctx, c.plain(http.MethodPost, "/typing", TypingRequest{ConversationID: conversationID}), new(okAnswer))
}

// Comment returns a comment (by its id on the platform) and its reply
// status.
func (c *Client) Comment(ctx context.Context, commentID string) (*Comment, error) {
	if err := checkID("comment id", commentID); err != nil {
		return nil, err
	}
	return fetch[Comment](ctx, c, c.plain(http.MethodGet, "/comments/"+pathEscape(commentID), nil), "comment")
}

// ReplyToComment posts a public reply under the comment. It carries an
// Idempotency-Key as SendMessage does.
func (c *Client) ReplyToComment(ctx context.Context, commentID, text string, opts ...CallOption) (*CommentReply, error) {
	if err := checkID("comment id", commentID); err != nil {
		return nil, err
	}
	path := "/comments/" + pathEscape(commentID) + "/reply"
	return fetch[CommentReply](ctx, c, c.keyed(path, CommentReplyRequest{Text: text}, opts), "")
}

// PrivateReply sends the commenter a direct message (one per comment,
// within 7 days of it). It carries an Idempotency-Key as SendMessage does.
func (c *Client) PrivateReply(ctx context.Context, commentID, text string, opts ...CallOption) (*PrivateReply, error) {
	if err := checkID("comment id", commentID); err != nil {
		return nil, err
	}
	path := "/comments/" + pathEscape(commentID) + "/private-reply"
	return fetch[PrivateReply](ctx, c, c.keyed(path, CommentReplyRequest{Text: text}, opts), "")
}

// SaveWebhook saves the URL events are POSTed to, makes the webhook
// active and returns it with a new signing secret, shown only here.
func (c *Client) SaveWebhook(ctx context.Context, url string) (*SavedWebhook, error) {
	return fetch[SavedWebhook](ctx, c, c.plain(http.MethodPut, "/webhook", SaveWebhookRequest{URL: url}), "")
}

// Webhook returns the saved webhook (never its secret).
func (c *Client) Webhook(ctx context.Context) (*Webhook, error) {
	return fetch[Webhook](ctx, c, c.plain(http.MethodGet, "/webhook", nil), "webhook")
}

// DeleteWebhook removes the webhook; events are no longer sent. A retry
// answered webhook_not_found after an attempt whose answer was lost is a
// success: that attempt removed it.
func (c *Client) DeleteWebhook(ctx context.Context) error {
	r := c.plain(http.MethodDelete, "/webhook", nil)
	err := c.do(ctx, r, new(okAnswer))
	if r.mayHaveActed && errors.Is(err, ErrWebhookNotFound) {
		return nil
	}
	return err
}

// TestWebhook sends one test event to the webhook and returns its
// delivery once the receiver answered (or the attempt timed out, 10 s).
// It is never retried after a lost connection or a 503: each call sends
// an event.
func (c *Client) TestWebhook(ctx context.Context) (*Delivery, error) {
	return fetch[Delivery](ctx, c, c.plain(http.MethodPost, "/webhook/test", nil), "delivery")
}

// DeliveriesParams selects a page of the delivery log; every field is
// optional.
type DeliveriesParams struct {
	// Status keeps only deliveries in this status.
	Status DeliveryStatus
	// Event keeps only deliveries of this event kind.
	Event EventKind
	// Before keeps only deliveries created strictly before it.
	Before time.Time
	// Limit is how many a page holds at most (1–100; 0 means 50).
	Limit int
}

// ListDeliveries returns one page of the delivery log (14 days), newest
// first. Deliveries walks every page.
func (c *Client) ListDeliveries(ctx context.Context, p DeliveriesParams) (*DeliveryPage, error) {
	q := url.Values{}
	if p.Status != "" {
		q.Set("status", string(p.Status))
	}
	if p.Event != "" {
		q.Set("event", string(p.Event))
	}
	page(q, p.Before, p.Limit)
	return fetch[DeliveryPage](ctx, c, c.plain(http.MethodGet, withQuery("/webhook/deliveries", q), nil), "")
}

// Flows returns the workspace's active flows that have an api trigger,
// the latest updated first.
func (c *Client) Flows(ctx context.Context) ([]Flow, error) {
	out, err := fetch[[]Flow](ctx, c, c.plain(http.MethodGet, "/flows", nil), "flows")
	if err != nil {
		return nil, err
	}
	return *out, nil
}

// Invoke runs the flow's published version with input (a value that
// encodes as a JSON object; nil sends {}) and returns the run's outcome.
// A run that failed is a result with Status RunFailed and its Error, not
// an error. It carries an Idempotency-Key as SendMessage does, so its
// retries run the flow once.
func (c *Client) Invoke(ctx context.Context, flowID string, input any, opts ...CallOption) (*InvokeResult, error) {
	return c.invoke(ctx, flowID, invokeBody(input, ""), opts)
}

// Continue continues the waiting run of sessionID with text, the answer to
// its question. It carries an Idempotency-Key as SendMessage does.
func (c *Client) Continue(ctx context.Context, flowID, sessionID, text string, opts ...CallOption) (*InvokeResult, error) {
	if err := checkID("session id", sessionID); err != nil {
		return nil, err
	}
	return c.invoke(ctx, flowID, invokeBody(map[string]any{"text": text}, sessionID), opts)
}

func (c *Client) invoke(ctx context.Context, flowID string, body InvokeRequest, opts []CallOption) (*InvokeResult, error) {
	if err := checkID("flow id", flowID); err != nil {
		return nil, err
	}
	return fetch[InvokeResult](ctx, c, c.keyed(invokePath(flowID), body, opts), "")
}

func invokeBody(input any, sessionID string) InvokeRequest {
	if input == nil {
		input = map[string]any{}
	}
	return InvokeRequest{Input: input, SessionID: sessionID}
}

func invokePath(flowID string) string { return "/flows/" + pathEscape(flowID) + "/invoke" }

// Run returns a run's trace: the run and every node run with its input,
// output and timing.
func (c *Client) Run(ctx context.Context, flowID, runID string) (*RunTrace, error) {
	if err := checkID("flow id", flowID); err != nil {
		return nil, err
	}
	if err := checkID("run id", runID); err != nil {
		return nil, err
	}
	path := "/flows/" + pathEscape(flowID) + "/runs/" + pathEscape(runID)
	return fetch[RunTrace](ctx, c, c.plain(http.MethodGet, path, nil), "")
}

// page sets the paging parameters that are set.
func page(q url.Values, before time.Time, limit int) {
	if !before.IsZero() {
		q.Set("before", before.UTC().Format(time.RFC3339Nano))
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
}

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
