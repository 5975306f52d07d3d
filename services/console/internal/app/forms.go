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
// (by the console or a service) may be posted again. A post whose call
// that writes gave no answer that says whether it did the work (no answer
// in time, a 5xx, the connection lost) may have done it: its repeat is
// ErrFormOutcomeUnknown and does nothing; a read before that call
// failing, in any way, did nothing. A form id that is "" or no id
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
// do made, for the repeats. do makes its calls that write through
// written: such a call whose outcome is unknown keeps the form claimed
// and is a *FormOutcomeUnknownError; any other failure (a refusal, a read
// failing: nothing was written) frees the form. A form id that is no id,
// or no Forms, does do unchecked.
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
		var unsettled *unsettledWrite
		switch {
		case err == nil:
			claim.Done(context.WithoutCancel(ctx), ref(out))
		case errors.As(err, &unsettled):
			claim.Unknown(context.WithoutCancel(ctx))
			err = &FormOutcomeUnknownError{Err: err}
		default:
			claim.Refused(context.WithoutCancel(ctx))
		}
	}
	return out, err
}

// written is the result of a form's call that writes (once's do), its
// error marked when it leaves open whether the service did the work. Only
// a call that writes can: whatever else fails (a read before the write, a
// refusal, the console's own check) wrote nothing, so however it is
// worded it frees the form.
func written[T any](out T, err error) (T, error) {
	if err != nil && mayHaveWritten(err) {
		err = &unsettledWrite{err: err}
	}
	return out, err
}

// unsettledWrite is a call that writes failing without saying whether the
// service did the work (written).
type unsettledWrite struct{ err error }

func (e *unsettledWrite) Error() string { return e.err.Error() }
func (e *unsettledWrite) Unwrap() error { return e.err }

// mayHaveWritten reports whether err, a call that writes failing, leaves
// open whether the service did that work. A service's refusal (a 4xx)
// and a call that reached no service (rpc.ErrNotSent) did nothing. A 5xx
// may come after the work (a service failing once it was done), and a
// call not answered in time, cut off or cancelled may have been done; so
// may a call whose answer could not be read.
func mayHaveWritten(err error) bool {
	if errors.Is(err, rpc.ErrNotSent) {
		return false
	}
	if e, ok := errs.As(err); ok {
		return e.Status >= http.StatusInternalServerError
	}
	return true
}
