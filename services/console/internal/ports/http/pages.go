package http

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/services/console/internal/app"
	"github.com/parleyhq/parley/services/console/internal/domain/session"
)

// loginView is the sign-in form's data.
type loginView struct {
	Email string
	// Token is the pre-session anti-forgery token the form echoes.
	Token string
	// RetryAfter is the whole seconds a refused address or account waits.
	RetryAfter int
	// Insecure warns that the page came over plain HTTP from afar, where
	// the Secure session cookie will not be sent back.
	Insecure bool
	// ClearCookies warns that the page came over plain HTTP from afar and
	// CONSOLE_INSECURE_COOKIES sends the session cookie anyway.
	ClearCookies bool
}

// loginForm draws the sign-in form with a fresh anti-forgery token, also
// set in a cookie the post must match. Someone already signed in goes
// home.
func (c *Console) loginForm(ctx echo.Context) error {
	r := ctx.Request()
	if ck, err := r.Cookie(sessionCookie); err == nil {
		if _, _, err := c.app.Authenticate(r.Context(), ck.Value); err == nil {
			return ctx.Redirect(http.StatusSeeOther, "/")
		}
	}
	return c.loginPage(ctx, http.StatusOK, loginView{}, "")
}

// loginPage draws the form with a new pre-session token.
func (c *Console) loginPage(ctx echo.Context, status int, lv loginView, message string) error {
	token, err := session.NewToken()
	if err != nil {
		return err
	}
	r := ctx.Request()
	ctx.SetCookie(c.cookie(r, loginCookie, token))
	lv.Token = token
	lv.Insecure = plainHTTP(r) && !c.clearCookies(r)
	lv.ClearCookies = plainHTTP(r) && !onLoopback(r) && c.clearCookies(r)
	v := c.view(ctx, "Sign in")
	v.Status, v.Message, v.Page = status, message, lv
	return c.render(ctx, status, "login", v)
}

// login checks the form's anti-forgery token and origin, then the email
// and password, within the failed sign-in limits. A success replaces any
// session the browser had with a new one (no fixation) and goes home.
func (c *Console) login(ctx echo.Context) error {
	r := ctx.Request()
	if err := readForm(r); err != nil {
		return err
	}
	var want string
	if ck, err := r.Cookie(loginCookie); err == nil {
		want = ck.Value
	}
	email := ctx.FormValue("email")
	lv := loginView{Email: email}
	if !session.SameToken(ctx.FormValue(csrfField), want) || !sameOrigin(r) {
		c.obs.SignInStaleForm()
		return c.loginPage(ctx, http.StatusForbidden, lv,
			"This sign-in form was out of date or came from another site. Sign in again with this one.")
	}
	address := httpx.LimitKey(c.proxies.ClientAddr(r))
	in, err := c.app.SignIn(r.Context(), email, ctx.FormValue("password"), address)
	var limited *app.LimitedError
	switch {
	case errors.As(err, &limited):
		c.obs.SignInLimited()
		secs := ratelimit.Seconds(limited.RetryAfter)
		ctx.Response().Header().Set(ratelimit.HeaderRetryAfter, strconv.Itoa(secs))
		lv.RetryAfter = secs
		return c.loginPage(ctx, http.StatusTooManyRequests, lv,
			"Too many failed sign-ins from this address or for this account. Try again in "+strconv.Itoa(secs)+" seconds.")
	case errors.Is(err, app.ErrBadCredentials):
		c.obs.SignInWrong()
		return c.loginPage(ctx, http.StatusUnauthorized, lv, "The email or the password is wrong.")
	case err != nil:
		return err
	}
	if old, err := r.Cookie(sessionCookie); err == nil {
		if err := c.app.SignOut(r.Context(), old.Value); err != nil {
			// The new session stands; the old one ends at its expiry.
			c.log.Warn("end replaced session", zap.Error(err))
		}
	}
	c.obs.SignedIn()
	ctx.SetCookie(c.cookie(r, sessionCookie, in.Token))
	ctx.SetCookie(c.expired(r, loginCookie))
	return ctx.Redirect(http.StatusSeeOther, "/")
}

// logout ends the session and removes its cookie.
func (c *Console) logout(ctx echo.Context) error {
	r := ctx.Request()
	if err := c.app.SignOut(r.Context(), tokenOf(ctx)); err != nil {
		return err
	}
	ctx.SetCookie(c.expired(r, sessionCookie))
	return ctx.Redirect(http.StatusSeeOther, "/login")
}

// home is a workspace operator's workspace, or a platform operator's list.
func (c *Console) home(ctx echo.Context) error {
	op := operatorOf(ctx)
	if op.Platform() {
		return ctx.Redirect(http.StatusSeeOther, "/workspaces")
	}
	return ctx.Redirect(http.StatusSeeOther, workspacePath(op.WorkspaceID))
}

// workspaceList lists every workspace for a platform operator; a workspace
// operator has one, and goes to it.
func (c *Console) workspaceList(ctx echo.Context) error {
	op := operatorOf(ctx)
	if !op.Platform() {
		return ctx.Redirect(http.StatusSeeOther, workspacePath(op.WorkspaceID))
	}
	v := c.view(ctx, "Workspaces")
	v.Current = "workspaces"
	ws, err := c.app.Workspaces(ctx.Request().Context(), op)
	if err != nil {
		return c.serviceError(ctx, "workspaces", v, err)
	}
	v.Page = ws
	return c.render(ctx, http.StatusOK, "workspaces", v)
}

// workspacePage shows a workspace's plan, modules, AI units, rate limit
// and features.
func (c *Console) workspacePage(ctx echo.Context) error {
	id := ctx.Param("id")
	v := c.view(ctx, "Workspace")
	v.Workspace, v.Current = id, "workspace"
	w, err := c.app.Workspace(ctx.Request().Context(), operatorOf(ctx), id)
	if err != nil {
		return c.serviceError(ctx, "workspace", v, err)
	}
	v.Title = w.Name
	v.Page = workspaceView{Workspace: w}
	return c.render(ctx, http.StatusOK, "workspace", v)
}

// workspaceView adds what the template cannot work out to a workspace.
type workspaceView struct {
	gatewayapi.Workspace
}

// AIPercent is the share of the plan's AI units used, 0 to 100.
func (w workspaceView) AIPercent() int64 {
	if w.Plan.AILimit <= 0 {
		return 0
	}
	return min(w.Plan.AIUsed*100/w.Plan.AILimit, 100)
}

// serviceError draws page with a service's refusal in words and its
// status; a workspace that is not there (or not the operator's) is the
// 404 page; an error no service worded is the 500 page.
func (c *Console) serviceError(ctx echo.Context, page string, v view, err error) error {
	if errors.Is(err, app.ErrWorkspaceNotFound) {
		return toHTTP(err)
	}
	e, message, ok := c.refusal(ctx, page, err)
	if !ok {
		return err
	}
	v.Status, v.Message = e.Status, message
	return c.render(ctx, e.Status, page, v)
}

// refusal reads a service's refusal out of err and words it, with the
// request id, for page; ok is false when err is no service's. A 5xx is
// logged too, with what was being done, since the page shows only its
// words: every page that draws a refusal words it here.
func (c *Console) refusal(ctx echo.Context, page string, err error) (e *errs.Error, message string, ok bool) {
	e, ok = errs.As(err)
	if !ok {
		return nil, "", false
	}
	requestID := requestIDOf(ctx)
	if e.Status >= http.StatusInternalServerError {
		c.log.Warn("service refused", zap.String("page", page), zap.Error(err), zap.String("request_id", requestID))
	}
	return e, describe(e, requestID), true
}
