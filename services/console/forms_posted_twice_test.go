package main

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/services/console/internal/adapters"
	"github.com/parleyhq/parley/services/console/internal/app"
)

// formAgain is the note of a page a form posted again led to.
const formAgain = `id="form-again">This form was submitted already`

// guardedForm is one of the console's forms that make or send something
// (docs/console.md "Forms posted twice"), set up on its own harness.
type guardedForm struct {
	h    *harness
	b    *browser
	page string // the page that draws the form
	post string // where it posts
	// fields are what is filled in, besides csrf_token and form_id.
	fields url.Values
	// status answers the first post; after is the location a repeat
	// after it goes to, given that answer.
	status int
	after  func(first response) string
	// notes are what the page a repeat goes to says besides the note.
	notes []string
	// made counts what reached the service the form calls.
	made func() int
	// refuse makes that service refuse the form (on) or not.
	refuse func(on bool)
}

// busy is what a service answers when it refuses.
var busy = errs.New(http.StatusTooManyRequests, "rate_limited", "too many admin calls; retry in 3 s")

// guardedForms are the console's forms that make or send something; the
// reply has its own test (TestInboxReplyPostedTwiceSendsOnce).
var guardedForms = map[string]func(t *testing.T) guardedForm{
	"create an API key": func(t *testing.T) guardedForm {
		return keysForm(signedInToAcme(t))
	},
	"create a channel": func(t *testing.T) guardedForm {
		h, ws, b := signedInToAcme(t)
		base := "/workspaces/" + ws
		return guardedForm{h: h, b: b, page: base + "/channels", post: base + "/channels",
			fields: url.Values{"kind": {"telegram"}, "external_id": {"7001"}, "token": {"7001:bot"}},
			status: http.StatusSeeOther,
			after: func(first response) string {
				path, fragment, _ := strings.Cut(first.location(), "#")
				return path + "&again=1#" + fragment
			},
			made: func() int {
				h.messaging.mu.Lock()
				defer h.messaging.mu.Unlock()
				return len(h.messaging.created)
			},
			refuse: func(on bool) {
				h.messaging.mu.Lock()
				defer h.messaging.mu.Unlock()
				h.messaging.createRefusal = map[bool]*errs.Error{true: busy}[on]
			}}
	},
	"publish a new flow": func(t *testing.T) guardedForm {
		s := newFlowsSetup(t)
		base := "/workspaces/" + s.ws
		return s.publishForm(base+"/flows", base+"/flows", func(first response) string {
			return strings.TrimSuffix(first.location(), "&version=1") + "&again=1"
		})
	},
	"publish a flow version": func(t *testing.T) guardedForm {
		s := newFlowsSetup(t)
		flow := "/workspaces/" + s.ws + "/flows/" + s.fr.addFlow(s.ws, "Order", 1)
		return s.publishForm(flow, flow+"/versions", func(response) string { return flow + "?done=published&again=1" })
	},
	"add a knowledge document": func(t *testing.T) guardedForm {
		s := newFlowsSetup(t)
		base := "/workspaces/" + s.ws
		const route = "POST /admin/workspaces/:ws/kb/documents"
		return guardedForm{h: s.h, b: s.b, page: base + "/kb", post: base + "/kb",
			fields: url.Values{"title": {"Shipping"}, "markdown": {"# Shipping\nWe ship in two days."}},
			status: http.StatusSeeOther,
			after:  func(first response) string { return first.location() + "&again=1" },
			made:   func() int { return s.fr.count(http.MethodPost, "/admin/workspaces/"+s.ws+"/kb/documents", "") },
			refuse: func(on bool) { s.fr.setRefusal(route, on) }}
	},
	"send a test event": func(t *testing.T) guardedForm {
		h, ws, b := signedInToAcme(t)
		base := "/workspaces/" + ws
		h.dispatcher.webhook(ws, "active", "2026-11-24T04:00:00Z")
		test := hookDelivery(uuid.NewString(), "test", "delivered", "2026-11-24T04:10:00Z")
		h.dispatcher.mu.Lock()
		h.dispatcher.test = test
		h.dispatcher.mu.Unlock()
		h.dispatcher.log(ws, test)
		return h.dispatcherForm(b, base+"/webhook", base+"/webhook/test", "POST /v1/webhook/test", nil, http.StatusOK,
			base+"/deliveries/"+test.ID+"?again=1")
	},
	"replay a time range": func(t *testing.T) guardedForm {
		h, ws, b := signedInToAcme(t)
		base := "/workspaces/" + ws
		h.dispatcher.webhook(ws, "active", "2026-11-24T04:00:00Z")
		return h.dispatcherForm(b, base+"/deliveries", base+"/deliveries/replay", "POST /admin/replays",
			url.Values{"since": {"2026-11-24T10:00"}}, http.StatusOK, base+"/deliveries?again=1")
	},
	"replay a delivery": func(t *testing.T) guardedForm {
		h, ws, b := signedInToAcme(t)
		delivery := "/workspaces/" + ws + "/deliveries/" + uuid.NewString()
		h.dispatcher.webhook(ws, "active", "2026-11-24T04:00:00Z")
		h.dispatcher.log(ws, hookDelivery(delivery[strings.LastIndex(delivery, "/")+1:], "message.received", "failed", "2026-11-24T04:10:00Z"))
		return h.dispatcherForm(b, delivery, delivery+"/replay", "POST /admin/replays", nil, http.StatusOK, delivery+"?again=1")
	},
	// Every save issues a new secret: saved twice, the secret shown
	// would not be the one deliveries are signed with.
	"save the webhook": func(t *testing.T) guardedForm {
		h, ws, b := signedInToAcme(t)
		base := "/workspaces/" + ws
		g := h.dispatcherForm(b, base+"/webhook", base+"/webhook", "PUT /v1/webhook",
			url.Values{"url": {"https://hooks.example.com/parley"}}, http.StatusOK, base+"/webhook?secret_shown=1&again=1")
		g.notes = []string{"The secret of that save was shown once, on the page its first post led to, and cannot be shown again"}
		return g
	},
	"re-save the webhook": func(t *testing.T) guardedForm {
		h, ws, b := signedInToAcme(t)
		base := "/workspaces/" + ws
		h.dispatcher.webhook(ws, "paused", "2026-11-24T04:00:00Z")
		g := h.dispatcherForm(b, base+"/webhook", base+"/webhook/resave", "POST /admin/webhooks/"+ws+"/resave", nil, http.StatusOK,
			base+"/webhook?secret_shown=1&again=1")
		g.notes = []string{"cannot be shown again"}
		return g
	},
}

// keysForm is the form creating an API key in workspace ws, b signed in
// to it.
func keysForm(h *harness, ws string, b *browser) guardedForm {
	base := "/workspaces/" + ws
	return guardedForm{h: h, b: b, page: base + "/keys", post: base + "/keys", fields: url.Values{"name": {"ci"}},
		status: http.StatusCreated,
		after: func(response) string {
			h.gateway.mu.Lock()
			defer h.gateway.mu.Unlock()
			keys := h.gateway.keys.byWorkspace[ws]
			return base + "/keys?created=" + keys[len(keys)-1].ID + "&again=1"
		},
		made: func() int {
			h.gateway.mu.Lock()
			defer h.gateway.mu.Unlock()
			return len(h.gateway.keys.created)
		},
		refuse: func(on bool) {
			h.gateway.mu.Lock()
			defer h.gateway.mu.Unlock()
			h.gateway.keys.refusal = map[bool]*errs.Error{true: busy}[on]
		}}
}

// publishForm is a flow's publish form, drawn on page and posted to post.
func (s flowsSetup) publishForm(page, post string, after func(response) string) guardedForm {
	const route = "POST /admin/workspaces/:ws/flows"
	query := ""
	if strings.HasSuffix(post, "/versions") {
		query = "flow_id=" + strings.TrimSuffix(post[strings.LastIndex(strings.TrimSuffix(post, "/versions"), "/")+1:], "/versions")
	}
	return guardedForm{h: s.h, b: s.b, page: page, post: post,
		fields: url.Values{"document": {`{"name":"Order","nodes":[{"id":"start","type":"start"}]}`}},
		status: http.StatusSeeOther, after: after,
		made:   func() int { return s.fr.count(http.MethodPost, "/admin/workspaces/"+s.ws+"/flows", query) },
		refuse: func(on bool) { s.fr.setRefusal(route, on) }}
}

// dispatcherForm is a form whose post calls the dispatcher's route
// ("METHOD path").
func (h *harness) dispatcherForm(b *browser, page, post, route string, fields url.Values, status int, after string) guardedForm {
	return guardedForm{h: h, b: b, page: page, post: post, fields: fields, status: status,
		after: func(response) string { return after },
		made:  func() int { return len(h.dispatcher.received(route)) },
		refuse: func(on bool) {
			if on {
				h.dispatcher.refuse(route, busy)
			} else {
				h.dispatcher.refuse(route, nil)
			}
		}}
}

// count is how many calls with method, path and query reached the fake.
func (f *fakeFlowRunner) count(method, path, query string) int {
	n := 0
	for _, c := range f.received() {
		if c.method == method && c.path == path && c.query == query {
			n++
		}
	}
	return n
}

// setRefusal makes the fake refuse route (or not).
func (f *fakeFlowRunner) setRefusal(route string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on {
		f.refuse[route] = busy
	} else {
		delete(f.refuse, route)
	}
}

// filled is the form as the page drew it: its csrf_token and form_id, and
// the fields.
func (g guardedForm) filled(t *testing.T) url.Values {
	t.Helper()
	page := g.b.get(g.page)
	id := formIDInput.FindStringSubmatch(page.body)
	if page.status != http.StatusOK || id == nil || !app.IsID(id[1]) {
		t.Fatalf("GET %s = %d without a form_id:\n%s", g.page, page.status, page.body)
	}
	form := url.Values{"csrf_token": {csrf(t, page)}, "form_id": {id[1]}}
	for k, v := range g.fields {
		form[k] = v
	}
	return form
}

// TestEveryFormThatMakesSomethingActsOnce: each form that makes or sends
// something, posted 4 times at once (a double click, a browser's
// resubmit), reaches its service once; each post is answered as the first
// was, by the page the form leads to with the note, or 409; never an
// error. Posted again after it was done, it does nothing and goes where
// the first post led, saying the form was submitted already. Posted after
// the service refused it, it acts; and a post without a form id (an old
// page, a script) acts each time, as before forms were guarded.
func TestEveryFormThatMakesSomethingActsOnce(t *testing.T) {
	t.Parallel()
	for name, setup := range guardedForms {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			g := setup(t)
			form := g.filled(t)
			for i, status := range postConcurrently(t, g.b, g.post, form, 4) {
				if status != g.status && status != http.StatusSeeOther && status != http.StatusConflict {
					t.Errorf("post %d of 4 = %d", i, status)
				}
			}
			if n := g.made(); n != 1 {
				t.Fatalf("the form posted 4 times at once reached the service %d times, want 1", n)
			}

			// Once more, after: nothing more, and the way to what it made.
			g.refuse(false)
			fresh := g.filled(t)
			first := g.b.do(http.MethodPost, g.post, fresh, nil)
			if first.status != g.status {
				t.Fatalf("a fresh form = %d: %s", first.status, first.body)
			}
			again := g.b.do(http.MethodPost, g.post, fresh, nil)
			if want := g.after(first); again.status != http.StatusSeeOther || again.location() != want {
				t.Fatalf("the form posted again = %d %q, want 303 to %q: %s", again.status, again.location(), want, again.body)
			}
			if n := g.made(); n != 2 {
				t.Fatalf("the form posted again: the service reached %d times in all, want 2", n)
			}
			mustContain(t, g.b.get(again.location()), append([]string{formAgain}, g.notes...)...)

			// Refused, then posted again: it acts.
			refused := g.filled(t)
			g.refuse(true)
			if r := g.b.do(http.MethodPost, g.post, refused, nil); r.status < 400 {
				t.Fatalf("a refused post = %d: %s", r.status, r.body)
			}
			g.refuse(false)
			before := g.made()
			if r := g.b.do(http.MethodPost, g.post, refused, nil); r.status != g.status {
				t.Fatalf("the refused form posted again = %d: %s", r.status, r.body)
			}
			if n := g.made(); n != before+1 {
				t.Fatalf("the refused form posted again reached the service %d times, want once", n-before)
			}

			// Without a form id: each post acts.
			unguarded := g.filled(t)
			unguarded.Del("form_id")
			before = g.made()
			for range 2 {
				if r := g.b.do(http.MethodPost, g.post, unguarded, nil); r.status != g.status {
					t.Fatalf("a post without a form id = %d: %s", r.status, r.body)
				}
			}
			if n := g.made(); n != before+2 {
				t.Fatalf("2 posts without a form id reached the service %d times, want 2", n-before)
			}
		})
	}
}

// TestFormPostedWhileItsFirstPostRuns: a form posted while its first post
// is still at work (held here by claiming it as the console does) is 409
// in words, drawn on its page, and nothing reaches the service; once the
// first post is refused, it acts. The API key's repeat after it was
// created names the key and says its secret cannot be shown again.
func TestFormPostedWhileItsFirstPostRuns(t *testing.T) {
	t.Parallel()
	g := guardedForms["create an API key"](t)
	form := g.filled(t)
	forms := adapters.NewForms(idempotency.New(g.h.env.Redis(t), redisx.Keys{Prefix: g.h.env.RedisPrefix}, formKeyScope, idempotency.Options{}))
	ws := strings.Split(g.page, "/")[2]
	claim, err := forms.Claim(context.Background(), ws, form.Get("form_id"), app.FormCreateAPIKey, "ci")
	if err != nil {
		t.Fatal(err)
	}
	r := g.b.do(http.MethodPost, g.post, form, nil)
	if r.status != http.StatusConflict {
		t.Fatalf("the form posted while its first post runs = %d: %s", r.status, r.body)
	}
	mustContain(t, r, "<h1>API keys</h1>", "This form is being submitted already: its first post is still at work, and this one did nothing.")
	if n := g.made(); n != 0 {
		t.Fatalf("the form posted while its first post runs created %d keys", n)
	}
	claim.Refused(context.Background())
	first := g.b.do(http.MethodPost, g.post, form, nil)
	if first.status != http.StatusCreated || shownKey.FindStringSubmatch(first.body) == nil {
		t.Fatalf("the form once its first post was refused = %d: %s", first.status, first.body)
	}
	again := g.b.do(http.MethodPost, g.post, form, nil)
	list := g.b.get(again.location())
	mustContain(t, list, formAgain, "Key “ci” (", "was created by this form&#39;s first post. The key itself was shown once, on the page that post led to, and cannot be shown again")
	if shownKey.MatchString(list.body) || strings.Contains(list.body, `id="new-key"`) {
		t.Fatalf("the list shows a key's secret again:\n%s", list.body)
	}

	// The test event's repeat while it runs: the 409 page, in words.
	g = guardedForms["send a test event"](t)
	form = g.filled(t)
	forms = adapters.NewForms(idempotency.New(g.h.env.Redis(t), redisx.Keys{Prefix: g.h.env.RedisPrefix}, formKeyScope, idempotency.Options{}))
	ws = strings.Split(g.page, "/")[2]
	if _, err := forms.Claim(context.Background(), ws, form.Get("form_id"), app.FormTestEvent, nil); err != nil {
		t.Fatal(err)
	}
	r = g.b.do(http.MethodPost, g.post, form, nil)
	if r.status != http.StatusConflict || g.made() != 0 {
		t.Fatalf("the test event posted while its first post runs = %d, %d sent: %s", r.status, g.made(), r.body)
	}
	mustContain(t, r, "This form is being submitted already")
}
