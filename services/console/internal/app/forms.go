package app

import (
	"context"
	"errors"
)

// Forms posted twice (docs/console.md "Forms posted twice"): every form
// that makes or sends something carries a form id, fresh with each page
// drawn, and the use case behind it does its work once per form id and
// input. A repeat after the work is a *FormDoneError naming what the
// first post made; one while it runs is ErrFormRunning. A post refused
// (by the console or a service) may be posted again, and a form id that
// is "" or no id (an old page, a scripted post) is not checked.

// The actions of the guarded forms: each is part of the claim, so two
// forms of one page (drawn with one form id) are claims of their own.
const (
	FormReply          = "reply"
	FormCreateAPIKey   = "create-api-key"
	FormCreateChannel  = "create-channel"
	FormPublishFlow    = "publish-flow"
	FormAddDocument    = "add-document"
	FormTestEvent      = "send-test-event"
	FormReplayRange    = "replay-range"
	FormReplayDelivery = "replay-delivery"
	FormSaveWebhook    = "save-webhook"
	FormResaveWebhook  = "resave-webhook"
)

// ErrFormRunning is a form posted again while its first post is still
// being done.
var ErrFormRunning = errors.New("this form is still being submitted")

// FormDoneError is a form posted again after its first post was done:
// nothing is done again. Ref names what the first post made, as its use
// case says (an API key's id, a channel's, a flow's, a delivery's).
type FormDoneError struct {
	Ref string
}

func (e *FormDoneError) Error() string { return "this form was submitted already" }

// Forms remember the forms posted (Deps.Forms).
type Forms interface {
	// Claim takes form formID's action in the workspace with input (what
	// the form sent, part of the claim: the same form sent with other
	// values is a post of its own): a *FormDoneError when that form did
	// it before, ErrFormRunning while it does.
	Claim(ctx context.Context, workspaceID, formID, action string, input any) (FormClaim, error)
}

// FormClaim is a form's post, claimed.
type FormClaim interface {
	// Done keeps the form done, ref naming what it made: posted again,
	// it does nothing.
	Done(ctx context.Context, ref string)
	// Refused frees the form: posted again, it acts.
	Refused(ctx context.Context)
}

// once does do as form formID's action in the workspace with input,
// once: a repeat is the claim's error and does nothing. ref names what
// do made, for the repeats. A refusal frees the form; a form id that is
// no id, or no Forms, does do unchecked.
func once[T any](ctx context.Context, a *App, workspaceID, formID, action string, input any, do func() (T, error), ref func(T) string) (T, error) {
	var claim FormClaim
	if a.forms != nil && IsID(formID) {
		var err error
		if claim, err = a.forms.Claim(ctx, workspaceID, formID, action, input); err != nil {
			var zero T
			return zero, err
		}
	}
	out, err := do()
	if claim != nil {
		if err != nil {
			claim.Refused(context.WithoutCancel(ctx))
		} else {
			claim.Done(context.WithoutCancel(ctx), ref(out))
		}
	}
	return out, err
}
