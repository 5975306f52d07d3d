package http

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/services/console/internal/app"
)

// mountWebhook adds the webhook page and the delivery log to a workspace's
// group. Every action is a plain form post whose answer is the page again
// with its result: a secret is shown once, so it is never put in a URL
// or a redirect.
func (c *Console) mountWebhook(ws *echo.Group) {
	ws.GET("/webhook", c.webhookPage)
	ws.POST("/webhook", c.saveWebhook)
	ws.POST("/webhook/test", c.testWebhook)
	ws.POST("/webhook/resave", c.resaveWebhook)
	ws.GET("/deliveries", c.deliveriesPage)
	ws.POST("/deliveries/replay", c.replayDeliveries)
	ws.GET("/deliveries/:deliveryId", c.deliveryPage)
	ws.POST("/deliveries/:deliveryId/replay", c.replayDelivery)
}

// codeDeliveryNotFound is the console's refusal of a delivery the log does
// not hold.
const codeDeliveryNotFound = "delivery_not_found"

// webhookView is the webhook page's data: the webhook's state and the
// result of the action just taken, if any.
type webhookView struct {
	State app.WebhookState
	// URL is the URL field's value.
	URL string
	// Saved is a save's or re-save's answer: the secret, shown this once.
	Saved *dispatcherapi.SavedWebhook
	// Resaved offers to replay what was skipped while the webhook was
	// paused.
	Resaved *app.Resaved
	Test    *app.TestResult
	// SecretShown says a save posted again led here: its secret was in
	// the first post's answer only (?secret_shown=1).
	SecretShown bool
}

// TestMillis is the test event's round trip in whole milliseconds.
func (w webhookView) TestMillis() int64 { return w.Test.Took.Milliseconds() }

func (c *Console) webhookView(ctx echo.Context) (view, webhookView, error) {
	id := ctx.Param("id")
	v := c.view(ctx, "Webhook")
	v.Workspace, v.Current = id, "webhook"
	state, err := c.app.Webhook(ctx.Request().Context(), operatorOf(ctx), id)
	wv := webhookView{State: state}
	if state.Webhook != nil {
		wv.URL = state.Webhook.URL
	}
	return v, wv, err
}

// webhookPage shows the webhook's URL and status and, when paused, why.
func (c *Console) webhookPage(ctx echo.Context) error {
	v, wv, err := c.webhookView(ctx)
	if err != nil {
		return c.serviceError(ctx, "webhook", v, webhookError(err))
	}
	wv.SecretShown = ctx.QueryParam(secretShownParam) != ""
	v.Page = wv
	return c.render(ctx, http.StatusOK, "webhook", v)
}

// secretShownParam marks the webhook page a save posted again led to.
const secretShownParam = "secret_shown"

// webhookSaveRepeat answers a save or re-save posted again (formRepeat):
// the webhook page, saying its secret cannot be shown again.
func (c *Console) webhookSaveRepeat(ctx echo.Context, err error) (repeated bool, answer error) {
	return c.formRepeat(ctx, err, func(string) string {
		return workspacePath(ctx.Param("id")) + "/webhook?" + secretShownParam + "=1"
	}, "the webhook page", nil)
}

// saveWebhook saves the URL and shows the new secret once; a refused URL
// is shown with the dispatcher's reason, the field keeping what was typed.
func (c *Console) saveWebhook(ctx echo.Context) error {
	op, id := operatorOf(ctx), ctx.Param("id")
	typed := strings.TrimSpace(ctx.FormValue("url"))
	saved, saveErr := c.app.SaveWebhook(ctx.Request().Context(), op, id, formID(ctx), typed)
	if repeated, answer := c.webhookSaveRepeat(ctx, saveErr); repeated {
		return answer
	}
	v, wv, err := c.webhookView(ctx)
	if saveErr != nil {
		wv.URL = typed
		v.Page = wv
		return c.serviceError(ctx, "webhook", v, webhookError(saveErr))
	}
	// Saved: its secret is on the page even when the webhook's state
	// could not be read again, since it cannot be shown again.
	wv.Saved = &saved
	v.Page = wv
	if err != nil {
		return c.serviceError(ctx, "webhook", v, webhookError(err))
	}
	return c.render(ctx, http.StatusOK, "webhook", v)
}

// testWebhook sends the test event and shows how its one attempt ended.
func (c *Console) testWebhook(ctx echo.Context) error {
	result, testErr := c.app.SendTestEvent(ctx.Request().Context(), operatorOf(ctx), ctx.Param("id"), formID(ctx))
	if repeated, answer := c.formRepeat(ctx, testErr, func(deliveryID string) string {
		// The test's delivery, which the first post's answer showed.
		if deliveryID == "" {
			return workspacePath(ctx.Param("id")) + "/deliveries"
		}
		return workspacePath(ctx.Param("id")) + "/deliveries/" + url.PathEscape(deliveryID)
	}, "the delivery log for a new test event", nil); repeated {
		return answer
	}
	v, wv, err := c.webhookView(ctx)
	if testErr == nil {
		testErr = err
	}
	if testErr != nil {
		v.Page = wv
		return c.serviceError(ctx, "webhook", v, webhookError(testErr))
	}
	wv.Test = &result
	v.Page = wv
	return c.render(ctx, http.StatusOK, "webhook", v)
}

// resaveWebhook saves the webhook again as an operator (a new secret,
// shown once; a paused webhook resumes) and offers to replay the paused
// period.
func (c *Console) resaveWebhook(ctx echo.Context) error {
	resaved, resaveErr := c.app.ResaveWebhook(ctx.Request().Context(), operatorOf(ctx), ctx.Param("id"), formID(ctx))
	if repeated, answer := c.webhookSaveRepeat(ctx, resaveErr); repeated {
		return answer
	}
	v, wv, err := c.webhookView(ctx)
	if resaveErr != nil {
		v.Page = wv
		return c.serviceError(ctx, "webhook", v, webhookError(resaveErr))
	}
	// Saved again: its secret is on the page even when the webhook's
	// state could not be read again, as saveWebhook's.
	wv.Saved, wv.Resaved = &resaved.Saved, &resaved
	v.Page = wv
	if err != nil {
		return c.serviceError(ctx, "webhook", v, webhookError(err))
	}
	return c.render(ctx, http.StatusOK, "webhook", v)
}

// deliveriesView is the delivery log page's data.
type deliveriesView struct {
	// Status, Event, From and To are the filters as the form sent them.
	Status, Event, From, To string
	List                    app.DeliveryList
	// OlderURL is the next page's link, with the filters; empty on the last.
	OlderURL string
	// Replayed is the result of a replay just queued.
	Replayed *dispatcherapi.Replay
	// Listed is false when the log could not be read (an error is shown).
	Listed bool
}

// Statuses and Events are the filters' choices.
func (deliveriesView) Statuses() []string {
	return []string{dispatcherapi.DeliveryPending, dispatcherapi.DeliveryDelivered, dispatcherapi.DeliveryFailed, dispatcherapi.DeliverySkipped}
}

func (deliveriesView) Events() []string { return append(replayEvents(), dispatcherapi.EventTest) }

// ReplayEvents are the kinds a replay selects: test events are not in the
// event stream.
func (deliveriesView) ReplayEvents() []string { return replayEvents() }

func replayEvents() []string {
	return []string{dispatcherapi.EventMessageReceived, dispatcherapi.EventPostbackReceived, dispatcherapi.EventCommentReceived}
}

// deliveriesPage lists the delivery log, newest first, as the GET form's
// filters select.
func (c *Console) deliveriesPage(ctx echo.Context) error {
	v, dv := c.deliveriesView(ctx)
	return c.listDeliveries(ctx, v, dv)
}

func (c *Console) deliveriesView(ctx echo.Context) (view, deliveriesView) {
	v := c.view(ctx, "Delivery log")
	v.Workspace, v.Current = ctx.Param("id"), "deliveries"
	return v, deliveriesView{Status: ctx.QueryParam("status"), Event: ctx.QueryParam("event"),
		From: ctx.QueryParam("from"), To: ctx.QueryParam("to")}
}

// listDeliveries reads the page dv's filters select into dv and draws it.
func (c *Console) listDeliveries(ctx echo.Context, v view, dv deliveriesView) error {
	q := app.DeliveryQuery{Status: dv.Status, Event: dv.Event, Before: ctx.QueryParam("before")}
	var err error
	if q.From, err = formTime("from", dv.From); err == nil {
		q.To, err = formTime("to", dv.To)
	}
	if err == nil {
		dv.List, err = c.app.Deliveries(ctx.Request().Context(), operatorOf(ctx), v.Workspace, q)
	}
	if err != nil {
		v.Page = dv
		return c.serviceError(ctx, "deliveries", v, webhookError(err))
	}
	dv.Listed = true
	if dv.List.Older != "" {
		older := url.Values{"before": {dv.List.Older}}
		for name, value := range map[string]string{"status": dv.Status, "event": dv.Event, "from": dv.From, "to": dv.To} {
			if value != "" {
				older.Set(name, value)
			}
		}
		dv.OlderURL = workspacePath(v.Workspace) + "/deliveries?" + older.Encode()
	}
	v.Page = dv
	return c.render(ctx, http.StatusOK, "deliveries", v)
}

// replayDeliveries replays a time range, optionally of one kind, and shows
// how many events were queued above the log. since and until come from
// the log's form (datetime-local, UTC) or the webhook page's offer (exact
// times).
func (c *Console) replayDeliveries(ctx echo.Context) error {
	v, dv := c.deliveriesView(ctx)
	dv.Status, dv.Event, dv.From, dv.To = "", "", "", ""
	since, err := formTime("since", ctx.FormValue("since"))
	if err == nil && since.IsZero() {
		err = errs.InvalidRequest("since is required: the time the replay starts from")
	}
	var until time.Time
	if err == nil {
		until, err = formTime("until", ctx.FormValue("until"))
	}
	var replayed dispatcherapi.Replay
	if err == nil {
		replayed, err = c.app.ReplayRange(ctx.Request().Context(), operatorOf(ctx), v.Workspace, formID(ctx), since, until, ctx.FormValue("event"))
	}
	if repeated, answer := c.formRepeat(ctx, err, func(string) string { return workspacePath(v.Workspace) + "/deliveries" }, "the delivery log for the replayed deliveries", nil); repeated {
		return answer
	}
	if err != nil {
		// The log is still shown under the refusal.
		list, listErr := c.app.Deliveries(ctx.Request().Context(), operatorOf(ctx), v.Workspace, app.DeliveryQuery{})
		dv.List, dv.Listed = list, listErr == nil
		v.Page = dv
		return c.serviceError(ctx, "deliveries", v, webhookError(err))
	}
	dv.Replayed = &replayed
	return c.listDeliveries(ctx, v, dv)
}

// deliveryView is a delivery's page.
type deliveryView struct {
	Delivery dispatcherapi.DeliveryDetail
	Replayed *dispatcherapi.Replay
}

// Replayable reports whether the event is in the event stream (a test
// event is not).
func (d deliveryView) Replayable() bool { return d.Delivery.Event != dispatcherapi.EventTest }

// AttemptDuration words an attempt's duration.
func (deliveryView) AttemptDuration(a dispatcherapi.Attempt) string {
	return strconv.FormatFloat(a.DurationMS, 'f', -1, 64) + " ms"
}

func (c *Console) loadDelivery(ctx echo.Context) (view, deliveryView, error) {
	v := c.view(ctx, "Delivery")
	v.Workspace, v.Current = ctx.Param("id"), "deliveries"
	d, err := c.app.Delivery(ctx.Request().Context(), operatorOf(ctx), v.Workspace, ctx.Param("deliveryId"))
	return v, deliveryView{Delivery: d}, err
}

// deliveryPage shows one delivery: its outcome, attempts and signed body.
func (c *Console) deliveryPage(ctx echo.Context) error {
	v, dv, err := c.loadDelivery(ctx)
	if err != nil {
		return c.serviceError(ctx, "delivery", v, webhookError(err))
	}
	v.Page = dv
	return c.render(ctx, http.StatusOK, "delivery", v)
}

// replayDelivery replays one delivery's event, and only it, then shows the
// delivery again with the replay's result (or its refusal) above it.
func (c *Console) replayDelivery(ctx echo.Context) error {
	replayed, replayErr := c.app.ReplayDelivery(ctx.Request().Context(), operatorOf(ctx), ctx.Param("id"), formID(ctx), ctx.Param("deliveryId"))
	if repeated, answer := c.formRepeat(ctx, replayErr, func(string) string {
		return workspacePath(ctx.Param("id")) + "/deliveries/" + url.PathEscape(ctx.Param("deliveryId"))
	}, "the delivery's page for a new attempt", nil); repeated {
		return answer
	}
	v, dv, err := c.loadDelivery(ctx)
	if err != nil {
		return c.serviceError(ctx, "delivery", v, webhookError(err))
	}
	v.Page = dv
	if replayErr != nil {
		// The delivery is still shown under the refusal.
		return c.serviceError(ctx, "delivery", v, webhookError(replayErr))
	}
	dv.Replayed = &replayed
	v.Page = dv
	return c.render(ctx, http.StatusOK, "delivery", v)
}

// Forms' time layouts: a datetime-local input's, with and without seconds,
// read as UTC, and the exact times the console writes itself.
var formTimeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04"}

// formTime reads a form's time; empty is the zero time.
func formTime(field, value string) (time.Time, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return time.Time{}, nil
	}
	for _, layout := range formTimeLayouts {
		if t, err := time.Parse(layout, value); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, errs.InvalidRequest("%s must be a date and time (UTC) like 2026-11-24T10:00", field)
}

// webhookError words the console's own refusals on these pages and adds
// what to do to the dispatcher's.
func webhookError(err error) error {
	switch {
	case errors.Is(err, app.ErrDeliveryNotFound):
		return errs.NotFound(codeDeliveryNotFound, "this workspace's delivery log has no such delivery (the log keeps deliveries for the dispatcher's retention period only)")
	}
	e, ok := errs.As(err)
	if !ok {
		return err
	}
	advice := map[string]string{
		"webhook_not_found":         "save a webhook URL on the webhook page first",
		"webhook_paused":            "the webhook is paused: save it again on the webhook page, then replay",
		"test_event_not_replayable": "send a new test event from the webhook page instead",
		"event_not_in_stream":       "the event stream keeps events for a set period only and no longer has this one, so it can no longer be sent again",
	}[e.Code]
	if advice == "" {
		return err
	}
	out := *e
	out.Message = advice + " (" + e.Message + ")"
	return &out
}
