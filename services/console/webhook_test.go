package main

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
)

// dispatcherCall is one request the fake dispatcher received.
type dispatcherCall struct {
	workspace string
	method    string
	path      string
	query     url.Values
	body      string
}

// fakeDispatcher answers the webhook dispatcher's routes the console calls,
// in the dispatcher's JSON, from per-workspace state, and records every
// request.
type fakeDispatcher struct {
	mu         sync.Mutex
	webhooks   map[string]dispatcherapi.WebhookStatus
	deliveries map[string][]dispatcherapi.Delivery
	// attempts are the deliveries' attempt histories, by delivery id.
	attempts map[string][]dispatcherapi.Attempt
	// test is the test event's delivery.
	test dispatcherapi.Delivery
	// queued is what each replay call answers it queued.
	queued int
	// refusals answer "METHOD path" with an error instead.
	refusals map[string]*errs.Error
	calls    []dispatcherCall
	secrets  int
	// statusLate, when set, holds each read of a webhook's status until
	// it is closed: its answer comes after the console stopped waiting.
	statusLate chan struct{}
	// statusAfterSave, when set, is how every read of a webhook's status
	// is refused once a save or re-save has answered.
	statusAfterSave *errs.Error
}

func serveDispatcher(t *testing.T, env *testenv.Env) *fakeDispatcher {
	t.Helper()
	d := &fakeDispatcher{webhooks: map[string]dispatcherapi.WebhookStatus{}, deliveries: map[string][]dispatcherapi.Delivery{},
		attempts: map[string][]dispatcherapi.Attempt{}, refusals: map[string]*errs.Error{}, queued: 3}
	api := httpx.NewEcho(env.Logger(t))
	api.Use(recorder(d.note))
	api.PUT("/v1/webhook", d.putWebhook)
	api.POST("/v1/webhook/test", d.testEvent)
	api.GET("/v1/webhook/deliveries", d.listDeliveries)
	admin := httpx.NewEcho(env.Logger(t))
	admin.Use(recorder(d.note))
	admin.GET("/admin/webhooks/:ws", d.webhookStatus)
	admin.GET("/admin/webhooks/:ws/deliveries/:did", d.getDelivery)
	admin.POST("/admin/webhooks/:ws/resave", d.resave)
	admin.POST("/admin/replays", d.replay)
	serveFake(t, env, rpc.ServiceDispatcher, map[string]http.Handler{rpc.EndpointAPI: api, rpc.EndpointAdmin: admin})
	return d
}

// note keeps the request and returns the refusal set for its path.
func (d *fakeDispatcher) note(c echo.Context, body []byte) *errs.Error {
	r := c.Request()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, dispatcherCall{workspace: rpc.WorkspaceID(r.Context()), method: r.Method,
		path: r.URL.Path, query: r.URL.Query(), body: string(body)})
	return d.refusals[r.Method+" "+r.URL.Path]
}

func (d *fakeDispatcher) webhookStatus(c echo.Context) error {
	d.mu.Lock()
	late := d.statusLate
	d.mu.Unlock()
	if late != nil {
		<-late
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	w, ok := d.webhooks[c.Param("ws")]
	if !ok {
		return errs.NotFound("webhook_not_found", "no webhook is saved for this workspace")
	}
	return c.JSON(http.StatusOK, map[string]any{"webhook": w})
}

// getDelivery answers one delivery of the workspace's log with its
// attempts.
func (d *fakeDispatcher) getDelivery(c echo.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	del, ok := d.find(c.Param("ws"), c.Param("did"))
	if !ok {
		return errs.NotFound("delivery_not_found", "the workspace's delivery log has no delivery with this id")
	}
	attempts := d.attempts[del.ID]
	if attempts == nil {
		attempts = []dispatcherapi.Attempt{}
	}
	return c.JSON(http.StatusOK, map[string]any{"delivery": dispatcherapi.DeliveryDetail{Delivery: del, AttemptHistory: attempts}})
}

// find is the workspace's delivery with that id.
func (d *fakeDispatcher) find(ws, id string) (dispatcherapi.Delivery, bool) {
	for _, del := range d.deliveries[ws] {
		if del.ID == id {
			return del, true
		}
	}
	return dispatcherapi.Delivery{}, false
}

// saved stores w, active, with a new secret and answers it.
func (d *fakeDispatcher) saved(c echo.Context, ws string, w dispatcherapi.WebhookStatus) error {
	d.secrets++
	if d.statusAfterSave != nil {
		d.refusals["GET /admin/webhooks/"+ws] = d.statusAfterSave
	}
	w.Status, w.ConsecutiveFailures, w.PausedAt = "active", 0, nil
	d.webhooks[ws] = w
	public := dispatcherapi.Webhook{ID: w.ID, URL: w.URL, Status: w.Status, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt}
	return c.JSON(http.StatusOK, dispatcherapi.SavedWebhook{Webhook: public, Secret: fmt.Sprintf("whsec_fake_secret_%d", d.secrets)})
}

func (d *fakeDispatcher) putWebhook(c echo.Context) error {
	var in dispatcherapi.SaveWebhookRequest
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now().UTC().Format(time.RFC3339Nano)
	ws := rpc.WorkspaceID(c.Request().Context())
	return d.saved(c, ws, dispatcherapi.WebhookStatus{Webhook: dispatcherapi.Webhook{ID: "wh-" + ws, URL: in.URL, CreatedAt: now, UpdatedAt: now}})
}

func (d *fakeDispatcher) resave(c echo.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	w, ok := d.webhooks[c.Param("ws")]
	if !ok {
		return errs.NotFound("webhook_not_found", "no webhook is saved for this workspace")
	}
	w.UpdatedAt = "2026-11-24T05:00:00.5Z"
	return d.saved(c, c.Param("ws"), w)
}

func (d *fakeDispatcher) testEvent(c echo.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.webhooks[rpc.WorkspaceID(c.Request().Context())]; !ok {
		return errs.NotFound("webhook_not_found", "no webhook is saved for this workspace")
	}
	return c.JSON(http.StatusOK, map[string]any{"delivery": d.test})
}

// listDeliveries filters by status and event, starts before "before" and
// pages by limit (default 50), newest first.
func (d *fakeDispatcher) listDeliveries(c echo.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	limit := 50
	if l := c.QueryParam("limit"); l != "" {
		limit, _ = strconv.Atoi(l)
	}
	var before time.Time
	if b := c.QueryParam("before"); b != "" {
		var err error
		if before, err = time.Parse(time.RFC3339Nano, b); err != nil {
			return errs.InvalidRequest("before must be an RFC 3339 timestamp such as 2026-11-22T10:00:00Z")
		}
	}
	out := []dispatcherapi.Delivery{}
	var next *string
	for _, del := range d.deliveries[rpc.WorkspaceID(c.Request().Context())] {
		created, _ := time.Parse(time.RFC3339Nano, del.CreatedAt)
		if (c.QueryParam("status") != "" && del.Status != c.QueryParam("status")) ||
			(c.QueryParam("event") != "" && del.Event != c.QueryParam("event")) ||
			(!before.IsZero() && !created.Before(before)) {
			continue
		}
		if len(out) == limit {
			last := out[len(out)-1].CreatedAt
			next = &last
			break
		}
		out = append(out, del)
	}
	return c.JSON(http.StatusOK, dispatcherapi.DeliveryPage{Deliveries: out, NextBefore: next})
}

func (d *fakeDispatcher) replay(c echo.Context) error {
	var in dispatcherapi.ReplayRequest
	if err := httpx.BindJSON(c, &in); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if in.DeliveryID != nil {
		return d.replayOne(c, in)
	}
	if w, ok := d.webhooks[in.WorkspaceID]; ok && w.Status == "paused" {
		return errs.New(http.StatusConflict, "webhook_paused", "the webhook is paused; save it again (parleyctl webhook resave) before replaying")
	}
	out := dispatcherapi.Replay{ID: "replay-1", WorkspaceID: in.WorkspaceID, Since: in.Since, Until: in.Until, Event: in.Event, Queued: d.queued}
	return c.JSON(http.StatusAccepted, map[string]any{"replay": out, "next": nil})
}

// replayOne answers a replay of one delivery as the dispatcher does: the
// delivery must be in the log and not a test event's, the webhook active.
func (d *fakeDispatcher) replayOne(c echo.Context, in dispatcherapi.ReplayRequest) error {
	del, ok := d.find(in.WorkspaceID, *in.DeliveryID)
	switch {
	case !ok:
		return errs.NotFound("delivery_not_found", "the workspace's delivery log has no delivery with this id")
	case del.Event == dispatcherapi.EventTest:
		return errs.New(http.StatusConflict, "test_event_not_replayable", "test events are never stored in the event stream, so they cannot be replayed: send a new test event instead")
	case d.webhooks[in.WorkspaceID].Status == "paused":
		return errs.New(http.StatusConflict, "webhook_paused", "the webhook is paused; save it again (parleyctl webhook resave) before replaying")
	}
	until := del.CreatedAt
	out := dispatcherapi.Replay{ID: "replay-1", WorkspaceID: in.WorkspaceID, Since: del.CreatedAt, Until: &until,
		Event: &del.Event, DeliveryID: &del.ID, Queued: 1}
	return c.JSON(http.StatusAccepted, map[string]any{"replay": out, "next": nil})
}

// webhook gives workspace ws a webhook; a paused one paused at updatedAt
// after 20 failures.
func (d *fakeDispatcher) webhook(ws, status, updatedAt string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	w := dispatcherapi.WebhookStatus{Webhook: dispatcherapi.Webhook{ID: "wh-" + ws, URL: "https://hooks.example.com/parley", Status: status,
		CreatedAt: "2026-11-20T08:00:00Z", UpdatedAt: updatedAt}}
	if status == "paused" {
		w.ConsecutiveFailures, w.PausedAt = 20, &updatedAt
	}
	d.webhooks[ws] = w
}

// log sets workspace ws's delivery log, sorted newest first.
func (d *fakeDispatcher) log(ws string, ds ...dispatcherapi.Delivery) {
	d.mu.Lock()
	defer d.mu.Unlock()
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].CreatedAt > ds[j].CreatedAt })
	d.deliveries[ws] = ds
}

func (d *fakeDispatcher) refuse(route string, e *errs.Error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refusals[route] = e
}

// received returns the calls of "METHOD path".
func (d *fakeDispatcher) received(route string) []dispatcherCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []dispatcherCall
	for _, c := range d.calls {
		if c.method+" "+c.path == route {
			out = append(out, c)
		}
	}
	return out
}

func (d *fakeDispatcher) callCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.calls)
}

func hookInt(n int) *int               { return &n }
func hookStr(s string) *string         { return &s }
func shows(body, s string) bool        { return strings.Contains(body, s) }
func hookForm(token string) url.Values { return url.Values{"csrf_token": {token}} }

// hookDelivery is a delivery of the log created at created.
func hookDelivery(id, event, status, created string) dispatcherapi.Delivery {
	payload := fmt.Sprintf(`{"id":%q,"event":%q,"created_at":%q,"data":{"text":"<b>hi</b>"}}`, id, event, created)
	d := dispatcherapi.Delivery{ID: id, Event: event, Status: status, Attempts: 1, Payload: payload, CreatedAt: created}
	switch status {
	case dispatcherapi.DeliveryDelivered:
		d.ResponseStatus, d.DeliveredAt = hookInt(204), hookStr(created)
	case dispatcherapi.DeliveryFailed:
		d.Attempts, d.ResponseStatus, d.LastError = 4, hookInt(503), hookStr("receiver answered 503: upstream unavailable")
	}
	return d
}

// TestWebhookPageShowsStatusAndPause: no webhook says so; an active one
// shows its URL and status; a paused one when it paused, the newest failed
// customer delivery's code and error (not a newer failed test event's),
// and the re-save form.
func TestWebhookPageShowsStatusAndPause(t *testing.T) {
	t.Parallel()
	h, ws, b := signedInToAcme(t)
	page := "/workspaces/" + ws + "/webhook"

	r := b.get(page)
	if r.status != http.StatusOK || !shows(r.body, "No webhook is saved") || shows(r.body, "Send test event") {
		t.Fatalf("no webhook: %d %s", r.status, r.body)
	}

	h.dispatcher.webhook(ws, "active", "2026-11-24T04:00:00Z")
	r = b.get(page)
	if r.status != http.StatusOK || !shows(r.body, "<code>https://hooks.example.com/parley</code>") ||
		!shows(r.body, `status-active">active`) || shows(r.body, "Paused") || !shows(r.body, "Send test event") {
		t.Fatalf("active webhook: %d %s", r.status, r.body)
	}

	h.dispatcher.webhook(ws, "paused", "2026-11-24T04:30:00.25Z")
	h.dispatcher.mu.Lock()
	w := h.dispatcher.webhooks[ws]
	w.UpdatedAt = "2026-11-24T04:45:00Z" // paused since is paused_at, not the last update
	h.dispatcher.webhooks[ws] = w
	h.dispatcher.mu.Unlock()
	test := hookDelivery("d-test", "test", "failed", "2026-11-24T04:40:00Z")
	test.LastError = hookStr("a test event's error")
	h.dispatcher.log(ws, test,
		hookDelivery("d-new", "message.received", "failed", "2026-11-24T04:29:00Z"),
		hookDelivery("d-old", "message.received", "failed", "2026-11-24T04:00:00Z"))
	r = b.get(page)
	mustContain(t, r,
		`status-paused">paused`, "<h2 id=\"paused-heading\">Paused</h2>",
		`Since <time datetime="2026-11-24T04:30:00.25Z">`, "response code 503", html.EscapeString("receiver answered 503: upstream unavailable"),
		"paused after 20 failed deliveries in a row", "<dt>Failures</dt><dd>20 in a row</dd>",
		`/deliveries/d-new"`, `action="/workspaces/`+ws+`/webhook/resave"`,
	)
	if shows(r.body, "a test event&#39;s error") {
		t.Fatal("a test event is shown as the pause's reason")
	}
	calls := h.dispatcher.received("GET /v1/webhook/deliveries")
	if last := calls[len(calls)-1]; last.workspace != ws || last.query.Get("status") != "failed" {
		t.Fatalf("the pause's reason was read as %+v", last)
	}
}

// TestSaveWebhookShowsTheSecretOnce: the URL reaches the dispatcher as the
// workspace; the answer page shows the secret with the warning and is not
// cached; the page read again does not show it; a URL the dispatcher
// refuses is shown in words with what was typed; without the CSRF token
// nothing reaches the dispatcher.
func TestSaveWebhookShowsTheSecretOnce(t *testing.T) {
	t.Parallel()
	h, ws, b := signedInToAcme(t)
	page := "/workspaces/" + ws + "/webhook"
	token := b.pageCSRF(page)

	f := hookForm(token)
	f.Set("url", " https://hooks.example.com/new ")
	r := b.do(http.MethodPost, page, f, nil)
	if r.status != http.StatusOK || !shows(r.body, `<code id="secret" class="secret" aria-labelledby="secret-label">whsec_fake_secret_1</code>`) || !shows(r.body, "Shown only this once.") ||
		!shows(r.body, "Every save issues a new secret") || r.header.Get("Cache-Control") != "no-store" ||
		!shows(r.body, `data-copy="secret" hidden>Copy secret</button>`) {
		t.Fatalf("save = %d %q: %s", r.status, r.header.Get("Cache-Control"), r.body)
	}
	puts := h.dispatcher.received("PUT /v1/webhook")
	if len(puts) != 1 || puts[0].workspace != ws || puts[0].body != `{"url":"https://hooks.example.com/new"}` {
		t.Fatalf("the dispatcher got %+v", puts)
	}
	if r := b.get(page); shows(r.body, "whsec_") || !shows(r.body, "https://hooks.example.com/new") {
		t.Fatalf("the page read again: %s", r.body)
	}

	h.dispatcher.refuse("PUT /v1/webhook", errs.InvalidRequest("url must use https"))
	f.Set("url", "http://hooks.example.com/plain")
	r = b.do(http.MethodPost, page, f, nil)
	if r.status != http.StatusBadRequest || !shows(r.body, "Url must use https.") ||
		!shows(r.body, `value="http://hooks.example.com/plain"`) || shows(r.body, "whsec_") {
		t.Fatalf("refused url = %d: %s", r.status, r.body)
	}

	before := h.dispatcher.callCount()
	r = b.do(http.MethodPost, page, url.Values{"url": {"https://evil.example.com"}}, nil)
	if r.status != http.StatusForbidden || h.dispatcher.callCount() != before {
		t.Fatalf("save without a token = %d, dispatcher calls %d -> %d", r.status, before, h.dispatcher.callCount())
	}
}

// TestTestEventShowsItsDelivery: the button's answer shows the delivery's
// status, response code, duration and error; without a webhook, what to
// do.
func TestTestEventShowsItsDelivery(t *testing.T) {
	t.Parallel()
	h, ws, b := signedInToAcme(t)
	page := "/workspaces/" + ws + "/webhook"
	token := b.pageCSRF(page)

	r := b.do(http.MethodPost, page+"/test", hookForm(token), nil)
	if r.status != http.StatusNotFound || !shows(r.body, "Save a webhook URL on the webhook page first (no webhook is saved for this workspace).") {
		t.Fatalf("test without a webhook = %d: %s", r.status, r.body)
	}

	h.dispatcher.webhook(ws, "active", "2026-11-24T04:00:00Z")
	h.dispatcher.mu.Lock()
	h.dispatcher.test = hookDelivery("d-t1", "test", "delivered", "2026-11-24T04:10:00Z")
	h.dispatcher.mu.Unlock()
	r = b.do(http.MethodPost, page+"/test", hookForm(token), nil)
	if r.status != http.StatusOK {
		t.Fatalf("delivered test = %d: %s", r.status, r.body)
	}
	mustContain(t, r, `status-delivered">delivered`, "<dt>Response code</dt><dd>204</dd>", " ms (the console's wait for the attempt)</dd>", "<dt>Error</dt><dd>none</dd>")
	if calls := h.dispatcher.received("POST /v1/webhook/test"); len(calls) != 2 || calls[1].workspace != ws {
		t.Fatalf("test calls %+v", calls)
	}

	h.dispatcher.mu.Lock()
	h.dispatcher.test = dispatcherapi.Delivery{ID: "d-t2", Event: "test", Status: "failed", Attempts: 1,
		LastError: hookStr("connect: connection refused"), CreatedAt: "2026-11-24T04:11:00Z"}
	h.dispatcher.mu.Unlock()
	r = b.do(http.MethodPost, page+"/test", hookForm(token), nil)
	mustContain(t, r, `status-failed">failed`, "none (no answer)", "connect: connection refused")

	before := h.dispatcher.callCount()
	if r := b.do(http.MethodPost, page+"/test", url.Values{}, nil); r.status != http.StatusForbidden || h.dispatcher.callCount() != before {
		t.Fatalf("test without a token = %d", r.status)
	}
}

var replayOffer = regexp.MustCompile(`name="since" value="([^"]+)">\s*<input type="hidden" name="until" value="([^"]+)">`)

// TestResaveThenReplayThePausedPeriod: re-saving a paused webhook shows
// the new secret and offers the replay of pause to re-save, which reaches
// the dispatcher with those bounds and shows how many were queued; a
// replay while paused is refused in words.
func TestResaveThenReplayThePausedPeriod(t *testing.T) {
	t.Parallel()
	h, ws, b := signedInToAcme(t)
	page := "/workspaces/" + ws + "/webhook"
	h.dispatcher.webhook(ws, "paused", "2026-11-24T04:30:00.25Z")
	token := b.pageCSRF(page)

	f := hookForm(token)
	f.Set("since", "2026-11-24T04:00")
	r := b.do(http.MethodPost, "/workspaces/"+ws+"/deliveries/replay", f, nil)
	if r.status != http.StatusConflict || !shows(r.body, "The webhook is paused: save it again on the webhook page, then replay") {
		t.Fatalf("replay while paused = %d: %s", r.status, r.body)
	}

	if r := b.do(http.MethodPost, page+"/resave", url.Values{}, nil); r.status != http.StatusForbidden {
		t.Fatalf("resave without a token = %d", r.status)
	}
	if n := len(h.dispatcher.received("POST /admin/webhooks/" + ws + "/resave")); n != 0 {
		t.Fatalf("resave without a token reached the dispatcher %d times", n)
	}
	r = b.do(http.MethodPost, page+"/resave", hookForm(token), nil)
	if r.status != http.StatusOK || !shows(r.body, `<code id="secret" class="secret" aria-labelledby="secret-label">whsec_fake_secret_1</code>`) || !shows(r.body, `status-active">active`) {
		t.Fatalf("resave = %d: %s", r.status, r.body)
	}
	if n := len(h.dispatcher.received("POST /admin/webhooks/" + ws + "/resave")); n != 1 {
		t.Fatalf("resave reached the dispatcher %d times", n)
	}
	m := replayOffer.FindStringSubmatch(r.body)
	if m == nil || m[1] != "2026-11-24T04:30:00.25Z" || m[2] != "2026-11-24T05:00:00.5Z" {
		t.Fatalf("the replay offer is %q: %s", m, r.body)
	}

	offer := hookForm(token)
	offer.Set("since", m[1])
	offer.Set("until", m[2])
	r = b.do(http.MethodPost, "/workspaces/"+ws+"/deliveries/replay", offer, nil)
	if r.status != http.StatusOK || !shows(r.body, "Replay queued: 3 events will be delivered again") {
		t.Fatalf("replay of the paused period = %d: %s", r.status, r.body)
	}
	replays := h.dispatcher.received("POST /admin/replays")
	want := `{"workspace_id":"` + ws + `","since":"2026-11-24T04:30:00.25Z","until":"2026-11-24T05:00:00.5Z"}`
	if got := replays[len(replays)-1].body; got != want {
		t.Fatalf("replay body %s, want %s", got, want)
	}
}

// TestDeliveryLogFiltersAndPages: the rows, the filters passed to the
// dispatcher, "to" as the first cursor, "from" ending the walk, the older
// link keeping the filters, and bad filters in words.
func TestDeliveryLogFiltersAndPages(t *testing.T) {
	t.Parallel()
	h, ws, b := signedInToAcme(t)
	page := "/workspaces/" + ws + "/deliveries"
	var log []dispatcherapi.Delivery
	for i := range 60 {
		log = append(log, hookDelivery(fmt.Sprintf("d-%02d", i), "message.received", "delivered", fmt.Sprintf("2026-11-24T03:%02d:00Z", i)))
	}
	log = append(log, hookDelivery("d-failed", "message.received", "failed", "2026-11-24T04:01:00Z"))
	h.dispatcher.log(ws, log...)

	r := b.get(page)
	if r.status != http.StatusOK || !shows(r.body, `<td data-label="Response code">503</td>`) ||
		!shows(r.body, `/deliveries/d-failed"`) || shows(r.body, `d-09"`) {
		t.Fatalf("first page = %d: %s", r.status, r.body)
	}
	older := regexp.MustCompile(`<a href="([^"]+)" rel="next">`).FindStringSubmatch(r.body)
	if older == nil {
		t.Fatalf("no older link: %s", r.body)
	}
	r = b.get(html.UnescapeString(older[1]))
	if r.status != http.StatusOK || !shows(r.body, `d-09"`) || shows(r.body, `d-failed"`) {
		t.Fatalf("older page = %d: %s", r.status, r.body)
	}

	q := url.Values{"status": {"delivered"}, "event": {"message.received"}, "from": {"2026-11-24T03:10"}, "to": {"2026-11-24T03:20:00"}}
	r = b.get(page + "?" + q.Encode())
	last := h.dispatcher.received("GET /v1/webhook/deliveries")
	got := last[len(last)-1]
	if got.workspace != ws || got.query.Get("status") != "delivered" || got.query.Get("event") != "message.received" ||
		got.query.Get("before") != "2026-11-24T03:20:00Z" {
		t.Fatalf("the dispatcher was asked %+v", got)
	}
	for i := range 60 {
		if shown := shows(r.body, fmt.Sprintf("/deliveries/d-%02d\"", i)); shown != (i >= 10 && i < 20) {
			t.Fatalf("d-%02d shown %v between 03:10 and 03:20: %s", i, shown, r.body)
		}
	}
	if shows(r.body, `rel="next"`) || !shows(r.body, `<option value="delivered" selected>`) || !shows(r.body, `value="2026-11-24T03:10"`) {
		t.Fatalf("filtered page keeps no filters or pages on: %s", r.body)
	}

	if r := b.get(page + "?from=yesterday"); r.status != http.StatusBadRequest || !shows(r.body, "From must be a date and time (UTC) like 2026-11-24T10:00.") {
		t.Fatalf("bad from = %d: %s", r.status, r.body)
	}
	h.dispatcher.refuse("GET /v1/webhook/deliveries", errs.InvalidRequest("status must be one of pending, delivered, failed, skipped"))
	if r := b.get(page + "?status=lost"); r.status != http.StatusBadRequest || !shows(r.body, "Status must be one of pending, delivered, failed, skipped.") {
		t.Fatalf("bad status = %d: %s", r.status, r.body)
	}
}

// TestReplayTimeRange: the list's replay form reaches the dispatcher with
// its bounds (UTC) and event, and the page says how many were queued;
// a missing start is refused in words without a call; no token, no call.
func TestReplayTimeRange(t *testing.T) {
	t.Parallel()
	h, ws, b := signedInToAcme(t)
	h.dispatcher.webhook(ws, "active", "2026-11-24T04:00:00Z")
	action := "/workspaces/" + ws + "/deliveries/replay"
	token := b.pageCSRF("/workspaces/" + ws + "/deliveries")

	f := hookForm(token)
	f.Set("since", "2026-11-24T01:00")
	f.Set("until", "2026-11-24T02:30:15")
	f.Set("event", "message.received")
	h.dispatcher.mu.Lock()
	h.dispatcher.queued = 1
	h.dispatcher.mu.Unlock()
	r := b.do(http.MethodPost, action, f, nil)
	if r.status != http.StatusOK || !shows(r.body, "Replay queued: 1 event will be delivered again") || !shows(r.body, "(only <code>message.received</code>)") {
		t.Fatalf("replay = %d: %s", r.status, r.body)
	}
	replays := h.dispatcher.received("POST /admin/replays")
	want := `{"workspace_id":"` + ws + `","since":"2026-11-24T01:00:00Z","until":"2026-11-24T02:30:15Z","event":"message.received"}`
	if len(replays) != 1 || replays[0].body != want {
		t.Fatalf("replays %+v, want %s", replays, want)
	}

	r = b.do(http.MethodPost, action, hookForm(token), nil)
	if r.status != http.StatusBadRequest || !shows(r.body, "Since is required: the time the replay starts from.") {
		t.Fatalf("replay without since = %d: %s", r.status, r.body)
	}
	f.Del("csrf_token")
	if r := b.do(http.MethodPost, action, f, nil); r.status != http.StatusForbidden {
		t.Fatalf("replay without a token = %d", r.status)
	}
	if n := len(h.dispatcher.received("POST /admin/replays")); n != 1 {
		t.Fatalf("%d replays reached the dispatcher", n)
	}
}

// TestDeliveryPageAndReplayOfOne: a delivery's outcome, its attempts in a
// table (status code, duration and error in words) and its payload byte
// for byte, escaped, with the headers that sign it; its replay sends the
// delivery's id alone and says so; a test event is not offered a replay
// and one is refused in the dispatcher's words; an unknown or malformed
// delivery id is a 404 in words.
func TestDeliveryPageAndReplayOfOne(t *testing.T) {
	t.Parallel()
	h, ws, b := signedInToAcme(t)
	h.dispatcher.webhook(ws, "active", "2026-11-24T04:00:00Z")
	id, testID := uuid.NewString(), uuid.NewString()
	failed := hookDelivery(id, "message.received", "failed", "2026-11-24T04:01:00.123456Z")
	failed.Payload = `{"id":"` + id + `","event":"message.received","created_at":"2026-11-24T04:00:59.900Z","data":{"text":"<script>alert(1)</script>"}}`
	h.dispatcher.log(ws, failed, hookDelivery(uuid.NewString(), "message.received", "delivered", "2026-11-24T04:01:00.123456Z"),
		hookDelivery(testID, "test", "delivered", "2026-11-24T04:05:00Z"))
	h.dispatcher.mu.Lock()
	h.dispatcher.attempts[id] = []dispatcherapi.Attempt{
		{Number: 1, StartedAt: "2026-11-24T04:01:00.2Z", DurationMS: 10001.5, Error: hookStr("timeout after 10s")},
		{Number: 2, StartedAt: "2026-11-24T04:01:10.7Z", DurationMS: 12.25, ResponseStatus: hookInt(503), Error: hookStr("receiver answered 503: upstream unavailable")},
	}
	h.dispatcher.mu.Unlock()
	path := "/workspaces/" + ws + "/deliveries/" + id

	r := b.get(path)
	if r.status != http.StatusOK {
		t.Fatalf("delivery page = %d: %s", r.status, r.body)
	}
	mustContain(t, r,
		"<code>"+id+"</code>", `status-failed">failed`, "<dt>Attempts</dt><dd>4</dd>",
		"<dt>Last response code</dt><dd>503</dd>",
		`<th scope="row" data-label="Attempt">1</th>`, `<time datetime="2026-11-24T04:01:00.2Z">`,
		`<td data-label="Response code">none (no answer)</td>`, `<td data-label="Duration">10001.5 ms</td>`, `<td data-label="Error">timeout after 10s</td>`,
		`<th scope="row" data-label="Attempt">2</th>`, `<td data-label="Response code">503</td>`, `<td data-label="Duration">12.25 ms</td>`,
		`<td data-label="Error">`+html.EscapeString("receiver answered 503: upstream unavailable")+`</td>`,
		"<code>"+html.EscapeString(failed.Payload)+"</code>",
		"<code>X-Service-Signature</code>", "<code>X-Service-Timestamp</code>", "<code>timestamp.payload</code>",
		"Replay this delivery",
	)
	if shows(r.body, "<script>") {
		t.Fatal("the payload is not escaped")
	}
	if gets := h.dispatcher.received("GET /admin/webhooks/" + ws + "/deliveries/" + id); len(gets) != 1 || gets[0].workspace != "" {
		t.Fatalf("the delivery was read as %+v", gets)
	}

	token := b.pageCSRF(path)
	if r := b.do(http.MethodPost, path+"/replay", url.Values{}, nil); r.status != http.StatusForbidden {
		t.Fatalf("replay without a token = %d", r.status)
	}
	r = b.do(http.MethodPost, path+"/replay", hookForm(token), nil)
	if r.status != http.StatusOK || !shows(r.body, "Replay queued: this delivery's event, and only it, will be delivered again under its id") ||
		!shows(r.body, "<code>"+id+"</code>") {
		t.Fatalf("replay of one = %d: %s", r.status, r.body)
	}
	replays := h.dispatcher.received("POST /admin/replays")
	want := `{"workspace_id":"` + ws + `","delivery_id":"` + id + `"}`
	if len(replays) != 1 || replays[0].body != want {
		t.Fatalf("replays %+v, want %s", replays, want)
	}

	h.dispatcher.webhook(ws, "paused", "2026-11-24T04:30:00Z")
	r = b.do(http.MethodPost, path+"/replay", hookForm(token), nil)
	if r.status != http.StatusConflict || !shows(r.body, "The webhook is paused: save it again on the webhook page, then replay") || !shows(r.body, "<code>"+id+"</code>") {
		t.Fatalf("replay while paused = %d: %s", r.status, r.body)
	}

	test := "/workspaces/" + ws + "/deliveries/" + testID
	if r := b.get(test); r.status != http.StatusOK || shows(r.body, "Replay this delivery") || !shows(r.body, "cannot be replayed") {
		t.Fatalf("a test event's page = %d: %s", r.status, r.body)
	}
	if r := b.do(http.MethodPost, test+"/replay", hookForm(token), nil); r.status != http.StatusConflict ||
		!shows(r.body, "Send a new test event from the webhook page instead (test events are never stored in the event stream") {
		t.Fatalf("replay of a test event = %d: %s", r.status, r.body)
	}
	for _, missing := range []string{uuid.NewString(), "nope"} {
		if r := b.get("/workspaces/" + ws + "/deliveries/" + missing); r.status != http.StatusNotFound || !shows(r.body, "This workspace&#39;s delivery log has no such delivery") {
			t.Fatalf("an unknown delivery %s = %d: %s", missing, r.status, r.body)
		}
		if r := b.do(http.MethodPost, "/workspaces/"+ws+"/deliveries/"+missing+"/replay", hookForm(token), nil); r.status != http.StatusNotFound || !shows(r.body, "This workspace&#39;s delivery log has no such delivery") {
			t.Fatalf("replay of an unknown delivery %s = %d: %s", missing, r.status, r.body)
		}
	}
}

// TestWebhookPagesRefuseAnotherWorkspace: every webhook and delivery log
// page and action of another workspace is the 404 page, and nothing
// reaches the dispatcher.
func TestWebhookPagesRefuseAnotherWorkspace(t *testing.T) {
	t.Parallel()
	h, ws, b := signedInToAcme(t)
	other := h.workspace("Globex")
	h.dispatcher.webhook(other, "paused", "2026-11-24T04:00:00Z")
	h.dispatcher.log(other, hookDelivery("d-other", "message.received", "failed", "2026-11-24T04:01:00Z"))
	token := b.pageCSRF("/workspaces/" + ws + "/webhook")
	before := h.dispatcher.callCount()
	for _, route := range []struct{ method, path string }{
		{http.MethodGet, "/webhook"}, {http.MethodPost, "/webhook"}, {http.MethodPost, "/webhook/test"},
		{http.MethodPost, "/webhook/resave"}, {http.MethodGet, "/deliveries"}, {http.MethodPost, "/deliveries/replay"},
		{http.MethodGet, "/deliveries/d-other"}, {http.MethodPost, "/deliveries/d-other/replay"},
	} {
		f := url.Values{"csrf_token": {token}, "url": {"https://evil.example.com"}, "since": {"2026-11-24T00:00"}}
		if route.method == http.MethodGet {
			f = nil
		}
		r := b.do(route.method, "/workspaces/"+other+route.path, f, nil)
		if r.status != http.StatusNotFound || !shows(r.body, "Workspace not found.") || shows(r.body, "d-other") || shows(r.body, "Globex") {
			t.Fatalf("%s %s of another workspace = %d: %s", route.method, route.path, r.status, r.body)
		}
	}
	if after := h.dispatcher.callCount(); after != before {
		t.Fatalf("another workspace's pages reached the dispatcher %d times", after-before)
	}
}

// TestWebhookPagesWithTheDispatcherDown: a dispatcher that does not answer
// is said in words on each page.
// TestSecretShownWhenTheStateCannotBeReadAgain: a save or re-save that
// the dispatcher did, whose page could not read the webhook's state
// again, still shows its secret (it cannot be shown again), beside the
// refusal in words.
func TestSecretShownWhenTheStateCannotBeReadAgain(t *testing.T) {
	t.Parallel()
	h, ws, b := signedInToAcme(t)
	page := "/workspaces/" + ws + "/webhook"
	h.dispatcher.mu.Lock()
	h.dispatcher.statusAfterSave = errs.New(http.StatusServiceUnavailable, "unavailable", "webhook-dispatcher is not running")
	h.dispatcher.mu.Unlock()
	wantSecret := func(what string, r response, secret string) {
		t.Helper()
		if !shows(r.body, `<code id="secret" class="secret" aria-labelledby="secret-label">`+secret+`</code>`) ||
			!shows(r.body, "A service the console needs did not answer (webhook-dispatcher is not running). Try again in a moment.") ||
			r.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("%s = %d: %s", what, r.status, r.body)
		}
	}

	f := hookForm(b.pageCSRF(page))
	f.Set("url", "https://hooks.example.com/new")
	wantSecret("save", b.do(http.MethodPost, page, f, nil), "whsec_fake_secret_1")

	h.dispatcher.mu.Lock()
	delete(h.dispatcher.refusals, "GET /admin/webhooks/"+ws)
	h.dispatcher.mu.Unlock()
	f = hookForm(b.pageCSRF(page))
	wantSecret("re-save", b.do(http.MethodPost, page+"/resave", f, nil), "whsec_fake_secret_2")
}

func TestWebhookPagesWithTheDispatcherDown(t *testing.T) {
	t.Parallel()
	h, ws, b := signedInToAcme(t)
	id := uuid.NewString()
	down := errs.New(http.StatusServiceUnavailable, "unavailable", "webhook-dispatcher is not running")
	h.dispatcher.refuse("GET /admin/webhooks/"+ws, down)
	h.dispatcher.refuse("GET /v1/webhook/deliveries", down)
	h.dispatcher.refuse("GET /admin/webhooks/"+ws+"/deliveries/"+id, down)
	for _, path := range []string{"/webhook", "/deliveries", "/deliveries/" + id} {
		r := b.get("/workspaces/" + ws + path)
		if r.status != http.StatusServiceUnavailable || !shows(r.body, "A service the console needs did not answer (webhook-dispatcher is not running). Try again in a moment.") {
			t.Fatalf("GET %s = %d: %s", path, r.status, r.body)
		}
	}
}
