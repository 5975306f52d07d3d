package main

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/errs"
)

// unknownOutcome is what a form posted again after its first post's
// outcome was unknown says, on the API keys' page.
var unknownOutcome = []string{
	"<h1>API keys</h1>",
	"first post may have been done: the service did not answer in time, so the console cannot tell, and this post did nothing.",
	"Check the keys below; to do it anyway, reload the page and post the new form.",
}

// TestFormPostedAgainWhenItsFirstPostsOutcomeIsUnknown: a form whose
// service did the work and then did not answer in time, or answered 5xx,
// says so on its page (its status, the words: it may have been done,
// where to look, that posting it again does nothing) and keeps its
// claim: posted again, it does nothing and says in words (409,
// on its page) that the first post may have been done, where to look, and
// how to do it anyway; a page drawn anew is a new form and acts. A post
// that reached no service (none running) did nothing, so posted again it
// acts. (A service's 4xx refusal frees the form too:
// TestEveryFormThatMakesSomethingActsOnce.)
func TestFormPostedAgainWhenItsFirstPostsOutcomeIsUnknown(t *testing.T) {
	t.Parallel()
	for name, tt := range map[string]struct {
		late      bool        // the gateway answers once the console stopped waiting
		failAfter *errs.Error // what it answers
	}{
		"no answer in time":  {late: true},
		"5xx after the work": {failAfter: errs.Internal()},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := defaults()
			s.callTimeout = 2 * time.Second
			g := keysForm(signedInToAcmeWith(t, s))
			late := make(chan struct{})
			answer := sync.OnceFunc(func() { close(late) })
			t.Cleanup(answer)
			if !tt.late {
				answer()
			}
			g.h.gateway.answerCreates(late, tt.failAfter)

			form := g.filled(t)
			first := g.b.do(http.MethodPost, g.post, form, nil)
			if first.status < http.StatusInternalServerError || g.made() != 1 {
				t.Fatalf("the first post = %d, %d keys made, want 5xx and 1: %s", first.status, g.made(), first.body)
			}
			// Not "try again": posted again, the form does nothing.
			mustContain(t, first, "<h1>API keys</h1>", "This post may have been done: ",
				"so the console cannot tell. Check the keys below before posting it again; posted again, this form does nothing, so to do it anyway, reload the page and post the new form.")
			answer()
			g.h.gateway.answerCreates(nil, nil)
			again := g.b.do(http.MethodPost, g.post, form, nil)
			if again.status != http.StatusConflict || g.made() != 1 {
				t.Fatalf("the form posted again = %d, %d keys made in all, want 409 and 1: %s", again.status, g.made(), again.body)
			}
			mustContain(t, again, unknownOutcome...)
			if r := g.b.do(http.MethodPost, g.post, g.filled(t), nil); r.status != g.status || g.made() != 2 {
				t.Fatalf("the page drawn anew, posted = %d, %d keys made in all, want 2", r.status, g.made())
			}
		})
	}
	t.Run("no service running", func(t *testing.T) {
		t.Parallel()
		g := guardedForms["create an API key"](t)
		form := g.filled(t)
		g.h.gateway.stop()
		if r := g.b.do(http.MethodPost, g.post, form, nil); r.status != http.StatusServiceUnavailable || g.made() != 0 {
			t.Fatalf("the form posted with no gateway running = %d, %d keys made: %s", r.status, g.made(), r.body)
		}
		g.h.gateway.serve(t, g.h.env)
		if r := g.b.do(http.MethodPost, g.post, form, nil); r.status != g.status || g.made() != 1 {
			t.Fatalf("the form posted again once the gateway runs = %d, %d keys made: %s", r.status, g.made(), r.body)
		}
	})
}

// TestAReSaveWhoseReadGetsNoAnswerIsFreed: the webhook's "Save again"
// first reads the webhook's status; when that read gets no answer in
// time, nothing was written, so the post says to try again and the form
// posted again acts (docs/console.md "Forms posted twice"). Before, any
// call not answered in time kept the form as one that may have been done
// for 24 hours.
func TestAReSaveWhoseReadGetsNoAnswerIsFreed(t *testing.T) {
	t.Parallel()
	s := defaults()
	s.callTimeout = 2 * time.Second
	h, ws, b := signedInToAcmeWith(t, s)
	base := "/workspaces/" + ws
	h.dispatcher.webhook(ws, "paused", "2026-11-24T04:00:00Z")
	resave := "POST /admin/webhooks/" + ws + "/resave"
	g := h.dispatcherForm(b, base+"/webhook", base+"/webhook/resave", resave, nil, http.StatusOK, base+"/webhook?secret_shown=1&again=1")
	form := g.filled(t)

	late := make(chan struct{})
	answer := sync.OnceFunc(func() { close(late) })
	t.Cleanup(answer)
	h.dispatcher.mu.Lock()
	h.dispatcher.statusLate = late
	h.dispatcher.mu.Unlock()
	first := b.do(http.MethodPost, g.post, form, nil)
	if first.status != http.StatusServiceUnavailable || g.made() != 0 {
		t.Fatalf("the first post = %d, %d re-saves, want 503 and none: %s", first.status, g.made(), first.body)
	}
	if strings.Contains(first.body, "may have been done") {
		t.Fatalf("the first post says it may have been done, though nothing was written:\n%s", first.body)
	}
	mustContain(t, first, "dispatcher did not answer in time; try again shortly")

	h.dispatcher.mu.Lock()
	h.dispatcher.statusLate = nil
	h.dispatcher.mu.Unlock()
	answer()
	again := b.do(http.MethodPost, g.post, form, nil)
	if again.status != http.StatusOK || g.made() != 1 {
		t.Fatalf("the form posted again = %d, %d re-saves, want 200 and 1: %s", again.status, g.made(), again.body)
	}
	mustContain(t, again, "whsec_fake_secret_1")
}
