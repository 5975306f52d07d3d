package idempotency_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/idempotency"
)

func TestKeyFromRequest(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		values  []string
		want    string
		invalid bool
	}{
		"absent":         {},
		"a key":          {values: []string{"order-1"}, want: "order-1"},
		"128 characters": {values: []string{strings.Repeat("k", 128)}, want: strings.Repeat("k", 128)},
		"empty":          {values: []string{""}, invalid: true},
		"twice":          {values: []string{"a", "b"}, invalid: true},
		"129 characters": {values: []string{strings.Repeat("k", 129)}, invalid: true},
		"non-ASCII":      {values: []string{"заказ-1"}, invalid: true},
		"a tab":          {values: []string{"order\t1"}, invalid: true},
	} {
		r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
		for _, v := range tc.values {
			r.Header.Add(idempotency.Header, v)
		}
		got, err := idempotency.KeyFromRequest(r)
		if tc.invalid {
			wantErr(t, err, http.StatusBadRequest, idempotency.CodeKeyInvalid)
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: key = %q, %v; want %q", name, got, err, tc.want)
		}
	}
}

func TestRequestFingerprint(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest(http.MethodPost, "/v1/messages?x=1", nil)
	body := []byte(`{"text":"hi"}`)
	if got, want := idempotency.RequestFingerprint(r, body), idempotency.Fingerprint(http.MethodPost, "/v1/messages", body); got != want {
		t.Fatalf("fingerprint = %s, want %s (method, path without query, body)", got, want)
	}
}

// Serve answers a repeat itself, hands the first request its claim, and
// turns the other states into their errors; Refused frees the key and
// Answered keeps the answer, both on a nil claim too.
func TestServe(t *testing.T) {
	t.Parallel()
	f := newFixture(t, idempotency.Options{})
	ctx := context.Background()
	serve := func(fp string) (*idempotency.Claim, bool, *httptest.ResponseRecorder, error) {
		rec := httptest.NewRecorder()
		claim, answered, err := f.store.Serve(ctx, rec, ws, key, fp)
		return claim, answered, rec, err
	}

	claim, answered, _, err := serve(fpA)
	if err != nil || answered || claim == nil {
		t.Fatalf("first = %v, %v, %v", claim, answered, err)
	}
	_, _, _, err = serve(fpA)
	wantErr(t, err, http.StatusConflict, idempotency.CodeInProgress)

	// Refused: the key is free for the next request.
	claim.Refused(ctx)
	claim, _, _, err = serve(fpA)
	if err != nil || claim == nil {
		t.Fatalf("after Refused = %v, %v", claim, err)
	}
	claim.Answered(ctx, idempotency.Response{Status: http.StatusCreated, Body: []byte(`{"ok":true}`), Ref: "m1"})
	again, answered, rec, err := serve(fpA)
	if err != nil || !answered || again != nil {
		t.Fatalf("repeat = %v, %v, %v", again, answered, err)
	}
	if rec.Code != http.StatusCreated || rec.Body.String() != `{"ok":true}` || rec.Header().Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("replay = %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	_, _, _, err = serve(fpB)
	wantErr(t, err, http.StatusUnprocessableEntity, idempotency.CodeKeyReuse)

	// A request without a key has no claim: both do nothing.
	var none *idempotency.Claim
	none.Refused(ctx)
	none.Answered(ctx, idempotency.Response{Status: http.StatusOK})
}

// Decide is Serve that hands a repeat its stored response instead of
// writing it.
func TestDecide(t *testing.T) {
	t.Parallel()
	f := newFixture(t, idempotency.Options{RefField: "run_id"})
	ctx := context.Background()
	claim, replay, err := f.store.Decide(ctx, ws, key, fpA)
	if err != nil || replay != nil || claim == nil {
		t.Fatalf("first = %v, %v, %v", claim, replay, err)
	}
	_, _, err = f.store.Decide(ctx, ws, key, fpA)
	wantErr(t, err, http.StatusConflict, idempotency.CodeInProgress)
	claim.Answered(ctx, idempotency.Response{Status: http.StatusOK, Body: []byte(`{"ok":true}`), Ref: "r1"})
	again, replay, err := f.store.Decide(ctx, ws, key, fpA)
	if err != nil || again != nil || replay == nil || replay.Status != http.StatusOK || string(replay.Body) != `{"ok":true}` || replay.Ref != "r1" {
		t.Fatalf("repeat = %v, %+v, %v", again, replay, err)
	}
	_, _, err = f.store.Decide(ctx, ws, key, fpB)
	wantErr(t, err, http.StatusUnprocessableEntity, idempotency.CodeKeyReuse)
}

// A key that cannot be decided is 503, and does not stay occupied.
func TestServeWhenTheBackstopIsDown(t *testing.T) {
	t.Parallel()
	b := newBackstop()
	f := newFixture(t, idempotency.Options{Backstop: b})
	b.failWith(errors.New("connection refused"))
	_, _, err := f.store.Serve(context.Background(), httptest.NewRecorder(), ws, key, fpA)
	wantErr(t, err, http.StatusServiceUnavailable, "service_unavailable")
	b.failWith(nil)
	if claim, _, err := f.store.Serve(context.Background(), httptest.NewRecorder(), ws, key, fpA); err != nil || claim == nil {
		t.Fatalf("after the outage = %v, %v", claim, err)
	}
}
