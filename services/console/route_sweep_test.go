package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
)

// changesUpstream counts the calls that change something which reached
// the fake services: keys created or revoked, channels created or their
// mode set, conversations changed or answered, webhooks, flows and
// documents written.
func (h *harness) changesUpstream() int {
	h.gateway.mu.Lock()
	n := len(h.gateway.keys.created) + len(h.gateway.keys.revoked)
	h.gateway.mu.Unlock()
	h.messaging.mu.Lock()
	n += len(h.messaging.created) + len(h.messaging.modes) + len(h.messaging.inbox.changes) + len(h.messaging.inbox.replies) +
		len(h.messaging.inbox.sentSuggestions)
	h.messaging.mu.Unlock()
	h.dispatcher.mu.Lock()
	for _, c := range h.dispatcher.calls {
		if c.method != http.MethodGet {
			n++
		}
	}
	h.dispatcher.mu.Unlock()
	for _, c := range h.flows.received() {
		if c.method != http.MethodGet {
			n++
		}
	}
	return n
}

// sweepPaths are the console's routes (but its static files, and the
// sign-in form, which has its own tests) with their parameters filled
// with ids of the workspace's own things, each named what name says, so
// that each would act if it were let through; change is the chat state
// change posted.
func sweepPaths(t *testing.T, h *harness, ws, name string) map[*routeKey]string {
	t.Helper()
	ch := h.messaging.channel(ws, "messenger", "page "+name, messagingapi.AIModeSuggest)
	conv := h.messaging.conversation(ws, ch, messagingapi.ConversationState{Conversation: messagingapi.Conversation{Contact: messagingapi.Contact{SenderID: "1", Name: "Ada " + name}},
		Tags: []string{"tag " + name}, Assignee: "ann@example.com"},
		messagingapi.Message{Sender: messagingapi.SenderContact, Type: "text", Content: "Hello " + name})
	h.messaging.suggest(conv, messagingapi.Suggestion{Messages: []messagingapi.OutboundMessage{{Type: "text", Text: "Hi " + name}}})
	ids := map[string]string{
		":id": ws, ":conv": conv, ":channel": ch.ID, ":change": "handover",
		":flowId": h.flows.addFlow(ws, "orders "+name, 1), ":docId": h.flows.addDocument(ws, "Returns "+name, 3),
		":key":        h.apiKey(ws, gatewayapi.APIKey{Name: "ci " + name, Prefix: "pk_live_ab12"}).ID,
		":deliveryId": uuid.NewString(), ":runId": uuid.NewString(),
	}
	out := map[*routeKey]string{}
	for _, r := range routes() {
		if strings.HasPrefix(r.Path, "/static") || r.Path == "/login" || r.Method == echo.RouteNotFound {
			continue
		}
		parts := strings.Split(r.Path, "/")
		for i, p := range parts {
			if strings.HasPrefix(p, ":") {
				id, ok := ids[p]
				if !ok {
					t.Fatalf("route %s %s: no id for %s in sweepPaths", r.Method, r.Path, p)
				}
				parts[i] = id
			}
		}
		out[&routeKey{method: r.Method, path: r.Path}] = strings.Join(parts, "/")
	}
	return out
}

type routeKey struct{ method, path string }

// TestEveryRouteRefusedUnheard: every page and action of the console,
// its parameters naming the workspace's own things, is refused and
// changes nothing when the request lacks what it needs: without a
// session, or with an expired one, it is sent to sign in (303 /login);
// an action without the page's csrf_token, or from another origin, is 403
// in words; a method the route does not take is an error page (405, or
// inside a workspace 404 as any page it does not have). Nothing reaches a
// service that would change anything.
func TestEveryRouteRefusedUnheard(t *testing.T) {
	t.Parallel()
	h, ws, b := signedInToAcme(t)
	paths := sweepPaths(t, h, ws, "plain")
	token := b.pageCSRF("/workspaces/" + ws)
	form := func(extra url.Values) url.Values {
		f := url.Values{"csrf_token": {token}, "text": {"sent anyway"}, "tags": {"x"}, "me": {"1"}, "name": {"ci"}, "url": {"https://hooks.example/x"}}
		for k, v := range extra {
			f[k] = v
		}
		return f
	}
	taken := map[string]bool{}
	for r := range paths {
		taken[r.method+" "+r.path] = true
	}
	other := h.browser(t)
	other.mustSignIn("ann@example.com")
	anonymous, another := h.browser(t), other.pageCSRF("/workspaces/"+ws)
	for r, p := range paths {
		if resp := anonymous.do(r.method, p, form(nil), nil); resp.status != http.StatusSeeOther || resp.location() != "/login" {
			t.Errorf("%s %s without a session = %d %q", r.method, p, resp.status, resp.location())
		}
		if r.method != http.MethodGet {
			for what, f := range map[string]url.Values{"no token": {"text": {"x"}}, "another's token": form(url.Values{"csrf_token": {another}})} {
				if resp := b.do(r.method, p, f, nil); resp.status != http.StatusForbidden || !strings.Contains(resp.body, "out of date or came from another site") {
					t.Errorf("%s %s with %s = %d: %.300s", r.method, p, what, resp.status, resp.body)
				}
			}
			if resp := b.do(r.method, p, form(nil), map[string]string{"Origin": "https://evil.example"}); resp.status != http.StatusForbidden {
				t.Errorf("%s %s from another origin = %d: %.300s", r.method, p, resp.status, resp.body)
			}
		}
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if taken[m+" "+r.path] {
				continue
			}
			// 405 outside a workspace; inside one, the workspace's
			// no-such-page 404, or 403 for a DELETE, whose body (and so
			// its token) is never read.
			want := http.StatusMethodNotAllowed
			switch {
			case strings.HasPrefix(r.path, "/workspaces/:id") && m == http.MethodDelete:
				want = http.StatusForbidden
			case strings.HasPrefix(r.path, "/workspaces/:id"):
				want = http.StatusNotFound
			}
			if resp := b.do(m, p, form(nil), nil); resp.status != want || !strings.HasPrefix(resp.header.Get("Content-Type"), "text/html") {
				t.Errorf("%s %s (the route takes %s) = %d, want %d: %.300s", m, p, r.method, resp.status, want, resp.body)
			}
		}
	}
	if n := h.changesUpstream(); n != 0 {
		t.Fatalf("%d changes reached the services from refused requests", n)
	}

	// Idle past the session's TTL: every route sends to sign in.
	h.clock.advance(2 * defaults().idleTTL)
	for r, p := range paths {
		if resp := b.do(r.method, p, form(nil), nil); resp.status != http.StatusSeeOther || resp.location() != "/login" {
			t.Errorf("%s %s with an expired session = %d %q", r.method, p, resp.status, resp.location())
		}
	}
	if n := h.changesUpstream(); n != 0 {
		t.Fatalf("%d changes reached the services from an expired session", n)
	}
}

// TestEveryPageEscapesNames: what customers, platforms and operators name
// (the workspace, a channel's page id, a contact, its messages and tags,
// the AI's draft, a flow, a document, an API key) is drawn as text on
// every page that shows it, never as HTML.
func TestEveryPageEscapesNames(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaults())
	ws := h.workspace("Acme " + hostile)
	h.operator(t, "ann@example.com", ws)
	b := h.browser(t)
	b.mustSignIn("ann@example.com")
	h.operator(t, "root@example.com", "")
	root := h.browser(t)
	root.mustSignIn("root@example.com")
	paths := sweepPaths(t, h, ws, hostile)
	pages := map[string]*browser{}
	for r, p := range paths {
		if r.method == http.MethodGet && !strings.HasSuffix(r.path, "/events") {
			pages[p] = b
		}
	}
	for _, extra := range []string{"/keys?revoke=" + strings.Split(paths[keyOf(t, paths, "/workspaces/:id/keys/:key/revoke")], "/")[4],
		"/conversations/" + strings.Split(paths[keyOf(t, paths, "/workspaces/:id/conversations/:conv")], "/")[4] + "?edit=1"} {
		pages["/workspaces/"+ws+extra] = b
	}
	pages["/workspaces"] = root // the list of every workspace
	escaped := "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;"
	for p, br := range pages {
		r := br.get(p)
		if r.status >= 500 {
			t.Errorf("GET %s = %d", p, r.status)
		}
		for _, raw := range []string{"<script>alert", "<b>bold"} {
			if strings.Contains(r.body, raw) {
				t.Errorf("GET %s draws %q as HTML:\n%s", p, raw, r.body)
			}
		}
		// Every page drawn (but the webhook's two, which name nothing of
		// this) shows some name, escaped.
		if r.status < 300 && !strings.HasSuffix(p, "/webhook") && !strings.HasSuffix(p, "/deliveries") && !strings.Contains(r.body, escaped) {
			t.Errorf("GET %s = %d shows no name escaped: the test names nothing it draws:\n%s", p, r.status, r.body)
		}
	}
}

// keyOf is the key of paths for the route with path.
func keyOf(t *testing.T, paths map[*routeKey]string, path string) *routeKey {
	t.Helper()
	for r := range paths {
		if r.path == path {
			return r
		}
	}
	t.Fatalf("no route %s", path)
	return nil
}
