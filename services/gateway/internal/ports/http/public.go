package http

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/services/gateway/internal/app"
	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
)

// The deprecated base address (docs/api.md "Requests and keys"): it answers like
// /v1 and says so. The date is the change-log entry that moved the base to
// /v1 (2026-09-18), in RFC 9745 form.
const legacyPrefix = "/api/v1"

var deprecation = "@" + strconv.FormatInt(time.Date(2026, 9, 18, 0, 0, 0, 0, time.UTC).Unix(), 10)

// Observer is told what the Developer API did, for the gateway's metrics.
type Observer interface {
	// Answered is a request answered with status; group is the first path
	// segment after /v1 ("unknown" for no route).
	Answered(group string, status int)
	// RateLimited is a request refused with 429 rate_limited, by the
	// workspace's limit or the failed authentications of its address.
	RateLimited()
	// Forwarded is a request forwarded to service, which took took to
	// answer it (a stream: to answer its head).
	Forwarded(service string, took time.Duration)
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) Answered(string, int)            {}
func (nopObserver) RateLimited()                    {}
func (nopObserver) Forwarded(string, time.Duration) {}

// DefaultAuthFailuresPerMinute is AUTH_FAILURES_PER_MINUTE's default.
const DefaultAuthFailuresPerMinute = 30

// PublicDeps are what NewPublic builds the Developer API from.
type PublicDeps struct {
	App     *app.App
	Limiter *ratelimit.Limiter
	// ChangeTokenKey is the Redis key of the accounts change token
	// (adapters.ChangeToken.Key): a request whose credential is cached
	// reads it in the same call as its rate limits.
	ChangeTokenKey string
	// RPC reaches the services requests are forwarded to.
	RPC *rpc.Client
	// MaxPayload is the NATS server's largest message
	// (nats.Conn.MaxPayload): requests that would not fit are refused with
	// 413 instead of failing in the client.
	MaxPayload int64
	// AuthFailuresPerMinute bounds the failed authentications (401s) one
	// client address may have per minute (AUTH_FAILURES_PER_MINUTE); past
	// it, its requests are refused with 429 before any key is looked up.
	// Zero is DefaultAuthFailuresPerMinute.
	AuthFailuresPerMinute int
	// Proxies are trusted to name the client (X-Forwarded-For,
	// TRUSTED_PROXIES); with none, the client is the connection's peer.
	Proxies httpx.Proxies
	// SSEWriteTimeout bounds each write of a relayed stream to its client
	// (SSE_WRITE_TIMEOUT); zero is httpx.StreamWriteTimeout.
	SSEWriteTimeout time.Duration
	// Observer counts requests; nil counts nothing.
	Observer Observer
	Log      *zap.Logger
}

// public is the Developer API.
type public struct {
	app            *app.App
	limiter        *ratelimit.Limiter
	changeTokenKey string
	fwd            *forwarder
	obs            Observer
	log            *zap.Logger
	// authFailures bounds failed authentications per client address and
	// minute; proxies say who the client is.
	authFailures int
	proxies      httpx.Proxies
}

// NewPublic returns the gateway's own listener: /v1 and /api/v1, and the
// API's description, which needs no key: /v1/openapi.json and the /docs
// page (docs.go). Under /v1 it answers GET /v1/me itself and forwards
// every other route to its owning service (routes.go).
func NewPublic(d PublicDeps) *echo.Echo {
	p := &public{
		app:            d.App,
		limiter:        d.Limiter,
		changeTokenKey: d.ChangeTokenKey,
		obs:            d.Observer,
		log:            d.Log,
		authFailures:   d.AuthFailuresPerMinute,
		proxies:        d.Proxies,
	}
	if p.obs == nil {
		p.obs = nopObserver{}
	}
	if p.authFailures == 0 {
		p.authFailures = DefaultAuthFailuresPerMinute
	}
	p.fwd = &forwarder{client: d.RPC, maxPayload: d.MaxPayload, writeTimeout: d.SSEWriteTimeout, obs: p.obs, log: d.Log}
	if p.fwd.writeTimeout == 0 {
		p.fwd.writeTimeout = httpx.StreamWriteTimeout
	}

	// httpx.NewEcho's request-id middleware gives every request its
	// X-Request-Id before any of these.
	e := httpx.NewEcho(d.Log)
	newReference().mount(e)
	for _, g := range []*echo.Group{
		e.Group("/v1", p.observe, p.authenticate, p.rateLimit),
		e.Group(legacyPrefix, deprecated, p.observe, p.authenticate, p.rateLimit),
	} {
		g.Match([]string{http.MethodGet, http.MethodHead}, "/me", p.me)
		g.Any("/*", p.serve)
		// The base itself (/v1) is no route: like every unknown path
		// under it, it is answered 404 only after authentication.
		g.RouteNotFound("", p.serve)
	}
	return e
}

// deprecated marks every answer under /api/v1, errors included, and points
// to the same resource under /v1.
func deprecated(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Deprecation", deprecation)
		h.Add("Link", fmt.Sprintf("<%s>; rel=\"successor-version\"", v1Path(c.Request().URL.EscapedPath())))
		return next(c)
	}
}

// observe counts each request by route group and final status. It renders
// errors itself (as httpx's access log does) so that the status is known.
func (p *public) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := next(c); err != nil {
			c.Error(err)
		}
		p.obs.Answered(groupOf(c.Request().URL.EscapedPath()), c.Response().Status)
		return nil
	}
}

const (
	ctxWorkspace = "parley.workspace"
	// ctxRate is the workspace's ratelimit.Result when admit already
	// counted the request.
	ctxRate = "parley.rate"
)

func workspaceOf(c echo.Context) account.Workspace {
	w, _ := c.Get(ctxWorkspace).(account.Workspace)
	return w
}

// authenticate admits requests with a valid Bearer key of a workspace whose
// plan includes developer_api. Every key looked up costs a database query,
// so a client address with authFailures failed authentications this minute
// is refused (429 rate_limited, Retry-After) before its key is looked up,
// valid or not, until the minute ends. Only failures count: a client with
// a good key is never slowed by this. The 401s themselves are unchanged by
// the count, so they tell a prober nothing about it. Failures are counted
// once they happen, so requests already in flight may pass the bound by
// their number: it bounds the rate of lookups, not an exact count. A
// refused request's body is never read (httpx.DropBody).
func (p *public) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		w, err := p.admit(c)
		if err != nil {
			httpx.DropBody(c)
			return err
		}
		c.Set(ctxWorkspace, w)
		return next(c)
	}
}

// admit is authenticate's check: the workspace of the request's key, or
// why it is refused.
//
// A request whose key's credential this instance holds (most of them)
// costs one Redis call: the address's failed authentications peeked, the
// change token compared with the credential's, and, only when both pass,
// the workspace's request counted for rateLimit (ratelimit.AllowIf), in
// the order and with the outcome of the three calls the full path makes.
// Any other request, or one whose token no longer matches (a change was
// made, or Redis lost it), takes the full path.
func (p *public) admit(c echo.Context) (account.Workspace, error) {
	r := c.Request()
	guard := ratelimit.Bucket{Name: "authfail:" + httpx.LimitKey(p.proxies.ClientAddr(r)), Limit: p.authFailures}
	authorization := r.Header.Values(echo.HeaderAuthorization)
	if w, token, ok := p.app.Cached(authorization, r.URL.RawQuery); ok {
		got, err := p.limiter.AllowIf(r.Context(), guard, ratelimit.Condition{Key: p.changeTokenKey, Value: token}, p.workspaceBucket(w))
		if err != nil {
			// The limiter and the token are one Redis: the full path would
			// only wait for it a second time before the same 503.
			return account.Workspace{}, p.limiterDown(c, err)
		}
		if !got.Guard.Allowed {
			return account.Workspace{}, p.authThrottled(got.Guard)
		}
		if got.Held {
			c.Set(ctxRate, got.Result)
			return w, nil
		}
	}
	seen, err := p.limiter.Peek(r.Context(), guard.Name, guard.Limit)
	if err != nil {
		return account.Workspace{}, p.limiterDown(c, err)
	}
	if !seen.Allowed {
		return account.Workspace{}, p.authThrottled(seen)
	}
	w, err := p.app.Authenticate(r.Context(), authorization, r.URL.RawQuery)
	if errors.Is(err, account.ErrChangesUnavailable) {
		// As with the limiter: without Redis no cached credential can be
		// trusted, so the request is refused rather than let through.
		p.log.Warn("accounts change token unavailable", zap.Error(err),
			zap.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)))
		return account.Workspace{}, errs.New(http.StatusServiceUnavailable, errs.CodeServiceUnavailable, "credential check unavailable; try again shortly")
	}
	if err != nil {
		herr := toHTTP(err)
		if e, ok := errs.As(herr); ok && e.Status == http.StatusUnauthorized {
			if _, cerr := p.limiter.Allow(r.Context(), guard.Name, guard.Limit); cerr != nil {
				// The failure goes uncounted; the 401 stands.
				p.log.Warn("failed authentication not counted", zap.Error(cerr))
			}
		}
		return account.Workspace{}, herr
	}
	return w, nil
}

// limiterDown is the refusal of a request whose limits cannot be read:
// without them it is not let through unlimited.
func (p *public) limiterDown(c echo.Context, err error, fields ...zap.Field) error {
	p.log.Warn("rate limiter unavailable", append(fields, zap.Error(err),
		zap.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)))...)
	return errs.New(http.StatusServiceUnavailable, errs.CodeServiceUnavailable, "rate limiter unavailable; try again shortly")
}

// authThrottled is the refusal of an address past its failed
// authentications, seen.
func (p *public) authThrottled(seen ratelimit.Result) error {
	p.obs.RateLimited()
	secs := ratelimit.Seconds(seen.RetryAfter())
	return errs.Newf(http.StatusTooManyRequests, errs.CodeRateLimited,
		"too many failed authentications from this address; retry in %d s", secs).
		WithHeader(ratelimit.HeaderRetryAfter, strconv.Itoa(secs))
}

// workspaceBucket is w's per-minute limit.
func (p *public) workspaceBucket(w account.Workspace) ratelimit.Bucket {
	return ratelimit.Bucket{Name: "api:" + w.ID, Limit: w.RateLimit(p.app.DefaultRatePerMinute())}
}

// rateLimit counts the request against the workspace's per-minute limit
// (unless admit already did) and puts RateLimit-* on the response whatever
// comes next, errors included. When Redis cannot be reached the request is
// refused (503) rather than let through unlimited: the limit protects the
// services behind the gateway.
func (p *public) rateLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		res, counted := c.Get(ctxRate).(ratelimit.Result)
		if !counted {
			w := workspaceOf(c)
			b := p.workspaceBucket(w)
			var err error
			if res, err = p.limiter.Allow(c.Request().Context(), b.Name, b.Limit); err != nil {
				return p.limiterDown(c, err, zap.String("workspace_id", w.ID))
			}
		}
		res.SetHeaders(c.Response().Header())
		if !res.Allowed {
			p.obs.RateLimited()
			return errs.Newf(http.StatusTooManyRequests, errs.CodeRateLimited,
				"rate limit of %d requests per minute reached; retry in %d s", res.Limit, ratelimit.Seconds(res.RetryAfter()))
		}
		return next(c)
	}
}

// serve forwards every known route but /v1/me to its owning service, and
// answers the rest: 404 for no route, 405 for /v1/me with a method other
// than GET or HEAD (those are routed to me).
func (p *public) serve(c echo.Context) error {
	r := c.Request()
	path := v1Path(r.URL.EscapedPath())
	rt, ok := resolve(path)
	if !ok {
		return errs.Newf(http.StatusNotFound, errs.CodeNotFound, "no such route: %s %s", httpx.Clip(r.Method), httpx.Clip(path))
	}
	if rt.service == "" {
		c.Response().Header().Set("Allow", "GET, HEAD")
		return errs.New(http.StatusMethodNotAllowed, errs.CodeMethodNotAllowed, "method not allowed on /v1/me")
	}
	return p.fwd.forward(c, rt.service, path, workspaceOf(c))
}

// me answers GET /v1/me.
func (p *public) me(c echo.Context) error {
	me, err := p.app.DescribeMe(c.Request().Context(), workspaceOf(c))
	if err != nil {
		return err
	}
	w := me.Workspace
	out := gatewayapi.Me{
		Workspace:  gatewayapi.MeWorkspace{ID: w.ID, Name: w.Name, Slug: w.Slug},
		Plan:       gatewayapi.MePlan{Name: w.Plan.Name, AIUsed: w.Plan.AIUsed, AILimit: w.Plan.AILimit},
		RateLimit:  gatewayapi.RateLimit{PerMinute: me.RatePerMinute},
		APIVersion: "v1",
	}
	out.Channels = make([]messagingapi.Channel, len(me.Channels))
	for i, ch := range me.Channels {
		out.Channels[i] = messagingapi.Channel{ID: ch.ID, Kind: ch.Kind, ExternalID: ch.ExternalID, AIMode: ch.AIMode, Status: ch.Status}
	}
	return c.JSON(http.StatusOK, out)
}
