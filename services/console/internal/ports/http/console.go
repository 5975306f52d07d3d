package http

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/console/internal/app"
	"github.com/parleyhq/parley/services/console/internal/domain/operator"
	"github.com/parleyhq/parley/services/console/internal/domain/session"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// pageNames are the templates under templates/, each drawn inside layout.
var pageNames = []string{"login", "workspaces", "workspace", "error", "webhook", "deliveries", "delivery", "flows", "run", "kb", "keys", "key_created", "channels", "inbox", "conversation"}

// Console serves the pages operators use in a browser.
type Console struct {
	app     *app.App
	log     *zap.Logger
	proxies httpx.Proxies
	pages   map[string]*template.Template
	now     func() time.Time
	// insecureCookies drops Secure from cookies sent over plain HTTP
	// (PublicDeps.InsecureCookies).
	insecureCookies bool
	obs             Observer
	// inboxChanges feed the inbox pages' event streams; nil: no live
	// updates.
	inboxChanges InboxChanges
}

// PublicDeps are what NewPublic builds the console's pages from.
type PublicDeps struct {
	App *app.App
	// Proxies are trusted to name the client (X-Forwarded-For,
	// TRUSTED_PROXIES) for the address the sign-in limits count.
	Proxies httpx.Proxies
	// InsecureCookies sends the console's cookies without Secure over
	// plain HTTP whatever the client's address (CONSOLE_INSECURE_COOKIES):
	// for a console tried out in docker compose, which a browser on the
	// same machine reaches through a published port, so the console sees
	// the bridge's gateway as the peer, not loopback. Anyone who can watch
	// that plain HTTP can take the session: never for a console reached
	// over a network. Requests over HTTPS (TLS, or X-Forwarded-Proto https
	// from a proxy) keep Secure cookies either way.
	InsecureCookies bool
	// Observer counts requests and sign-ins; nil counts nothing.
	Observer Observer
	// InboxChanges feed the inbox pages' event streams (live updates);
	// nil turns them off, and the pages show changes on reload.
	InboxChanges InboxChanges
	Log          *zap.Logger
}

// NewPublic returns the console's pages, answering every error as a page.
func NewPublic(d PublicDeps) *echo.Echo {
	c := &Console{app: d.App, log: d.Log, proxies: d.Proxies, insecureCookies: d.InsecureCookies, obs: d.Observer, inboxChanges: d.InboxChanges,
		pages: map[string]*template.Template{}, now: time.Now}
	if c.obs == nil {
		c.obs = nopObserver{}
	}
	for _, name := range pageNames {
		// Embedded at build time: a template that does not parse fails
		// every test.
		c.pages[name] = template.Must(template.New("layout.html").Funcs(template.FuncMap{"day": day, "minute": displayTime, "dollars": dollars}).
			ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
	}

	e := httpx.NewEcho(d.Log)
	e.HTTPErrorHandler = c.errorPage
	e.Use(c.count)
	// The largest form is a flow document or a knowledge-base file: the
	// flow-runner takes documents up to 1 MiB, and a form's encoding may
	// triple them. Everything past sign-in is an operator's; before it,
	// only the sign-in form is read.
	e.Use(securityHeaders, middleware.BodyLimit("4M"))

	static, _ := fs.Sub(staticFS, "static")
	e.GET("/static/*", staticFiles(static))
	e.GET("/login", c.loginForm)
	e.POST("/login", c.login)
	e.POST("/logout", c.logout, c.signedIn)
	e.GET("/", c.home, c.signedIn)
	e.GET("/workspaces", c.workspaceList, c.signedIn)
	// Every page and action of a workspace is under /workspaces/:id, held
	// to the operator's workspace by inWorkspace.
	ws := e.Group("/workspaces/:id", c.signedIn, c.inWorkspace)
	ws.GET("", c.workspacePage)
	c.mountWebhook(ws)
	c.mountFlows(ws)
	c.mountKnowledge(ws)
	c.mountKeysAndChannels(ws)
	c.mountInbox(ws)
	return e
}

// staticFiles serves the files of files under /static/, cached for an
// hour. A name that is no file there (a folder included, which would be
// listed) is the console's 404 page, as any page that does not exist
// (docs/console.md "Errors in words").
func staticFiles(files fs.FS) echo.HandlerFunc {
	serve := http.StripPrefix("/static/", http.FileServerFS(files))
	return func(ctx echo.Context) error {
		if info, err := fs.Stat(files, ctx.Param("*")); err != nil || info.IsDir() {
			return echo.ErrNotFound
		}
		ctx.Response().Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(time.Hour.Seconds())))
		serve.ServeHTTP(ctx.Response(), ctx.Request())
		return nil
	}
}

const (
	ctxOperator = "console.operator"
	ctxToken    = "console.token"
)

func operatorOf(c echo.Context) operator.Operator {
	o, _ := c.Get(ctxOperator).(operator.Operator)
	return o
}

func tokenOf(c echo.Context) string {
	t, _ := c.Get(ctxToken).(string)
	return t
}

// csrfField and csrfHeader carry the anti-forgery token: the hidden field
// of every form, the header for scripted requests.
const (
	csrfField  = "csrf_token"
	csrfHeader = "X-CSRF-Token"
)

// signedIn admits requests with a live session and slides its expiry;
// others are sent to the sign-in page and their cookie removed. A request
// that changes something must also carry the session's CSRF token and come
// from the console's own origin, or it is refused (403) unheard.
func (c *Console) signedIn(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ctx echo.Context) error {
		r := ctx.Request()
		var token string
		if ck, err := r.Cookie(sessionCookie); err == nil {
			token = ck.Value
		}
		op, _, err := c.app.Authenticate(r.Context(), token)
		if err != nil {
			// Nothing is read from whoever is not signed in.
			httpx.DropBody(ctx)
		}
		if errors.Is(err, session.ErrNotFound) {
			if token != "" {
				ctx.SetCookie(c.expired(r, sessionCookie))
			}
			return ctx.Redirect(http.StatusSeeOther, "/login")
		}
		if err != nil {
			return err
		}
		if !safeMethod(r.Method) {
			if err := readForm(r); err != nil {
				return err
			}
			given := r.Header.Get(csrfHeader)
			if given == "" {
				given = ctx.FormValue(csrfField)
			}
			if !session.SameToken(given, session.CSRFToken(token)) || !sameOrigin(r) {
				return errs.New(http.StatusForbidden, codeCSRF, "this form is out of date or came from another site: go back, reload the page and try again")
			}
		}
		ctx.Set(ctxOperator, op)
		ctx.Set(ctxToken, token)
		return next(ctx)
	}
}

// formMemory is how much of a multipart form is held in memory rather
// than in temporary files: echo's own (FormValue, FormFile), more than the
// body limit, so no form goes to disk.
const formMemory = 32 << 20

// readForm reads the form of r, so that FormValue and FormFile read what
// arrived: FormValue alone would take a form that did not arrive as an
// empty one. A body over the limit keeps its 413; one that did not arrive
// within HTTP_READ_TIMEOUT is 408, and one that cannot be read otherwise
// 400 (httpx.ReadFailed).
func readForm(r *http.Request) error {
	err := r.ParseForm()
	if err == nil && strings.HasPrefix(r.Header.Get(echo.HeaderContentType), echo.MIMEMultipartForm) {
		err = r.ParseMultipartForm(formMemory)
	}
	var tooLarge *echo.HTTPError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooLarge) && tooLarge.Code == http.StatusRequestEntityTooLarge:
		return tooLarge
	default:
		return httpx.ReadFailed(err)
	}
}

// codeCSRF is a state-changing request without the session's token or
// from another origin.
const codeCSRF = "csrf_refused"

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// inWorkspace refuses a workspace the operator may not see with the same
// 404 as one that does not exist, so ids of other workspaces are never
// confirmed.
func (c *Console) inWorkspace(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ctx echo.Context) error {
		if !operatorOf(ctx).Sees(ctx.Param("id")) {
			return toHTTP(app.ErrWorkspaceNotFound)
		}
		return next(ctx)
	}
}

// view is what every page's template gets.
type view struct {
	Title    string
	Operator *operator.Operator
	// CSRF is the token the page's forms carry.
	CSRF string
	// Workspace is the workspace the page is about, for the navigation;
	// empty outside one.
	Workspace string
	// Current names the navigation entry of this page.
	Current string
	// Status and Message report an error in words.
	Status  int
	Message string
	// FormID is new with each page drawn: the hidden form_id of its forms
	// that make or send something, posted once (forms.go).
	FormID string
	// Again says the page is where a form posted again led (?again=1).
	Again bool
	Page  any
}

func (c *Console) view(ctx echo.Context, title string) view {
	v := view{Title: title, FormID: uuid.NewString(), Again: ctx.QueryParam(againParam) != ""}
	if tok := tokenOf(ctx); tok != "" {
		op := operatorOf(ctx)
		v.Operator = &op
		v.CSRF = session.CSRFToken(tok)
	}
	return v
}

// render draws page into a buffer first, so a template failure is an error
// page and never half a page.
func (c *Console) render(ctx echo.Context, status int, name string, v view) error {
	var b bytes.Buffer
	if err := c.pages[name].Execute(&b, v); err != nil {
		return fmt.Errorf("render %s: %w", name, err)
	}
	h := ctx.Response().Header()
	h.Set("Cache-Control", "no-store")
	return ctx.HTMLBlob(status, b.Bytes())
}

// errorPage answers every error as a page that says in words what
// happened; unknown errors are logged once with the request id, which the
// page shows.
func (c *Console) errorPage(err error, ctx echo.Context) {
	if ctx.Response().Committed {
		return
	}
	e := errs.FromEcho(err)
	requestID := requestIDOf(ctx)
	if _, own := errs.As(err); e.Code == errs.CodeInternal || (!own && e.Status == http.StatusServiceUnavailable) {
		c.log.Error("request failed", zap.Error(err), zap.String("request_id", requestID),
			zap.String("method", ctx.Request().Method), zap.String("path", ctx.Request().URL.Path))
	}
	for k, vs := range e.Header {
		for _, v := range vs {
			ctx.Response().Header().Add(k, v)
		}
	}
	v := c.view(ctx, http.StatusText(e.Status))
	v.Status = e.Status
	v.Message = describe(e, requestID)
	if rerr := c.render(ctx, e.Status, "error", v); rerr != nil {
		c.log.Error("render error page", zap.Error(rerr))
		_ = ctx.String(e.Status, v.Message)
	}
}

// describe says in words what an error means to the operator.
func describe(e *errs.Error, requestID string) string {
	switch {
	case e.Code == errs.CodeInternal:
		return "Something went wrong on the console's side. Try again; if it keeps happening, tell your platform operator request id " + requestID + "."
	case e.Status == http.StatusNotFound && e.Code == errs.CodeNotFound:
		return "There is no such page."
	case e.Status == http.StatusServiceUnavailable:
		return "A service the console needs did not answer (" + e.Message + "). Try again in a moment."
	}
	return sentence(e.Message)
}

// day is the date of an RFC 3339 timestamp (2026-11-24), or the
// timestamp as it came when it is not one.
func day(timestamp string) string {
	if t, err := time.Parse(time.RFC3339Nano, timestamp); err == nil {
		return t.UTC().Format(time.DateOnly)
	}
	return timestamp
}

// sentence starts msg with a capital and ends it with a full stop.
func sentence(msg string) string {
	if msg == "" {
		return ""
	}
	first, size := utf8.DecodeRuneInString(msg)
	msg = string(unicode.ToUpper(first)) + msg[size:]
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}
