package http

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/services/console/internal/app"
)

// Forms posted twice (docs/console.md "Forms posted twice"): every form
// that makes or sends something carries the page's form id (view.FormID)
// in formIDField, and its use case does the work once per form (app.Forms).
// A repeat after the work goes where the first post led, with the note
// (againParam); one while it runs, or after a first post whose outcome is
// unknown, is 409, in words.

// formIDField is the hidden field carrying the page's form id.
const formIDField = "form_id"

// againParam marks the page a form posted again led to: the page says
// the form was submitted already (the "again" template).
const againParam = "again"

// codeFormRunning is a form posted again while its first post runs.
const codeFormRunning = "form_in_progress"

// formRunning says why a form posted again while its first post runs did
// nothing.
const formRunning = "This form is being submitted already: its first post is still at work, and this one did nothing. Reload the page in a moment to see what it did."

// codeFormOutcomeUnknown is a form posted again after its first post got
// no answer saying whether it was done.
const codeFormOutcomeUnknown = "form_outcome_unknown"

// formOutcomeUnknown says why a form posted again after its first post's
// outcome was unknown did nothing, and what to do: where is what the
// operator checks to see whether it was done.
func formOutcomeUnknown(where string) string {
	return "This form's first post may have been done: the service did not answer in time, so the console cannot tell, and this post did nothing. " +
		"Check " + where + "; to do it anyway, reload the page and post the new form."
}

// formID is the form id the post carries, "" for a post without one.
func formID(ctx echo.Context) string { return ctx.FormValue(formIDField) }

// formRepeat answers a guarded form posted again, when err says it was:
// after its first post was done, a redirect to done(ref) (ref naming what
// the first post made) with againParam; while it runs, or when its first
// post's outcome is unknown (where saying what shows whether it was
// done), 409 drawn by draw (the form's page), or the error page when draw
// is nil. repeated is false for any other err, which the caller answers.
func formRepeat(ctx echo.Context, err error, done func(ref string) string, where string, draw func(status int, message string) error) (repeated bool, answer error) {
	var first *app.FormDoneError
	code, message := "", ""
	switch {
	case errors.As(err, &first):
		return true, ctx.Redirect(http.StatusSeeOther, withAgain(done(first.Ref)))
	case errors.Is(err, app.ErrFormRunning):
		code, message = codeFormRunning, formRunning
	case errors.Is(err, app.ErrFormOutcomeUnknown):
		code, message = codeFormOutcomeUnknown, formOutcomeUnknown(where)
	default:
		return false, nil
	}
	if draw == nil {
		return true, errs.New(http.StatusConflict, code, message)
	}
	return true, draw(http.StatusConflict, message)
}

// withAgain is location with againParam added to its query, before its
// fragment.
func withAgain(location string) string {
	path, fragment, hasFragment := strings.Cut(location, "#")
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	path += sep + againParam + "=1"
	if hasFragment {
		path += "#" + fragment
	}
	return path
}
