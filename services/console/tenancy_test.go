package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/errs"
)

// TestWorkspaceOperatorSeesOnlyItsWorkspace: every page and action under
// /workspaces/{id} answers another workspace exactly as it answers one
// that does not exist (404, same page), so ids are not confirmed; its own
// workspace is served; the list of every workspace sends it home.
func TestWorkspaceOperatorSeesOnlyItsWorkspace(t *testing.T) {
	t.Parallel()
	h, own, b := signedInToAcme(t)
	other := h.workspace("Globex")
	token := b.pageCSRF("/workspaces/" + own)

	var checked int
	for _, route := range routes() {
		if !strings.HasPrefix(route.Path, "/workspaces/:id") || route.Method == echoRouteNotFound {
			continue
		}
		checked++
		var form url.Values
		if route.Method != http.MethodGet {
			form = url.Values{"csrf_token": {token}}
		}
		var pages []string
		for _, id := range []string{other, uuid.NewString(), "not-a-uuid"} {
			path := strings.Replace(route.Path, ":id", id, 1)
			r := b.do(route.Method, path, form, nil)
			if r.status != http.StatusNotFound {
				t.Fatalf("%s %s = %d, want 404: %s", route.Method, path, r.status, r.body)
			}
			if strings.Contains(r.body, "Globex") {
				t.Fatalf("%s %s shows the other workspace", route.Method, path)
			}
			pages = append(pages, strings.ReplaceAll(r.body, id, "ID"))
		}
		if pages[0] != pages[1] || pages[1] != pages[2] {
			t.Fatalf("%s %s: another workspace's page differs from a missing one's:\n%s\n---\n%s", route.Method, route.Path, pages[0], pages[1])
		}
		// A page of one item (a delivery, a run) names an item that is not
		// there, which is its own 404; its pages' tests read real ones.
		// The inbox's event stream does not end: it is read in its own
		// test.
		if ownPath := strings.Replace(route.Path, ":id", own, 1); route.Method == http.MethodGet && !strings.Contains(ownPath, ":") && !strings.HasSuffix(ownPath, "/events") {
			if r := b.get(ownPath); r.status != http.StatusOK {
				t.Fatalf("GET %s of its own workspace = %d", route.Path, r.status)
			}
		}
	}
	// A path no route serves yet is refused the same way.
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		var form url.Values
		if method == http.MethodPost {
			form = url.Values{"csrf_token": {token}}
		}
		if r := b.do(method, "/workspaces/"+other+"/api-keys", form, nil); r.status != http.StatusNotFound || strings.Contains(r.body, "Globex") {
			t.Fatalf("%s under another workspace = %d", method, r.status)
		}
	}
	if checked == 0 {
		t.Fatal("no route under /workspaces/:id")
	}
	if r := b.get("/workspaces"); r.status != http.StatusSeeOther || r.location() != "/workspaces/"+own {
		t.Fatalf("GET /workspaces = %d %q, want its own workspace", r.status, r.location())
	}
}

// echoRouteNotFound is the method echo lists its groups' catch-all routes
// under.
const echoRouteNotFound = "echo_route_not_found"

// TestPlatformOperatorSeesEveryWorkspace: the list links every workspace,
// and each one's page opens.
func TestPlatformOperatorSeesEveryWorkspace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaults())
	ids := map[string]string{"Acme": h.workspace("Acme"), "Globex": h.workspace("Globex")}
	h.operator(t, "root@example.com", "")
	b := h.browser(t)
	b.mustSignIn("root@example.com")
	if r := b.get("/"); r.status != http.StatusSeeOther || r.location() != "/workspaces" {
		t.Fatalf("GET / = %d %q", r.status, r.location())
	}
	list := b.get("/workspaces")
	if list.status != http.StatusOK {
		t.Fatalf("GET /workspaces = %d", list.status)
	}
	for name, id := range ids {
		if !strings.Contains(list.body, `<a href="/workspaces/`+id+`">`+name+`</a>`) {
			t.Fatalf("the list lacks a link to %s: %s", name, list.body)
		}
		if r := b.get("/workspaces/" + id); r.status != http.StatusOK || !strings.Contains(r.body, "<h1>"+name+"</h1>") {
			t.Fatalf("GET %s's page = %d", name, r.status)
		}
	}
	if r := b.get("/workspaces/" + uuid.NewString()); r.status != http.StatusNotFound || !strings.Contains(r.body, "Workspace not found.") {
		t.Fatalf("a missing workspace = %d: %s", r.status, r.body)
	}
}

// TestServiceErrorsInWords: what the gateway answers, or its silence, is
// said on the page with the status, never a bare 500.
func TestServiceErrorsInWords(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaults())
	busy := h.workspace("Busy")
	h.gateway.mu.Lock()
	h.gateway.refusals[busy] = errs.New(http.StatusTooManyRequests, errs.CodeRateLimited, "too many admin calls; retry in 3 s")
	h.gateway.mu.Unlock()
	h.operator(t, "root@example.com", "")
	b := h.browser(t)
	b.mustSignIn("root@example.com")
	r := b.get("/workspaces/" + busy)
	if r.status != http.StatusTooManyRequests || !strings.Contains(r.body, "Too many admin calls; retry in 3 s.") {
		t.Fatalf("a refused workspace = %d: %s", r.status, r.body)
	}
	if !strings.Contains(r.body, "Sign out") {
		t.Fatal("the error is not drawn inside the console's page")
	}

	down := defaults()
	down.withoutGateway = true
	h2 := newHarness(t, down)
	h2.operator(t, "root@example.com", "")
	b2 := h2.browser(t)
	b2.mustSignIn("root@example.com")
	for _, path := range []string{"/workspaces", "/workspaces/" + uuid.NewString()} {
		r := b2.get(path)
		if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "A service the console needs did not answer (gateway is not running") {
			t.Fatalf("GET %s with the gateway down = %d: %s", path, r.status, r.body)
		}
	}
	if r := b2.get("/no/such/page"); r.status != http.StatusNotFound || !strings.Contains(r.body, "There is no such page.") {
		t.Fatalf("an unknown page = %d: %s", r.status, r.body)
	}
}
