package adapters

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/parleyhq/parley/pkg/errs"
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
	claim, first, err := f.store.Decide(ctx, workspaceID, formID+"/"+fp, fp)
	switch {
	case first != nil && first.Status == statusOutcomeUnknown:
		return nil, app.ErrFormOutcomeUnknown
	case first != nil:
		return nil, &app.FormDoneError{Ref: first.Ref}
	case err != nil:
		if e, ok := errs.As(err); ok && e.Code == idempotency.CodeInProgress {
			return nil, app.ErrFormRunning
		}
		// Redis not answering: 503 in words, logged. (The fingerprint is
		// part of the key, so a key is never reused for another post.)
		return nil, err
	}
	return formClaim{claim}, nil
}

// statusOutcomeUnknown is what a form whose outcome is unknown keeps as
// its answer (app.FormClaim.Unknown): a service that did not answer in
// time, as a proxy says it. A form done keeps 201.
const statusOutcomeUnknown = http.StatusGatewayTimeout

// formClaim is app.FormClaim over an idempotency claim. Each write
// failing (logged) only loses the guard against a repeat, not the work.
type formClaim struct {
	claim *idempotency.Claim
}

func (c formClaim) Done(ctx context.Context, ref string) {
	c.claim.Answered(ctx, idempotency.Response{Status: http.StatusCreated, Ref: ref})
}

func (c formClaim) Refused(ctx context.Context) {
	c.claim.Refused(ctx)
}

func (c formClaim) Unknown(ctx context.Context) {
	c.claim.Answered(ctx, idempotency.Response{Status: statusOutcomeUnknown})
}
