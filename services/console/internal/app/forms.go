package app

import (
	"context"
	"errors"
	"net/http"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/rpc"
)

// Forms posted twice (docs/console.md "Forms posted twice"): every form
// that makes or sends something carries a form id, fresh with each page
// drawn, and the use case behind it does its work once per form id and
// input. A repeat after the work is a *FormDoneError naming what the
// first post made; one while it runs is ErrFormRunning. A post refused
// (by the console or a service) may be posted again. A post whose service
// gave no answer that says whether it did the work (no answer in time, a
// 5xx, the connection lost) may have done it: its repeat is
// ErrFormOutcomeUnknown and does nothing. A form id that is "" or no id
// (an old page, a scripted post) is not checked.

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

// ErrFormOutcomeUnknown is a form posted again after its first post got no
// answer saying whether the service did the work: it may have, so this
// post does nothing. A form drawn anew is a post of its own.
var ErrFormOutcomeUnknown = errors.New("this form's first post may have been done: the service did not answer in time")

// FormOutcomeUnknownError is a form's post whose service gave no answer
// saying whether it did the work (Err, the call's error): it may have,
// and the form stays claimed, so that posted again it does nothing
// (ErrFormOutcomeUnknown).
type FormOutcomeUnknownError struct {
	Err error
}

func (e *FormOutcomeUnknownError) Error() string { return e.Err.Error() }
func (e *FormOutcomeUnknownError) Unwrap() error { return e.Err }

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
	// it before, ErrFormRunning while it does, ErrFormOutcomeUnknown when
	// it may have.
	Claim(ctx context.Context, workspaceID, formID, action string, input any) (FormClaim, error)
}

// FormClaim is a form's post, claimed.
type FormClaim interface {
	// Done keeps the form done, ref naming what it made: posted again,
	// it does nothing.
	Done(ctx context.Context, ref string)
	// Refused frees the form: posted again, it acts.
	Refused(ctx context.Context)
	// Unknown keeps the form as one whose work may have been done:
	// posted again, it does nothing.
	Unknown(ctx context.Context)
}

// once does do as form formID's action in the workspace with input,
// once: a repeat is the claim's error and does nothing. ref names what
// do made, for the repeats. A refusal frees the form, an outcome unknown
// (outcomeUnknown) keeps it and is a *FormOutcomeUnknownError; a form id
// that is no id, or no Forms, does do unchecked.
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
		switch {
		case err == nil:
			claim.Done(context.WithoutCancel(ctx), ref(out))
		case outcomeUnknown(err):
			claim.Unknown(context.WithoutCancel(ctx))
			err = &FormOutcomeUnknownError{Err: err}
		default:
			claim.Refused(context.WithoutCancel(ctx))
		}
	}
	return out, err
}

// refusals are the console's own names for a service's 4xx answer that
// a form's work returns in its place (conversationError, workspaceError,
// publishFlow).
var refusals = []error{ErrConversationNotFound, ErrWorkspaceNotFound, ErrFlowNotFound}

// outcomeUnknown reports whether err, a form's work failing, leaves open
// whether a service did that work. A service's refusal (a 4xx, or the
// console's name for one) and a call that reached no service
// (rpc.ErrNotSent) did nothing. A 5xx may come after the work (a service
// failing once it was done), and a call not answered in time, cut off or
// cancelled may have been done; so may any error not known to be a
// refusal.
func outcomeUnknown(err error) bool {
	if errors.Is(err, rpc.ErrNotSent) {
		return false
	}
	if e, ok := errs.As(err); ok {
		return e.Status >= http.StatusInternalServerError
	}
	var flowRefused *FlowRefusedError
	if errors.As(err, &flowRefused) {
		return false
	}
	for _, refusal := range refusals {
		if errors.Is(err, refusal) {
			return false
		}
	}
	return true
}
