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

// formMayHaveBeenDone says what a form's post whose service gave no answer
// saying whether it did the work (said, in the service's words) may have
// done, and what to do: the same as its repeats will say.
func formMayHaveBeenDone(said, where string) string {
	return "This post may have been done: " + said + ", so the console cannot tell. " +
		"Check " + where + " before posting it again; posted again, this form does nothing, so to do it anyway, reload the page and post the new form."
}

// formID is the form id the post carries, "" for a post without one.
func formID(ctx echo.Context) string { return ctx.FormValue(formIDField) }

// formRepeat answers a guarded form's post whose claim decided the
// answer, when err says so: posted again after its first post was done, a
// redirect to done(ref) (ref naming what the first post made) with
// againParam; posted again while it runs, or after a first post whose
// outcome is unknown (where saying what shows whether it was done), 409;
// a post whose outcome is unknown, its service's status (5xx) with words
// saying it may have been done and where to look (logged as a refusal
// is). Drawn by draw (the form's page), or the error page when draw is
// nil. repeated is false for any other err, which the caller answers.
func (c *Console) formRepeat(ctx echo.Context, err error, done func(ref string) string, where string, draw func(status int, message string) error) (repeated bool, answer error) {
	var first *app.FormDoneError
	var unknown *app.FormOutcomeUnknownError
	status, code, message := http.StatusConflict, "", ""
	switch {
	case errors.As(err, &first):
		return true, ctx.Redirect(http.StatusSeeOther, withAgain(done(first.Ref)))
	case errors.Is(err, app.ErrFormRunning):
		code, message = codeFormRunning, formRunning
	case errors.Is(err, app.ErrFormOutcomeUnknown):
		code, message = codeFormOutcomeUnknown, formOutcomeUnknown(where)
	case errors.As(err, &unknown):
		// A service's 5xx or no answer (always an *errs.Error); anything
		// else is the console's own failure, for the error page.
		e, _, ok := c.refusal(ctx, "form", err)
		if !ok {
			return false, nil
		}
		status, code, message = e.Status, e.Code, formMayHaveBeenDone(strings.TrimSuffix(e.Message, "; try again shortly"), where)
	default:
		return false, nil
	}
	if draw == nil {
		return true, errs.New(status, code, message)
	}
	return true, draw(status, message)
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
