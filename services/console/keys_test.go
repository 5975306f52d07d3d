package main

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/pkg/errs"
)

// TestAPIKeysList: the page lists the workspace's keys with name, prefix,
// created, last used and revoked, and offers a revoke for active keys
// only.
func TestAPIKeysList(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaults())
	own := h.workspace("Acme")
	used := "2026-11-24T04:05:00Z"
	revokedAt := "2026-11-24T04:06:00Z"
	active := h.apiKey(own, gatewayapi.APIKey{Name: "production", Prefix: "pk_live_ab12", CreatedAt: "2026-11-20T10:00:00Z", LastUsedAt: &used})
	gone := h.apiKey(own, gatewayapi.APIKey{Name: "old laptop", Prefix: "pk_live_cd34", CreatedAt: "2026-11-01T09:30:00Z", RevokedAt: &revokedAt})
	h.operator(t, "ann@example.com", own)
	b := h.browser(t)
	b.mustSignIn("ann@example.com")

	r := b.get("/workspaces/" + own + "/keys")
	if r.status != http.StatusOK {
		t.Fatalf("GET keys = %d: %s", r.status, r.body)
	}
	for _, want := range []string{
		"<h1>API keys</h1>", "production", "<code>pk_live_ab12…</code>", "2026-11-20 10:00 UTC", "2026-11-24 04:05 UTC", "Active",
		"old laptop", "<code>pk_live_cd34…</code>", "Never", "2026-11-24 04:06 UTC",
		`href="/workspaces/` + own + `/keys?revoke=` + active.ID + `#confirm-revoke"`,
		`<label for="key-name">Name</label>`, `aria-current="page">API keys</a>`,
	} {
		if !strings.Contains(r.body, want) {
			t.Fatalf("the keys page lacks %q: %s", want, r.body)
		}
	}
	if strings.Contains(r.body, "revoke="+gone.ID) {
		t.Fatal("a revoked key is offered for revoking")
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("Cache-Control = %q", r.header.Get("Cache-Control"))
	}

	// A platform operator on a workspace the gateway does not have: the
	// missing workspace's 404, not an empty list.
	h.operator(t, "root@example.com", "")
	root := h.browser(t)
	root.mustSignIn("root@example.com")
	if r := root.get("/workspaces/22222222-2222-2222-2222-222222222222/keys"); r.status != http.StatusNotFound || !strings.Contains(r.body, "Workspace not found.") {
		t.Fatalf("the keys of a missing workspace = %d: %s", r.status, r.body)
	}
}

var shownKey = regexp.MustCompile(`<code id="new-key" class="secret"[^>]*>(pk_live_[0-9a-f]+)</code>`)

// TestAPIKeyCreate: the name reaches the gateway and the key is shown on
// the answer to the post, once, with the warning and a copy button that
// exists only with the script; the list afterwards has the key's name and
// never the key.
func TestAPIKeyCreate(t *testing.T) {
	t.Parallel()
	h, own, b := signedInToAcme(t)
	token := b.pageCSRF("/workspaces/" + own + "/keys")

	r := b.do(http.MethodPost, "/workspaces/"+own+"/keys", url.Values{"csrf_token": {token}, "name": {"  ci  "}}, nil)
	if r.status != http.StatusCreated {
		t.Fatalf("create = %d: %s", r.status, r.body)
	}
	m := shownKey.FindStringSubmatch(r.body)
	if m == nil {
		t.Fatalf("the key is not shown: %s", r.body)
	}
	for _, want := range []string{"Store it now: it will not be shown again.", `<button type="button" class="copy" data-copy="new-key" hidden>Copy key</button>`,
		`<script src="/static/copy.js" defer></script>`, `role="status"`, "<strong>ci</strong>"} {
		if !strings.Contains(r.body, want) {
			t.Fatalf("the created page lacks %q: %s", want, r.body)
		}
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("the key's page may be cached: Cache-Control %q", r.header.Get("Cache-Control"))
	}
	h.gateway.mu.Lock()
	created := append([]string(nil), h.gateway.keys.created...)
	h.gateway.mu.Unlock()
	if len(created) != 1 || created[0] != "ci" {
		t.Fatalf("the gateway got names %q, want [ci]", created)
	}
	list := b.get("/workspaces/" + own + "/keys")
	if !strings.Contains(list.body, ">ci</th>") || strings.Contains(list.body, m[1]) {
		t.Fatalf("the list after creating (want the name, never the key): %s", list.body)
	}

	js := b.get("/static/copy.js")
	if js.status != http.StatusOK || !strings.Contains(js.header.Get("Content-Type"), "javascript") || !strings.Contains(js.body, "data-copy") {
		t.Fatalf("GET /static/copy.js = %d %q", js.status, js.header.Get("Content-Type"))
	}
}

// TestAPIKeyCreateRefused: a key without a name is refused beside the
// field before the gateway is asked; the gateway's refusal of the name is
// drawn beside the field too, and any other refusal in words with its
// status.
func TestAPIKeyCreateRefused(t *testing.T) {
	t.Parallel()
	h, own, b := signedInToAcme(t)
	token := b.pageCSRF("/workspaces/" + own + "/keys")
	post := func(name string) response {
		return b.do(http.MethodPost, "/workspaces/"+own+"/keys", url.Values{"csrf_token": {token}, "name": {name}}, nil)
	}

	r := post("   ")
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, `<span class="field-error" id="key-name-error">Give the key a name`) ||
		!strings.Contains(r.body, `aria-invalid="true"`) || !strings.Contains(r.body, "The key was not created: it needs a name.") {
		t.Fatalf("a key without a name = %d: %s", r.status, r.body)
	}
	long := strings.Repeat("n", 101)
	r = post(long)
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, `id="key-name-error">name must be at most 100 characters.</span>`) ||
		!strings.Contains(r.body, `value="`+long+`"`) {
		t.Fatalf("a name the gateway refuses = %d: %s", r.status, r.body)
	}
	h.gateway.mu.Lock()
	if n := len(h.gateway.keys.created); n != 1 {
		h.gateway.mu.Unlock()
		t.Fatalf("%d creates reached the gateway, want only the long name's", n)
	}
	h.gateway.keys.refusal = errs.New(http.StatusTooManyRequests, errs.CodeRateLimited, "too many admin calls; retry in 3 s")
	h.gateway.mu.Unlock()
	r = post("ci")
	if r.status != http.StatusTooManyRequests || !strings.Contains(r.body, "Too many admin calls; retry in 3 s.") || shownKey.MatchString(r.body) {
		t.Fatalf("a refused create = %d: %s", r.status, r.body)
	}
}

// TestAPIKeyRevoke: the revoke asks first (a page of its own, no script),
// then the post reaches the gateway with the key's id and the list says
// the key is revoked.
func TestAPIKeyRevoke(t *testing.T) {
	t.Parallel()
	h, own, b := signedInToAcme(t)
	key := h.apiKey(own, gatewayapi.APIKey{Name: "ci", Prefix: "pk_live_ab12", CreatedAt: "2026-11-20T10:00:00Z"})

	confirm := b.get("/workspaces/" + own + "/keys?revoke=" + key.ID)
	action := `action="/workspaces/` + own + `/keys/` + key.ID + `/revoke"`
	if confirm.status != http.StatusOK || !strings.Contains(confirm.body, "Revoke key “ci” (pk_live_ab12…)?") || !strings.Contains(confirm.body, action) {
		t.Fatalf("the confirmation = %d: %s", confirm.status, confirm.body)
	}
	if r := b.get("/workspaces/" + own + "/keys?revoke=no-such-key"); r.status != http.StatusNotFound || !strings.Contains(r.body, "There is no active API key with this id") {
		t.Fatalf("confirming a key that is not there = %d: %s", r.status, r.body)
	}
	h.gateway.mu.Lock()
	revoked := len(h.gateway.keys.revoked)
	h.gateway.mu.Unlock()
	if revoked != 0 {
		t.Fatal("asking to confirm revoked the key")
	}

	r := b.do(http.MethodPost, "/workspaces/"+own+"/keys/"+key.ID+"/revoke", url.Values{"csrf_token": {csrf(t, confirm)}}, nil)
	if r.status != http.StatusSeeOther || r.location() != "/workspaces/"+own+"/keys?revoked="+key.ID {
		t.Fatalf("revoke = %d %q: %s", r.status, r.location(), r.body)
	}
	h.gateway.mu.Lock()
	got := append([]string(nil), h.gateway.keys.revoked...)
	h.gateway.mu.Unlock()
	if len(got) != 1 || got[0] != key.ID {
		t.Fatalf("the gateway revoked %q, want [%s]", got, key.ID)
	}
	list := b.get(r.location())
	if list.status != http.StatusOK || !strings.Contains(list.body, "Key “ci” (pk_live_ab12…) is revoked: requests made with it are refused from now on.") ||
		strings.Contains(list.body, "revoke="+key.ID) {
		t.Fatalf("the list after revoking = %d: %s", list.status, list.body)
	}

	// A refusal is said in words on the list.
	h.gateway.mu.Lock()
	h.gateway.keys.refusal = errs.New(http.StatusServiceUnavailable, errs.CodeServiceUnavailable, "the database is not answering")
	h.gateway.mu.Unlock()
	r = b.do(http.MethodPost, "/workspaces/"+own+"/keys/"+key.ID+"/revoke", url.Values{"csrf_token": {csrf(t, confirm)}}, nil)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "the database is not answering") || !strings.Contains(r.body, "Sign out") {
		t.Fatalf("a revoke the gateway cannot answer = %d: %s", r.status, r.body)
	}
}

// TestAPIKeyActionsRefused: without the CSRF token nothing reaches the
// gateway; another workspace's key is not revoked from one's own
// workspace (404, as a key that does not exist), and another workspace's
// pages and actions are 404.
func TestAPIKeyActionsRefused(t *testing.T) {
	t.Parallel()
	h, own, b := signedInToAcme(t)
	other := h.workspace("Globex")
	theirs := h.apiKey(other, gatewayapi.APIKey{Name: "globex ci", Prefix: "pk_live_ef56", CreatedAt: "2026-11-20T10:00:00Z"})
	token := b.pageCSRF("/workspaces/" + own + "/keys")

	for _, path := range []string{"/workspaces/" + own + "/keys", "/workspaces/" + own + "/keys/" + theirs.ID + "/revoke"} {
		if r := b.do(http.MethodPost, path, url.Values{"name": {"ci"}}, nil); r.status != http.StatusForbidden || !strings.Contains(r.body, "This form is out of date") {
			t.Fatalf("POST %s without a token = %d: %s", path, r.status, r.body)
		}
	}
	r := b.do(http.MethodPost, "/workspaces/"+own+"/keys/"+theirs.ID+"/revoke", url.Values{"csrf_token": {token}}, nil)
	if r.status != http.StatusNotFound || !strings.Contains(r.body, "This workspace has no such API key") {
		t.Fatalf("revoking another workspace's key = %d: %s", r.status, r.body)
	}
	for _, req := range []struct {
		method, path string
		form         url.Values
	}{
		{http.MethodGet, "/workspaces/" + other + "/keys", nil},
		{http.MethodGet, "/workspaces/" + other + "/keys?revoke=" + theirs.ID, nil},
		{http.MethodPost, "/workspaces/" + other + "/keys", url.Values{"csrf_token": {token}, "name": {"mine now"}}},
		{http.MethodPost, "/workspaces/" + other + "/keys/" + theirs.ID + "/revoke", url.Values{"csrf_token": {token}}},
	} {
		if r := b.do(req.method, req.path, req.form, nil); r.status != http.StatusNotFound || strings.Contains(r.body, "globex") {
			t.Fatalf("%s %s = %d: %s", req.method, req.path, r.status, r.body)
		}
	}
	h.gateway.mu.Lock()
	defer h.gateway.mu.Unlock()
	if len(h.gateway.keys.created) != 0 || len(h.gateway.keys.revoked) != 0 {
		t.Fatalf("refused actions reached the gateway: created %q, revoked %q", h.gateway.keys.created, h.gateway.keys.revoked)
	}
}
