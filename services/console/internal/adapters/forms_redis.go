package adapters

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/services/console/internal/app"
)

// Forms keeps the forms posted in Redis, through the idempotency store
// every service's keys use (pkg/idempotency), for as long as it keeps a
// key (24 hours).
type Forms struct {
	store *idempotency.Store
}

var _ app.Forms = (*Forms)(nil)

// NewForms returns the forms kept in store.
func NewForms(store *idempotency.Store) *Forms {
	return &Forms{store: store}
}

// Claim implements app.Forms. The action and what the form sent are part
// of the key: another form of the same page, or the same form sent with
// other values (the browser's back button, the text changed), is a post
// of its own.
func (f *Forms) Claim(ctx context.Context, workspaceID, formID, action string, input any) (app.FormClaim, error) {
	body, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("%s form fingerprint: %w", action, err)
	}
	fp := idempotency.Fingerprint(http.MethodPost, action, body)
	res, err := f.store.Begin(ctx, workspaceID, formID+"/"+fp, fp)
	if err != nil {
		return nil, fmt.Errorf("claim %s form: %w", action, err)
	}
	switch res.State {
	case idempotency.Claimed:
		return formClaim{res.Claim}, nil
	case idempotency.InProgress:
		return nil, app.ErrFormRunning
	}
	// Done (Replay): the fingerprint is part of the key, so a key is never
	// reused for another post.
	done := &app.FormDoneError{}
	if res.Stored != nil {
		done.Ref = res.Stored.Ref
	}
	return nil, done
}

// formClaim is app.FormClaim over an idempotency claim. Either write
// failing only loses the guard against a repeat, not the work.
type formClaim struct {
	claim *idempotency.Claim
}

func (c formClaim) Done(ctx context.Context, ref string) {
	_ = c.claim.Complete(ctx, idempotency.Response{Status: http.StatusCreated, Ref: ref})
}

func (c formClaim) Refused(ctx context.Context) {
	_ = c.claim.Release(ctx)
}
