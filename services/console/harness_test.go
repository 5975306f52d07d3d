package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/adminclient"
	consoleapi "github.com/parleyhq/parley/pkg/api/console"
	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/pkg/errs"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/rpcserver"
	"github.com/parleyhq/parley/services/console/internal/adapters"
	consoleconfig "github.com/parleyhq/parley/services/console/internal/config"
	"github.com/parleyhq/parley/services/console/internal/domain/operator"
	httpport "github.com/parleyhq/parley/services/console/internal/ports/http"
	"github.com/parleyhq/parley/services/console/migrations"
)

// testCost keeps argon2id cheap under -race; the domain's tests hold the
// real parameters to their round trip.
var testCost = operator.Params{Memory: 1024, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

// password is every test operator's password.
const password = "correct horse battery staple"

type settings struct {
	idleTTL, maxAge     time.Duration
	perAddress, perAcct int
	proxies             string
	withoutGateway      bool
	withoutFlowRunner   bool
	insecureCookies     bool
	// redisHook sees every call of the console's Redis client.
	redisHook redis.Hook
	// callTimeout, when set, is how long the console waits for a
	// service's answer (rpc.CallTimeout otherwise).
	callTimeout time.Duration
}

func defaults() settings {
	return settings{idleTTL: time.Hour, maxAge: 24 * time.Hour, perAddress: 10, perAcct: 5}
}

// harness is one console, started by serve as in production, on the
// test's own slice of PostgreSQL, Redis and NATS: the pages on its own
// listener, the admin API on the rpc "admin" endpoint, and fakes of the
// services it reads, the gateway's admin workspace routes answering from
// a table.
type harness struct {
	env     *testenv.Env
	url     string
	gdb     *gorm.DB
	admin   *adminclient.Client
	gateway *fakeGateway
	// clock is the console's: the real time plus what tests advance.
	clock *clock

	// dispatcher is the fake webhook dispatcher (webhook_test.go).
	dispatcher *fakeDispatcher
	// messaging is the fake messaging's channels (keys_channels_fakes_test.go).
	messaging *fakeMessaging
	// flows is the fake flow-runner (flowrunner_fake_test.go), nil
	// withoutFlowRunner.
	flows *fakeFlowRunner
}

func newHarness(t *testing.T, s settings) *harness {
	t.Helper()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))

	gw := &fakeGateway{workspaces: map[string]gatewayapi.Workspace{}, refusals: map[string]*errs.Error{}}
	if !s.withoutGateway {
		gw.serve(t, env)
	}
	dispatcher := serveDispatcher(t, env)
	messaging := serveMessaging(t, env)
	var flows *fakeFlowRunner
	if !s.withoutFlowRunner {
		flows = serveFlowRunner(t, env)
	}
	cfg := consoleconfig.Config{
		Connections:                   env.Connections(),
		Proxying:                      httpx.Proxying{TrustedProxies: s.proxies},
		Addr:                          ports.FreeAddr(t),
		SessionTTL:                    s.idleTTL,
		SessionMaxAge:                 s.maxAge,
		LoginFailuresPerMinute:        s.perAddress,
		LoginAccountFailuresPerMinute: s.perAcct,
		InsecureCookies:               s.insecureCookies,
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	clk := &clock{}
	bg := testenv.Serve(t, "console", func(ctx context.Context) error {
		return serve(ctx, cfg, env.Logger(t), seams{clock: clk.now, passwordCost: testCost, redisHook: s.redisHook, upstream: s.upstream()})
	})
	url := "http://" + cfg.Addr
	// Ready once the listener answers: the rpc endpoints are served by then.
	bg.WaitReady(url, 20*time.Second)
	return &harness{env: env, url: url, gdb: env.DB(t, adapters.Schema, migrations.FS), gateway: gw, clock: clk,
		dispatcher: dispatcher, messaging: messaging, flows: flows,
		admin: adminclient.New(rpc.NewClient(env.NATS(t), env.RPCPrefix))}
}

// upstream is the seam that gives the console's calls callTimeout, nil
// when it is not set.
func (s settings) upstream() func(adminclient.Caller) adminclient.Caller {
	if s.callTimeout == 0 {
		return nil
	}
	return func(call adminclient.Caller) adminclient.Caller {
		return deadlineCaller{call: call, timeout: s.callTimeout}
	}
}

// deadlineCaller makes each call give up after timeout, as rpc's client
// does after rpc.CallTimeout.
type deadlineCaller struct {
	call    adminclient.Caller
	timeout time.Duration
}

func (c deadlineCaller) CallJSON(ctx context.Context, service, endpoint, workspaceID, method, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.call.CallJSON(ctx, service, endpoint, workspaceID, method, path, in, out)
}

func (c deadlineCaller) CallRaw(ctx context.Context, service, endpoint string, req *rpcv1.Request, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.call.CallRaw(ctx, service, endpoint, req, out)
}

// clock is a settable clock: the real time plus an offset tests move.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// routes are the console's pages and actions, as NewPublic routes them.
func routes() []*echo.Route {
	return httpport.NewPublic(httpport.PublicDeps{Log: zap.NewNop()}).Routes()
}

// fakeGateway answers the gateway's admin workspace routes the console
// reads, in the gateway's JSON.
type fakeGateway struct {
	mu         sync.Mutex
	workspaces map[string]gatewayapi.Workspace
	// refusals answer a workspace id with an error instead.
	refusals map[string]*errs.Error
	// keys are the workspaces' API keys (keys_channels_fakes_test.go).
	keys fakeKeys
	// stop takes the fake away (serveFake) until it is served again.
	stop func()
}

func (g *fakeGateway) serve(t *testing.T, env *testenv.Env) {
	t.Helper()
	e := httpx.NewEcho(env.Logger(t))
	e.GET("/admin/workspaces/:id", func(c echo.Context) error {
		g.mu.Lock()
		defer g.mu.Unlock()
		if e, ok := g.refusals[c.Param("id")]; ok {
			return e
		}
		w, ok := g.workspaces[c.Param("id")]
		if !ok {
			return errs.NotFound("workspace_not_found", "workspace not found")
		}
		return c.JSON(http.StatusOK, map[string]any{"workspace": w})
	})
	e.GET("/admin/workspaces", func(c echo.Context) error {
		g.mu.Lock()
		defer g.mu.Unlock()
		out := []gatewayapi.Workspace{}
		for _, w := range g.workspaces {
			out = append(out, w)
		}
		return c.JSON(http.StatusOK, map[string]any{"workspaces": out})
	})
	g.serveAPIKeys(e)
	g.stop = serveFake(t, env, rpc.ServiceGateway, map[string]http.Handler{rpc.EndpointAdmin: e})
}

// serveFake serves each endpoint's routes as the service over NATS until
// the test ends, or until stop: once stop returns, a call to the service
// finds none running (NATS answers "no responders"). Each fake has its
// own connection, as the service's own process would.
func serveFake(t *testing.T, env *testenv.Env, service string, endpoints map[string]http.Handler) (stop func()) {
	t.Helper()
	nc := env.NATS(t)
	srv := rpcserver.Serve(t, nc, env.RPCPrefix, service, env.Logger(t), endpoints)
	return func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
		// The server has taken the subscriptions away once it has read
		// all this connection sent.
		if err := nc.Flush(); err != nil {
			t.Error(err)
		}
	}
}

// recorder is a fake's middleware that hands note each request with its
// body (which stays readable for the handler) and answers the refusal note
// returns, if any, instead of the route.
func recorder(note func(c echo.Context, body []byte) *errs.Error) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if refusal := note(c, body); refusal != nil {
				return refusal
			}
			return next(c)
		}
	}
}

// workspace adds a workspace to the fake gateway and returns its id.
func (h *harness) workspace(name string) string {
	id := uuid.NewString()
	h.gateway.mu.Lock()
	defer h.gateway.mu.Unlock()
	w := gatewayapi.Workspace{ID: id, Name: name, Slug: strings.ToLower(name), CreatedAt: "2026-11-24T04:00:00Z",
		Plan:      gatewayapi.Plan{Name: "api", Modules: []string{"developer_api", "flows"}, AIUsed: 250, AILimit: 1000},
		RateLimit: gatewayapi.RateLimit{PerMinute: 120}, Features: []string{"flows_api"}}
	h.gateway.workspaces[id] = w
	return id
}

// operator creates an operator with the test password through the admin
// endpoint, as parleyctl does; workspaceID empty for a platform operator.
func (h *harness) operator(t *testing.T, email, workspaceID string) {
	t.Helper()
	if _, err := h.admin.CreateOperator(context.Background(), consoleapi.NewOperator{Email: email, Password: password, WorkspaceID: workspaceID}); err != nil {
		t.Fatalf("create operator %s: %v", email, err)
	}
}

// signedInToAcme is a harness with the workspace Acme and a browser
// signed in as its workspace operator, ann.
func signedInToAcme(t *testing.T) (*harness, string, *browser) {
	t.Helper()
	return signedInToAcmeWith(t, defaults())
}

// signedInToAcmeWith is signedInToAcme on a harness with settings s.
func signedInToAcmeWith(t *testing.T, s settings) (*harness, string, *browser) {
	t.Helper()
	h := newHarness(t, s)
	own := h.workspace("Acme")
	h.operator(t, "ann@example.com", own)
	b := h.browser(t)
	b.mustSignIn("ann@example.com")
	return h, own, b
}

// browser is one browser: its own cookies, redirects not followed, and
// the console's own Origin on every post unless told otherwise.
type browser struct {
	t      *testing.T
	h      *harness
	client *http.Client
	// forwardedFor, when set, is sent as X-Forwarded-For (a trusted proxy's
	// client).
	forwardedFor string
}

func (h *harness) browser(t *testing.T) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, h: h, client: &http.Client{
		Jar:           jar,
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

type response struct {
	status int
	header http.Header
	body   string
}

// mustContain fails the test unless the response's body holds every part.
func mustContain(t *testing.T, r response, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(r.body, p) {
			t.Fatalf("the page (%d) lacks %q:\n%s", r.status, p, r.body)
		}
	}
}

func (r response) location() string { return r.header.Get("Location") }

// setCookie returns the Set-Cookie of name in r, nil when there is none.
func (r response) setCookie(name string) *http.Cookie {
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// do sends one request; headers nil means the defaults (a post carries
// the console's Origin).
func (b *browser) do(method, path string, form url.Values, headers map[string]string) response {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.h.url+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if headers == nil && method != http.MethodGet {
		headers = map[string]string{"Origin": b.h.url}
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	if b.forwardedFor != "" {
		req.Header.Set("X-Forwarded-For", b.forwardedFor)
	}
	return b.send(req)
}

// send sends a request built by do or postMultipart and reads the whole
// answer.
func (b *browser) send(req *http.Request) response {
	b.t.Helper()
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL.RequestURI(), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

func (b *browser) get(path string) response { return b.do(http.MethodGet, path, nil, nil) }

var csrfInput = regexp.MustCompile(`name="csrf_token" value="([^"]*)"`)

// csrf is the token in a page's forms.
func csrf(t *testing.T, page response) string {
	t.Helper()
	m := csrfInput.FindStringSubmatch(page.body)
	if m == nil || m[1] == "" {
		t.Fatalf("no csrf_token in the page (%d): %s", page.status, page.body)
	}
	return m[1]
}

// signIn fills in and posts the sign-in form.
func (b *browser) signIn(email, pw string) response {
	b.t.Helper()
	form := b.get("/login")
	if form.status != http.StatusOK {
		b.t.Fatalf("GET /login = %d", form.status)
	}
	return b.do(http.MethodPost, "/login", url.Values{"email": {email}, "password": {pw}, "csrf_token": {csrf(b.t, form)}}, nil)
}

// mustSignIn signs in and fails the test unless it succeeded.
func (b *browser) mustSignIn(email string) {
	b.t.Helper()
	if r := b.signIn(email, password); r.status != http.StatusSeeOther || r.location() != "/" {
		b.t.Fatalf("sign in %s = %d %q: %s", email, r.status, r.location(), r.body)
	}
}

// sessionToken is the session cookie the browser holds.
func (b *browser) sessionToken() string {
	u, _ := url.Parse(b.h.url)
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == "parley_console_session" {
			return c.Value
		}
	}
	return ""
}

// pageCSRF is the token of the forms on a signed-in page.
func (b *browser) pageCSRF(path string) string {
	b.t.Helper()
	return csrf(b.t, b.get(path))
}

// authenticated reports whether token, sent by hand as the session
// cookie from a fresh browser, opens a session: the console's home
// answers it with a page of its own rather than sending it to sign in.
func authenticated(t *testing.T, h *harness, token string) bool {
	t.Helper()
	r := h.browser(t).do(http.MethodGet, "/", nil, map[string]string{"Cookie": "parley_console_session=" + token})
	return r.status != http.StatusSeeOther || r.location() != "/login"
}
