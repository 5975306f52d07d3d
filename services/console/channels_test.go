package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/errs"
)

// TestChannelsList: the page lists the workspace's channels (not another
// workspace's) with kind, external id, status and a mode form per row
// whose select shows the current ai_mode.
func TestChannelsList(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaults())
	own := h.workspace("Acme")
	other := h.workspace("Globex")
	tg := h.messaging.channel(own, "telegram", "7001", "auto")
	web := h.messaging.channel(own, "webchat", "", "external")
	h.messaging.channel(other, "messenger", "globex-page", "suggest")
	h.operator(t, "ann@example.com", own)
	b := h.browser(t)
	b.mustSignIn("ann@example.com")

	r := b.get("/workspaces/" + own + "/channels")
	if r.status != http.StatusOK {
		t.Fatalf("GET channels = %d: %s", r.status, r.body)
	}
	for _, want := range []string{
		"<h1>Channels</h1>", `aria-current="page">Channels</a>`,
		`<tr id="channel-` + tg.ID + `">`, `<th scope="row" data-label="Kind">telegram</th>`, "<code>7001</code>", `<td data-label="Status">active</td>`,
		`action="/workspaces/` + own + `/channels/` + tg.ID + `/ai-mode"`, `<label class="visually-hidden" for="mode-` + tg.ID + `">`,
		`<tr id="channel-` + web.ID + `">`,
		`<label for="ch-kind">Kind</label>`, `<label for="ch-external-id">External id</label>`, `<label for="ch-token">Token</label>`, `<label for="ch-secret">Secret (optional)</label>`,
	} {
		if !strings.Contains(r.body, want) {
			t.Fatalf("the channels page lacks %q: %s", want, r.body)
		}
	}
	if got := selectedMode(t, r.body, tg.ID); got != "auto" {
		t.Fatalf("telegram's select shows %q, want auto", got)
	}
	if got := selectedMode(t, r.body, web.ID); got != "external" {
		t.Fatalf("webchat's select shows %q, want external", got)
	}
	if strings.Contains(r.body, "globex-page") {
		t.Fatal("another workspace's channel is listed")
	}
	if strings.Contains(r.body, "secret_of_") {
		t.Fatal("the list shows the channels' secrets")
	}
}

// selectedMode is the option selected in the mode form of channel id.
func selectedMode(t *testing.T, body, id string) string {
	t.Helper()
	i := strings.Index(body, `<select id="mode-`+id+`"`)
	if i < 0 {
		t.Fatalf("no mode select for %s", id)
	}
	rest := body[i:]
	rest = rest[:strings.Index(rest, "</select>")]
	const marker = `" selected>`
	j := strings.Index(rest, marker)
	if j < 0 {
		return ""
	}
	k := strings.LastIndex(rest[:j], `value="`)
	return rest[k+len(`value="`) : j]
}

// TestChannelSetMode: the mode form's post reaches messaging with the
// channel and the mode, and the list afterwards shows the new mode and
// says it applies from the next customer message; a mode messaging
// refuses is said in words.
func TestChannelSetMode(t *testing.T) {
	t.Parallel()
	h, own, b := signedInToAcme(t)
	tg := h.messaging.channel(own, "telegram", "7001", "auto")
	token := b.pageCSRF("/workspaces/" + own + "/channels")

	r := b.do(http.MethodPost, "/workspaces/"+own+"/channels/"+tg.ID+"/ai-mode", url.Values{"csrf_token": {token}, "ai_mode": {"external"}}, nil)
	want := "/workspaces/" + own + "/channels?mode_set=" + tg.ID + "#channel-" + tg.ID
	if r.status != http.StatusSeeOther || r.location() != want {
		t.Fatalf("set mode = %d %q, want 303 %q: %s", r.status, r.location(), want, r.body)
	}
	h.messaging.mu.Lock()
	modes := append([]string(nil), h.messaging.modes...)
	h.messaging.mu.Unlock()
	if len(modes) != 1 || modes[0] != tg.ID+"=external" {
		t.Fatalf("messaging got %q", modes)
	}
	list := b.get(strings.TrimSuffix(r.location(), "#channel-"+tg.ID))
	if list.status != http.StatusOK || selectedMode(t, list.body, tg.ID) != "external" ||
		!strings.Contains(list.body, "Channel telegram 7001 is now in mode external, from the next customer message") ||
		!strings.Contains(list.body, `<tr id="channel-`+tg.ID+`" class="changed">`) {
		t.Fatalf("the list after setting the mode = %d: %s", list.status, list.body)
	}

	r = b.do(http.MethodPost, "/workspaces/"+own+"/channels/"+tg.ID+"/ai-mode", url.Values{"csrf_token": {token}, "ai_mode": {"loud"}}, nil)
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, "The mode was not changed. ai_mode must be one of auto, suggest, external.") ||
		selectedMode(t, r.body, tg.ID) != "external" {
		t.Fatalf("a mode messaging refuses = %d: %s", r.status, r.body)
	}
}

// TestChannelCreate: the form's fields reach messaging under the page's
// workspace, and the list afterwards has the channel with its ingress
// path and secret.
func TestChannelCreate(t *testing.T) {
	t.Parallel()
	h, own, b := signedInToAcme(t)
	token := b.pageCSRF("/workspaces/" + own + "/channels")

	form := url.Values{"csrf_token": {token}, "kind": {"telegram"}, "external_id": {"7001"}, "token": {"7001:AAbot"}, "secret": {"a_secret_of_20_chars"},
		"workspace_id": {"11111111-1111-1111-1111-111111111111"}}
	r := b.do(http.MethodPost, "/workspaces/"+own+"/channels", form, nil)
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.location(), "/workspaces/"+own+"/channels?created=") {
		t.Fatalf("create = %d %q: %s", r.status, r.location(), r.body)
	}
	h.messaging.mu.Lock()
	created := append([]messagingapi.NewChannel(nil), h.messaging.created...)
	h.messaging.mu.Unlock()
	want := messagingapi.NewChannel{WorkspaceID: own, Kind: "telegram", ExternalID: "7001", Token: "7001:AAbot", Secret: "a_secret_of_20_chars"}
	if len(created) != 1 || created[0] != want {
		t.Fatalf("messaging got %+v, want %+v", created, want)
	}
	list := b.get(r.location())
	if list.status != http.StatusOK || !strings.Contains(list.body, "Channel telegram 7001 is created, in mode auto.") ||
		!strings.Contains(list.body, "<code>/ingress/telegram/") || !strings.Contains(list.body, ">a_secret_of_20_chars</code>") ||
		strings.Contains(list.body, "7001:AAbot") {
		t.Fatalf("the list after creating = %d: %s", list.status, list.body)
	}
}

// TestChannelCreateRefused: messaging's refusal of a field is drawn
// beside that field with the form kept; a conflict beside the external
// id; any other refusal in words with its status; a workspace the gateway
// does not have is never sent to messaging.
func TestChannelCreateRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaults())
	own := h.workspace("Acme")
	h.operator(t, "ann@example.com", own)
	h.operator(t, "root@example.com", "")
	b := h.browser(t)
	b.mustSignIn("ann@example.com")
	token := b.pageCSRF("/workspaces/" + own + "/channels")
	post := func() response {
		return b.do(http.MethodPost, "/workspaces/"+own+"/channels",
			url.Values{"csrf_token": {token}, "kind": {"messenger"}, "external_id": {"acme-page"}, "secret": {"short"}}, nil)
	}
	refuse := func(e *errs.Error) {
		h.messaging.mu.Lock()
		h.messaging.createRefusal = e
		h.messaging.mu.Unlock()
	}

	refuse(errs.InvalidRequest("token is required for a messenger channel (the page access token)"))
	r := post()
	for _, want := range []string{
		`<span class="field-error" id="ch-token-error">token is required for a messenger channel (the page access token).</span>`,
		`aria-describedby="ch-token-hint ch-token-error" aria-invalid="true"`,
		"The channel was not created: token is required",
		`<option value="messenger" selected>`, `value="acme-page"`, `value="short"`,
	} {
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, want) {
			t.Fatalf("a refused token = %d, lacks %q: %s", r.status, want, r.body)
		}
	}
	if strings.Contains(r.body, `id="ch-secret-error"`) {
		t.Fatal("the secret is marked too")
	}

	refuse(errs.InvalidRequest("secret must be 16 to 256 characters of A-Z, a-z, 0-9, _ and - (leave it out to have one generated)"))
	if r := post(); r.status != http.StatusBadRequest || !strings.Contains(r.body, `<span class="field-error" id="ch-secret-error">secret must be 16 to 256`) {
		t.Fatalf("a refused secret = %d: %s", r.status, r.body)
	}
	refuse(errs.New(http.StatusConflict, "channel_exists", "a channel of this kind with this external_id already exists"))
	if r := post(); r.status != http.StatusConflict || !strings.Contains(r.body, `<span class="field-error" id="ch-external-id-error">A channel of this kind with this external_id already exists. Use that channel, or give another external id.</span>`) {
		t.Fatalf("a channel that exists = %d: %s", r.status, r.body)
	}
	refuse(errs.New(http.StatusServiceUnavailable, errs.CodeServiceUnavailable, "the database is not answering"))
	if r := post(); r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "The channel was not created. A service the console needs did not answer (the database is not answering)") {
		t.Fatalf("messaging unavailable = %d: %s", r.status, r.body)
	}

	// A platform operator on a workspace the gateway does not have: 404,
	// and nothing reaches messaging.
	h.messaging.mu.Lock()
	before := len(h.messaging.created)
	h.messaging.mu.Unlock()
	root := h.browser(t)
	root.mustSignIn("root@example.com")
	missing := "22222222-2222-2222-2222-222222222222"
	rootToken := root.pageCSRF("/workspaces/" + own + "/channels")
	if r := root.do(http.MethodPost, "/workspaces/"+missing+"/channels", url.Values{"csrf_token": {rootToken}, "kind": {"webchat"}}, nil); r.status != http.StatusNotFound {
		t.Fatalf("a channel in a missing workspace = %d: %s", r.status, r.body)
	}
	if r := root.get("/workspaces/" + missing + "/channels"); r.status != http.StatusNotFound || !strings.Contains(r.body, "Workspace not found.") {
		t.Fatalf("the channels of a missing workspace = %d: %s", r.status, r.body)
	}
	h.messaging.mu.Lock()
	after := len(h.messaging.created)
	h.messaging.mu.Unlock()
	if after != before {
		t.Fatal("a channel of a missing workspace reached messaging")
	}
}

// TestChannelActionsRefused: without the CSRF token nothing reaches
// messaging; another workspace's channel is not changed from one's own
// workspace (404); another workspace's page and actions are 404; the
// list's refusal is said in words.
func TestChannelActionsRefused(t *testing.T) {
	t.Parallel()
	h, own, b := signedInToAcme(t)
	other := h.workspace("Globex")
	theirs := h.messaging.channel(other, "messenger", "globex-page", "suggest")
	token := b.pageCSRF("/workspaces/" + own + "/channels")

	for _, path := range []string{"/workspaces/" + own + "/channels", "/workspaces/" + own + "/channels/" + theirs.ID + "/ai-mode"} {
		if r := b.do(http.MethodPost, path, url.Values{"kind": {"webchat"}, "ai_mode": {"external"}}, nil); r.status != http.StatusForbidden {
			t.Fatalf("POST %s without a token = %d: %s", path, r.status, r.body)
		}
	}
	r := b.do(http.MethodPost, "/workspaces/"+own+"/channels/"+theirs.ID+"/ai-mode", url.Values{"csrf_token": {token}, "ai_mode": {"external"}}, nil)
	if r.status != http.StatusNotFound || !strings.Contains(r.body, "This workspace has no such channel") {
		t.Fatalf("changing another workspace's channel = %d: %s", r.status, r.body)
	}
	for _, req := range []struct {
		method, path string
		form         url.Values
	}{
		{http.MethodGet, "/workspaces/" + other + "/channels", nil},
		{http.MethodPost, "/workspaces/" + other + "/channels", url.Values{"csrf_token": {token}, "kind": {"webchat"}}},
		{http.MethodPost, "/workspaces/" + other + "/channels/" + theirs.ID + "/ai-mode", url.Values{"csrf_token": {token}, "ai_mode": {"external"}}},
	} {
		if r := b.do(req.method, req.path, req.form, nil); r.status != http.StatusNotFound || strings.Contains(r.body, "globex") {
			t.Fatalf("%s %s = %d: %s", req.method, req.path, r.status, r.body)
		}
	}
	h.messaging.mu.Lock()
	if len(h.messaging.created) != 0 || len(h.messaging.modes) != 0 {
		h.messaging.mu.Unlock()
		t.Fatalf("refused actions reached messaging: %+v %q", h.messaging.created, h.messaging.modes)
	}
	h.messaging.refusal = errs.New(http.StatusTooManyRequests, errs.CodeRateLimited, "too many admin calls; retry in 3 s")
	h.messaging.mu.Unlock()
	if r := b.get("/workspaces/" + own + "/channels"); r.status != http.StatusTooManyRequests || !strings.Contains(r.body, "Too many admin calls; retry in 3 s.") {
		t.Fatalf("a refused list = %d: %s", r.status, r.body)
	}
}
