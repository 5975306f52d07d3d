package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// formsDown fails, while down is set, every Redis call of the console's
// that touches a form's claim (its keys are in formKeyScope); the rest
// (sessions' sign-in limits) goes on.
type formsDown struct{ down atomic.Bool }

var errRedisDown = errors.New("redis: connection refused (test)")

func (f *formsDown) touchesForms(cmd redis.Cmder) bool {
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && strings.Contains(s, formKeyScope) {
			return true
		}
	}
	return false
}

func (f *formsDown) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *formsDown) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.down.Load() && f.touchesForms(cmd) {
			cmd.SetErr(errRedisDown)
			return errRedisDown
		}
		return next(ctx, cmd)
	}
}

func (f *formsDown) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if f.down.Load() && f.touchesForms(cmd) {
				cmd.SetErr(errRedisDown)
				return errRedisDown
			}
		}
		return next(ctx, cmds)
	}
}

// TestFormPostedWhileRedisDoesNotAnswer: a guarded form whose claim cannot
// be kept (Redis not answering) is refused in words with 503 and makes
// nothing (docs/console.md "Forms posted twice"); posted again once Redis
// answers, it acts, once.
func TestFormPostedWhileRedisDoesNotAnswer(t *testing.T) {
	t.Parallel()
	hook := &formsDown{}
	s := defaults()
	s.redisHook = hook
	h, ws, b := signedInToAcmeWith(t, s)
	g := guardedForm{h: h, b: b, page: "/workspaces/" + ws + "/keys"}
	form := g.filled(t)
	form.Set("name", "ci")
	created := func() int {
		h.gateway.mu.Lock()
		defer h.gateway.mu.Unlock()
		return len(h.gateway.keys.created)
	}

	hook.down.Store(true)
	r := b.do(http.MethodPost, g.page, form, nil)
	if r.status != http.StatusServiceUnavailable || created() != 0 {
		t.Fatalf("the form posted while Redis does not answer = %d, %d keys created: %s", r.status, created(), r.body)
	}
	mustContain(t, r, "The key was not created.")

	hook.down.Store(false)
	if r := b.do(http.MethodPost, g.page, form, nil); r.status != http.StatusCreated || created() != 1 {
		t.Fatalf("the form posted again once Redis answers = %d, %d keys created: %s", r.status, created(), r.body)
	}
	if r := b.do(http.MethodPost, g.page, form, nil); r.status != http.StatusSeeOther || created() != 1 {
		t.Fatalf("and once more = %d, %d keys created", r.status, created())
	}
}
