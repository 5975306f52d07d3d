package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/errs"
)

// TestPlatformOperatorAndAnIDThatIsNoWorkspace: a platform operator sees
// every workspace, so only the id's shape tells that /workspaces/not-a-uuid
// names none. Every page and action under it is the console's own 404
// page, and no call reaches a service: each would refuse the id in its
// own words.
func TestPlatformOperatorAndAnIDThatIsNoWorkspace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaults())
	h.operator(t, "root@example.com", "")
	b := h.browser(t)
	b.mustSignIn("root@example.com")
	token := b.pageCSRF("/workspaces")

	// A call that reached a fake would answer this instead of a 404.
	reached := errs.New(http.StatusInternalServerError, "reached", "a service was asked about not-a-uuid")
	h.gateway.mu.Lock()
	h.gateway.refusals["not-a-uuid"] = reached
	h.gateway.keys.refusal = reached
	h.gateway.mu.Unlock()
	h.messaging.mu.Lock()
	h.messaging.refusal = reached
	h.messaging.mu.Unlock()
	dispatcherCalls, flowCalls := h.dispatcher.callCount(), len(h.flows.received())

	routes := h.workspaceRoutes()
	if len(routes) == 0 {
		t.Fatal("no route under /workspaces/:id")
	}
	for _, route := range routes {
		var form url.Values
		if route.Method != http.MethodGet {
			// Filled in, so no form check answers before the workspace's.
			form = url.Values{"csrf_token": {token}, "name": {"ci"}, "ai_mode": {"suggest"}, "kind": {"telegram"},
				"url": {"https://hooks.example.com"}, "since": {"2026-11-24T00:00"}, "title": {"T"}, "markdown": {"# T"}, "document": {"{}"}}
		}
		path := strings.Replace(route.Path, ":id", "not-a-uuid", 1)
		r := b.do(route.Method, path, form, nil)
		if r.status != http.StatusNotFound || !strings.Contains(r.body, "Workspace not found.") {
			t.Fatalf("%s %s = %d, want the 404 page: %s", route.Method, path, r.status, r.body)
		}
	}
	h.messaging.mu.Lock()
	created, modes := len(h.messaging.created), len(h.messaging.modes)
	h.messaging.mu.Unlock()
	h.gateway.mu.Lock()
	keysCreated := len(h.gateway.keys.created)
	h.gateway.mu.Unlock()
	if created+modes+keysCreated != 0 || h.dispatcher.callCount() != dispatcherCalls || len(h.flows.received()) != flowCalls {
		t.Fatalf("an id that is no workspace reached a service: messaging %d creates %d modes, gateway %d keys, dispatcher %d calls, flow-runner %d calls",
			created, modes, keysCreated, h.dispatcher.callCount()-dispatcherCalls, len(h.flows.received())-flowCalls)
	}
}

// workspaceRoutes are the console's pages and actions under
// /workspaces/:id.
func (h *harness) workspaceRoutes() []*echo.Route {
	var out []*echo.Route
	for _, route := range routes() {
		if strings.HasPrefix(route.Path, "/workspaces/:id") && route.Method != echoRouteNotFound {
			out = append(out, route)
		}
	}
	return out
}

// TestResaveReadsThePauseOnce: a re-save of a paused webhook reads its
// status for the pause's time and the page reads the webhook as it now
// is; the failed deliveries (the reason a paused page shows) are not read,
// since the re-saved webhook is active.
func TestResaveReadsThePauseOnce(t *testing.T) {
	t.Parallel()
	h, ws, b := signedInToAcme(t)
	h.dispatcher.webhook(ws, "paused", "2026-11-24T04:30:00.25Z")
	h.dispatcher.log(ws, hookDelivery("d-failed", "message.received", "failed", "2026-11-24T04:29:00Z"))
	token := b.pageCSRF("/workspaces/" + ws + "/webhook")
	statuses, lists := len(h.dispatcher.received("GET /admin/webhooks/"+ws)), len(h.dispatcher.received("GET /v1/webhook/deliveries"))

	r := b.do(http.MethodPost, "/workspaces/"+ws+"/webhook/resave", hookForm(token), nil)
	if r.status != http.StatusOK || !shows(r.body, `<input type="hidden" name="since" value="2026-11-24T04:30:00.25Z">`) {
		t.Fatalf("resave = %d: %s", r.status, r.body)
	}
	if n := len(h.dispatcher.received("GET /admin/webhooks/"+ws)) - statuses; n != 2 {
		t.Fatalf("the re-save read the webhook's status %d times, want 2 (before the re-save, and for the page)", n)
	}
	if n := len(h.dispatcher.received("GET /v1/webhook/deliveries")) - lists; n != 0 {
		t.Fatalf("the re-save read the delivery log %d times", n)
	}
}

// TestRefusedReplayWithTheLogUnreadable: a replay the dispatcher refuses
// is said above the log; when the log cannot be read either, the page
// does not claim that no delivery matches.
func TestRefusedReplayWithTheLogUnreadable(t *testing.T) {
	t.Parallel()
	h, ws, b := signedInToAcme(t)
	h.dispatcher.webhook(ws, "active", "2026-11-24T04:00:00Z")
	token := b.pageCSRF("/workspaces/" + ws + "/deliveries")
	h.dispatcher.refuse("POST /admin/replays", errs.New(http.StatusTooManyRequests, errs.CodeRateLimited, "too many replays; retry in 3 s"))
	h.dispatcher.refuse("GET /v1/webhook/deliveries", errs.New(http.StatusServiceUnavailable, "unavailable", "webhook-dispatcher is not running"))
	f := hookForm(token)
	f.Set("since", "2026-11-24T04:00")
	r := b.do(http.MethodPost, "/workspaces/"+ws+"/deliveries/replay", f, nil)
	if r.status != http.StatusTooManyRequests || !shows(r.body, "Too many replays; retry in 3 s.") || shows(r.body, "No deliveries match.") {
		t.Fatalf("a refused replay with the log unreadable = %d: %s", r.status, r.body)
	}
}

// TestReplayOfAnEventTheStreamNoLongerHas: the dispatcher's
// event_not_in_stream is said with what it means for the operator.
func TestReplayOfAnEventTheStreamNoLongerHas(t *testing.T) {
	t.Parallel()
	h, ws, b := signedInToAcme(t)
	h.dispatcher.webhook(ws, "active", "2026-11-24T04:00:00Z")
	id := uuid.NewString()
	h.dispatcher.log(ws, hookDelivery(id, "message.received", "failed", "2026-11-01T04:00:00Z"))
	path := "/workspaces/" + ws + "/deliveries/" + id
	token := b.pageCSRF(path)
	h.dispatcher.refuse("POST /admin/replays", errs.NotFound("event_not_in_stream", "the event is no longer in the event stream"))
	r := b.do(http.MethodPost, path+"/replay", hookForm(token), nil)
	if r.status != http.StatusNotFound ||
		!shows(r.body, "The event stream keeps events for a set period only and no longer has this one, so it can no longer be sent again (the event is no longer in the event stream).") ||
		!shows(r.body, "<code>"+id+"</code>") {
		t.Fatalf("replay of an event the stream no longer has = %d: %s", r.status, r.body)
	}
}

// TestBodyOverTheLimit: a form of more than 4 MiB is refused with the 413
// page before any handler reads it, and nothing is published.
func TestBodyOverTheLimit(t *testing.T) {
	t.Parallel()
	s := newFlowsSetup(t)
	form := url.Values{"csrf_token": {s.csr}}
	prefix := form.Encode() + "&document="
	form.Set("document", strings.Repeat("x", 4<<20+1-len(prefix)))
	if n := len(form.Encode()); n != 4<<20+1 {
		t.Fatalf("the body is %d bytes", n)
	}
	r := s.b.do(http.MethodPost, "/workspaces/"+s.ws+"/flows", form, nil)
	if r.status != http.StatusRequestEntityTooLarge || !shows(r.body, "<h1>Request Entity Too Large</h1>") ||
		!shows(r.body, `role="alert">Request body too large.</p>`) {
		t.Fatalf("a body of 4 MiB + 1 = %d: %.500s", r.status, r.body)
	}
	if s.fr.receivedAny(http.MethodPost, "/admin/workspaces/"+s.ws+"/flows") {
		t.Fatal("a body over the limit was published")
	}
}
